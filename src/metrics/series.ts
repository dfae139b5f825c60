import { z } from 'zod';
import { windowedPercentiles } from './percentiles.js';

/** One sample every this often. */
export const SAMPLE_INTERVAL_MS = 2000;
/** Samples shown as a series: 10 minutes. */
export const SERIES_SAMPLES = 300;
/** TTFT percentiles cover the first tokens of this long before each sample. */
export const TTFT_WINDOW_MS = 5 * 60 * 1000;
/**
 * Samples a node keeps: the series plus one TTFT window before its oldest point, so the cluster-wide
 * percentiles of even the oldest point shown are computed over a full window.
 */
export const KEPT_SAMPLES = SERIES_SAMPLES + TTFT_WINDOW_MS / SAMPLE_INTERVAL_MS;
/**
 * First-token times kept per sample interval. Up to this many (128 first tokens per second over a
 * 2 s interval) every one counts; beyond it a uniform random subset of this size stands for them.
 */
export const MAX_TTFTS_PER_SAMPLE = 256;
export const TTFT_PERCENTILES = [50, 95, 99] as const;

const Count = z.number().int().nonnegative();
const Bytes = z.number().nonnegative();

export const TtftSummary = z.strictObject({
  /** Milliseconds, exact nearest-rank percentiles; null when no first token came in the window. */
  p50: z.number().nonnegative().nullable(),
  p95: z.number().nonnegative().nullable(),
  p99: z.number().nonnegative().nullable(),
  /** First tokens in the window the percentiles are over. */
  count: Count,
});
export type TtftSummary = z.infer<typeof TtftSummary>;

export const GpuUse = z.strictObject({
  devices: z.number().int().positive(),
  /** Mean utilization over the devices, 0-100; null when the driver does not say. */
  utilPct: z.number().min(0).max(100).nullable(),
  usedBytes: Bytes,
  totalBytes: Bytes,
});
export type GpuUse = z.infer<typeof GpuUse>;

/** What the dashboard charts, one point per SAMPLE_INTERVAL_MS. */
export const Sample = z.strictObject({
  /** Increases by one per sample of a node's start; for a cluster sum, the time bucket. */
  seq: Count,
  /** Wall-clock milliseconds (Unix epoch) when the sample was taken; for a cluster sum, the bucket's time. */
  t: Count,
  /** Time the rates are over. */
  intervalMs: z.number().nonnegative(),
  /** How many nodes the figures add up: 1 for a node, the nodes that reported for a cluster sum. */
  nodes: Count,
  generatedTokens: Count,
  tokensPerS: z.number().nonnegative(),
  /** Requests between arrival and end (includes the waiting ones). */
  inFlight: Count,
  /** Requests in flight whose first event has not arrived (queued in a runner). */
  waiting: Count,
  ttftMs: TtftSummary,
  cpu: z.strictObject({
    /** Busy share of all cores together, 0-100; null for the first sample. */
    pct: z.number().min(0).max(100).nullable(),
    cores: z.number().int().positive(),
  }),
  memory: z.strictObject({ usedBytes: Bytes, totalBytes: Bytes }),
  /** Null when this node has no GPU Shoal can read (see docs/API.md, "Metrics"). */
  gpu: GpuUse.nullable(),
});
export type Sample = z.infer<typeof Sample>;

/** A sample as nodes exchange it: with the first-token times of its interval, for cluster percentiles. */
export const WireSample = z.strictObject({
  ...Sample.shape,
  /** TTFTs of the interval in integer microseconds (small on the wire, exact enough). */
  ttftUs: z.array(z.number().int().nonnegative()).max(MAX_TTFTS_PER_SAMPLE),
});
export type WireSample = z.infer<typeof WireSample>;

export function toSample(wire: WireSample): Sample {
  const { ttftUs: _ttftUs, ...sample } = wire;
  return sample;
}

const US_PER_MS = 1000;

/** The TTFT percentiles at each of `times`, over the samples' first-token lists. */
export function ttftSummaries(samples: readonly { t: number; ttftUs: readonly number[] }[], times: readonly number[], windowMs: number = TTFT_WINDOW_MS): TtftSummary[] {
  const points = samples.map((s) => ({ at: s.t, values: s.ttftUs }));
  return windowedPercentiles(points, times, windowMs, TTFT_PERCENTILES).map(({ count, values }) => ({
    p50: values[0] === null || values[0] === undefined ? null : values[0] / US_PER_MS,
    p95: values[1] === null || values[1] === undefined ? null : values[1] / US_PER_MS,
    p99: values[2] === null || values[2] === undefined ? null : values[2] / US_PER_MS,
    count,
  }));
}

export interface NodeSamples {
  nodeId: string;
  samples: readonly WireSample[];
}

/**
 * The cluster's series: samples aligned on SAMPLE_INTERVAL_MS buckets of their wall-clock time (the
 * nodes' clocks are assumed within a second of each other), summed per bucket over the nodes that have
 * a sample there. CPU is the core-weighted mean, GPU utilization the device-weighted mean; TTFT
 * percentiles are exact over the union of every node's first-token times in each bucket's window.
 * Returns at most `points` buckets, ending at the newest.
 */
export function sumSeries(nodes: readonly NodeSamples[], options: { intervalMs?: number; points?: number; ttftWindowMs?: number } = {}): Sample[] {
  const intervalMs = options.intervalMs ?? SAMPLE_INTERVAL_MS;
  const points = options.points ?? SERIES_SAMPLES;
  const buckets = new Map<number, WireSample[]>();
  for (const node of nodes) {
    // One sample per node per bucket: a late timer can put two in one bucket, and adding both would double the node.
    const mine = new Map<number, WireSample>();
    for (const sample of node.samples) {
      const key = Math.round(sample.t / intervalMs);
      const known = mine.get(key);
      if (!known || known.seq < sample.seq) mine.set(key, sample);
    }
    for (const [key, sample] of mine) {
      const list = buckets.get(key);
      if (list) list.push(sample);
      else buckets.set(key, [sample]);
    }
  }
  if (buckets.size === 0) return [];
  const keys = [...buckets.keys()].sort((a, b) => a - b);
  const newest = keys.at(-1)!;
  const shown = keys.filter((k) => k > newest - points);
  const ttft = ttftSummaries(
    keys.map((k) => ({ t: k * intervalMs, ttftUs: buckets.get(k)!.flatMap((s) => s.ttftUs) })),
    shown.map((k) => k * intervalMs),
    options.ttftWindowMs ?? TTFT_WINDOW_MS,
  );
  return shown.map((key, i) => {
    const group = buckets.get(key)!;
    const sum = (pick: (s: WireSample) => number): number => group.reduce((acc, s) => acc + pick(s), 0);
    const cpuKnown = group.filter((s) => s.cpu.pct !== null);
    const cpuCores = sum((s) => s.cpu.cores);
    const gpus = group.filter((s) => s.gpu !== null).map((s) => s.gpu!);
    const gpuUtil = gpus.filter((g) => g.utilPct !== null);
    const gpuUtilDevices = gpuUtil.reduce((acc, g) => acc + g.devices, 0);
    return {
      seq: key,
      t: key * intervalMs,
      intervalMs,
      nodes: sum((s) => s.nodes),
      generatedTokens: sum((s) => s.generatedTokens),
      tokensPerS: sum((s) => s.tokensPerS),
      inFlight: sum((s) => s.inFlight),
      waiting: sum((s) => s.waiting),
      ttftMs: ttft[i]!,
      cpu: {
        pct: cpuKnown.length === 0 ? null : clampPct(cpuKnown.reduce((acc, s) => acc + s.cpu.pct! * s.cpu.cores, 0) / cpuKnown.reduce((acc, s) => acc + s.cpu.cores, 0)),
        cores: cpuCores,
      },
      memory: { usedBytes: sum((s) => s.memory.usedBytes), totalBytes: sum((s) => s.memory.totalBytes) },
      gpu:
        gpus.length === 0
          ? null
          : {
              devices: gpus.reduce((acc, g) => acc + g.devices, 0),
              utilPct: gpuUtilDevices === 0 ? null : clampPct(gpuUtil.reduce((acc, g) => acc + g.utilPct! * g.devices, 0) / gpuUtilDevices),
              usedBytes: gpus.reduce((acc, g) => acc + g.usedBytes, 0),
              totalBytes: gpus.reduce((acc, g) => acc + g.totalBytes, 0),
            },
    };
  });
}

/** A weighted mean of shares can land an ulp outside 0-100. */
function clampPct(value: number): number {
  return Math.min(100, Math.max(0, value));
}
