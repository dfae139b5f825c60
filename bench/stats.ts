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

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

export function summarize(samples: number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const round = (x: number): number => Math.round(x * 1000) / 1000;
  return {
    median: round(quantile(sorted, 0.5)),
    min: round(sorted[0] ?? NaN),
    max: round(sorted.at(-1) ?? NaN),
    p25: round(quantile(sorted, 0.25)),
    p75: round(quantile(sorted, 0.75)),
    n: samples.length,
    samples: samples.map(round),
  };
}
