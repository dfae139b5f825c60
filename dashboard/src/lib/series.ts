// The node's metrics samples (GET /metrics/series, pushed as `event: metrics`) turned into chart points.

import type { Point } from './chart.js';

export interface MetricsSample {
  seq: number;
  /** Unix milliseconds. */
  t: number;
  intervalMs: number;
  nodes: number;
  generatedTokens: number;
  tokensPerS: number;
  inFlight: number;
  waiting: number;
  ttftMs: { p50: number | null; p95: number | null; p99: number | null; count: number };
  cpu: { pct: number | null; cores: number };
  memory: { usedBytes: number; totalBytes: number };
  gpu: { devices: number; utilPct: number | null; usedBytes: number; totalBytes: number } | null;
}

export interface SeriesView {
  samples: MetricsSample[];
  /** For `node=all`: each node that went into the sum, and whether its figures could be fetched. */
  nodes?: { nodeId: string; name: string; ok: boolean; error: string | null }[];
}

/** The samples of a /metrics/series answer, oldest first, whatever wrapper the node put around them. */
export function samplesOf(body: unknown): MetricsSample[] {
  const root = body as { samples?: unknown; series?: unknown } | null;
  const list = Array.isArray(body) ? body : Array.isArray(root?.samples) ? root.samples : Array.isArray(root?.series) ? root.series : [];
  return (list as MetricsSample[]).filter((s) => typeof s === 'object' && s !== null && typeof s.t === 'number').sort((a, b) => a.t - b.t);
}

/**
 * One value per sample, as chart points; where samples are missing for more than 1.5 intervals (a
 * node that stopped answering) a null point breaks the line instead of drawing across the hole.
 */
export function pointsOf(samples: readonly MetricsSample[], pick: (s: MetricsSample) => number | null): Point[] {
  const out: Point[] = [];
  let previous: MetricsSample | null = null;
  for (const s of samples) {
    if (previous !== null && s.t - previous.t > 1.5 * Math.max(1, s.intervalMs || previous.intervalMs)) out.push({ x: (previous.t + s.t) / 2, y: null });
    const y = pick(s);
    out.push({ x: s.t, y: y === null || !Number.isFinite(y) ? null : y });
    previous = s;
  }
  return out;
}

/** Adds a pushed sample to a series: replaces one with the same time, keeps at most `max`, oldest first. */
export function appendSample(samples: readonly MetricsSample[], sample: MetricsSample, max: number): MetricsSample[] {
  const kept = samples.filter((s) => s.t !== sample.t && s.t < sample.t);
  const newer = samples.filter((s) => s.t > sample.t);
  return [...kept, sample, ...newer].slice(-max);
}
