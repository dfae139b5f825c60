import { randomUUID } from 'node:crypto';
import { Ring } from './ring.js';
import { perSecond } from './rate.js';
import { KEPT_SAMPLES, SAMPLE_INTERVAL_MS, SERIES_SAMPLES, TTFT_WINDOW_MS, toSample, ttftSummaries, type Sample, type WireSample } from './series.js';
import type { SystemReading } from './system.js';
import type { RequestTracker } from './tracker.js';

export interface SamplerOptions {
  tracker: RequestTracker;
  system: { read(): SystemReading };
  /** Default SAMPLE_INTERVAL_MS. */
  intervalMs?: number;
  /** Wall clock, Unix milliseconds. */
  nowMs?: () => number;
}

/**
 * Takes a sample of the node every interval into a ring of KEPT_SAMPLES (the 10-minute series plus
 * one TTFT window before it). Memory is fixed: at most KEPT_SAMPLES x MAX_TTFTS_PER_SAMPLE TTFTs.
 */
export class Sampler {
  /** Changes at every start, so a node asking for "samples after seq n" notices a restart. */
  readonly boot: string = randomUUID();
  private readonly ring = new Ring<WireSample>(KEPT_SAMPLES);
  private readonly listeners = new Set<(sample: WireSample) => void>();
  private readonly intervalMs: number;
  private readonly nowMs: () => number;
  private timer: NodeJS.Timeout | null = null;
  private seq = 0;
  private lastAtMs: number;
  private lastGenerated: number;

  constructor(private readonly options: SamplerOptions) {
    this.intervalMs = options.intervalMs ?? SAMPLE_INTERVAL_MS;
    this.nowMs = options.nowMs ?? Date.now;
    this.lastAtMs = this.nowMs();
    this.lastGenerated = options.tracker.counters().generatedTokens;
  }

  start(): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    // Sampling alone must not keep a process alive.
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.listeners.clear();
  }

  onSample(listener: (sample: WireSample) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Takes one sample now (the timer calls this). */
  sample(): WireSample {
    const t = Math.max(this.nowMs(), (this.ring.newest()?.t ?? 0) + 1);
    const counters = this.options.tracker.counters();
    const system = this.options.system.read();
    const intervalMs = t - this.lastAtMs;
    const generatedTokens = Math.max(0, counters.generatedTokens - this.lastGenerated);
    const ttftUs = this.options.tracker.takeTtfts().map((ms) => Math.round(ms * 1000));
    const recent = [...this.ring].filter((s) => s.t > t - TTFT_WINDOW_MS);
    const [ttftMs] = ttftSummaries([...recent, { t, ttftUs }], [t]);
    const sample: WireSample = {
      seq: ++this.seq,
      t,
      intervalMs,
      nodes: 1,
      generatedTokens,
      tokensPerS: round(perSecond(this.lastGenerated, counters.generatedTokens, intervalMs), 2),
      inFlight: counters.inFlight,
      waiting: counters.waiting,
      ttftMs: ttftMs!,
      cpu: { pct: system.cpu.pct === null ? null : round(system.cpu.pct, 1), cores: system.cpu.cores },
      memory: system.memory,
      gpu: system.gpu === null ? null : { ...system.gpu, utilPct: system.gpu.utilPct === null ? null : round(system.gpu.utilPct, 1) },
      ttftUs,
    };
    this.lastAtMs = t;
    this.lastGenerated = counters.generatedTokens;
    this.ring.push(sample);
    for (const listener of this.listeners) listener(sample);
    return sample;
  }

  /** The last 10 minutes, oldest first. */
  series(): Sample[] {
    const all = this.ring.toArray();
    return all.slice(Math.max(0, all.length - SERIES_SAMPLES)).map(toSample);
  }

  newest(): Sample | null {
    const newest = this.ring.newest();
    return newest === undefined ? null : toSample(newest);
  }

  /** Kept samples after `afterSeq` (all of them for null), with their TTFTs, for another node. */
  wireAfter(afterSeq: number | null): WireSample[] {
    return this.ring.toArray().filter((s) => afterSeq === null || s.seq > afterSeq);
  }
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
