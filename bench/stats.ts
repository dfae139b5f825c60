/** Summary statistics for benchmark samples: median and spread, never a lone mean. */
export interface Summary {
  median: number;
  min: number;
  max: number;
  p25: number;
  p75: number;
  n: number;
  samples: number[];
}

/** A latency distribution: the percentiles a report quotes for time to first token. */
export interface Percentiles {
  p50: number;
  p95: number;
  min: number;
  max: number;
  n: number;
}

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

/** The q-quantile (0..1) of the samples, linearly interpolated between neighbours; NaN when empty. */
export function percentile(samples: readonly number[], q: number): number {
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile must be within 0..1, got ${q}`);
  return quantile([...samples].sort((a, b) => a - b), q);
}

export function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    median: round3(quantile(sorted, 0.5)),
    min: round3(sorted[0] ?? NaN),
    max: round3(sorted.at(-1) ?? NaN),
    p25: round3(quantile(sorted, 0.25)),
    p75: round3(quantile(sorted, 0.75)),
    n: samples.length,
    samples: samples.map(round3),
  };
}

export function percentiles(samples: readonly number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b);
  return {
    p50: round3(quantile(sorted, 0.5)),
    p95: round3(quantile(sorted, 0.95)),
    min: round3(sorted[0] ?? NaN),
    max: round3(sorted.at(-1) ?? NaN),
    n: sorted.length,
  };
}

/** `a / b` to 3 decimals; null when either is missing or b is 0 (a ratio that cannot be stated). */
export function ratio(a: number | null | undefined, b: number | null | undefined): number | null {
  if (typeof a !== 'number' || typeof b !== 'number' || !Number.isFinite(a) || !Number.isFinite(b) || b === 0) return null;
  return round3(a / b);
}

/**
 * The order in which to run the sides of an A/B(/C...) comparison in repetition `rep`: rotated by one
 * each repetition, so every side runs first equally often and slow drift (thermal, page cache, a
 * neighbour's load) falls on all sides alike.
 */
export function alternation<T>(sides: readonly T[], rep: number): T[] {
  if (sides.length === 0) return [];
  const shift = ((rep % sides.length) + sides.length) % sides.length;
  return [...sides.slice(shift), ...sides.slice(0, shift)];
}
