/**
 * Exact percentiles, nearest-rank definition: the p-th percentile of n values is the value at rank
 * ceil(p * n / 100) in ascending order (1-based), i.e. the smallest value that at least p% of the
 * values are less than or equal to. It is always one of the observed values, never an interpolation,
 * and it is the same whichever way the values are split or ordered.
 */

/** The 1-based rank of the p-th percentile among `count` values (p an integer percent in 1..100). */
export function nearestRank(count: number, p: number): number {
  if (!Number.isInteger(p) || p < 1 || p > 100) throw new RangeError(`percentiles are integer percents from 1 to 100, got ${p}`);
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`a percentile needs at least one value, got ${count}`);
  // p * count is an exact integer, so the division is either exact or at least 0.01 from an integer:
  // the ceiling is never off by one through rounding.
  return Math.max(1, Math.ceil((p * count) / 100));
}

/** Percentiles of ascending-sorted values; null for each when there are none. */
export function percentilesOfSorted(sorted: ArrayLike<number>, ps: readonly number[]): (number | null)[] {
  return ps.map((p) => (sorted.length === 0 ? null : sorted[nearestRank(sorted.length, p) - 1]!));
}

/** Percentiles of values in any order (copied, then sorted numerically). */
export function percentiles(values: Iterable<number>, ps: readonly number[]): (number | null)[] {
  const sorted = Float64Array.from(values).sort();
  return percentilesOfSorted(sorted, ps);
}

/** Values observed at one instant (one sample interval's first-token times, for instance). */
export interface TimedValues {
  at: number;
  values: readonly number[];
}

export interface WindowPercentiles {
  /** How many values fell in the window. */
  count: number;
  /** One entry per requested percentile; null when the window is empty. */
  values: (number | null)[];
}

/**
 * For each query time q, the exact percentiles over every value whose `at` lies in (q - windowMs, q].
 * `points` may come in any order; queries are answered in the order given. One pass with a Fenwick
 * tree over the distinct values: O((V + Q) log V) for V values and Q queries, so a cluster-wide
 * history of 300 points over tens of thousands of values stays cheap.
 */
export function windowedPercentiles(points: readonly TimedValues[], queries: readonly number[], windowMs: number, ps: readonly number[]): WindowPercentiles[] {
  if (!(windowMs > 0)) throw new RangeError(`the window must be positive, got ${windowMs}`);
  for (const p of ps) nearestRank(1, p);
  const ordered = [...points].filter((point) => point.values.length > 0).sort((a, b) => a.at - b.at);
  let total = 0;
  for (const point of ordered) total += point.values.length;
  const distinct = new Float64Array(total);
  let k = 0;
  for (const point of ordered) for (const v of point.values) distinct[k++] = v;
  distinct.sort();
  let unique = 0;
  for (let i = 0; i < distinct.length; i += 1) if (i === 0 || distinct[i] !== distinct[unique - 1]) distinct[unique++] = distinct[i]!;
  const keys = distinct.subarray(0, unique);
  const tree = new Fenwick(unique);
  const indexOf = (v: number): number => {
    let lo = 0;
    let hi = unique - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (keys[mid]! < v) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const change = (point: TimedValues, delta: 1 | -1): void => {
    for (const v of point.values) tree.add(indexOf(v), delta);
  };

  // Queries in ascending time, so the window only ever slides forward; answers go back in the caller's order.
  const order = queries.map((_, i) => i).sort((a, b) => queries[a]! - queries[b]!);
  const answers = new Array<WindowPercentiles>(queries.length);
  let added = 0;
  let removed = 0;
  let inWindow = 0;
  for (const qi of order) {
    const q = queries[qi]!;
    while (added < ordered.length && ordered[added]!.at <= q) {
      change(ordered[added]!, 1);
      inWindow += ordered[added]!.values.length;
      added += 1;
    }
    while (removed < added && ordered[removed]!.at <= q - windowMs) {
      change(ordered[removed]!, -1);
      inWindow -= ordered[removed]!.values.length;
      removed += 1;
    }
    answers[qi] = { count: inWindow, values: ps.map((p) => (inWindow === 0 ? null : keys[tree.kth(nearestRank(inWindow, p))]!)) };
  }
  return answers;
}

/** Counts per index with prefix sums and k-th lookup in O(log n). */
class Fenwick {
  private readonly tree: Int32Array;
  private readonly top: number;

  constructor(readonly size: number) {
    this.tree = new Int32Array(size + 1);
    let top = 1;
    while (top * 2 <= size) top *= 2;
    this.top = top;
  }

  add(index: number, delta: number): void {
    for (let i = index + 1; i <= this.size; i += i & -i) this.tree[i]! += delta;
  }

  /** The 0-based index holding the k-th (1-based) counted item. */
  kth(k: number): number {
    let position = 0;
    let remaining = k;
    for (let step = this.top; step > 0; step >>= 1) {
      const next = position + step;
      if (next <= this.size && this.tree[next]! < remaining) {
        position = next;
        remaining -= this.tree[next]!;
      }
    }
    return position;
  }
}
