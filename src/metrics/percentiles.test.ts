import assert from 'node:assert/strict';
import { test } from 'node:test';
import { nearestRank, percentiles, percentilesOfSorted, windowedPercentiles, type TimedValues } from './percentiles.js';

test('nearest rank: the smallest value that at least p% of the values are at or below', () => {
  const oneToHundred = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.deepEqual(percentiles(oneToHundred, [1, 50, 95, 99, 100]), [1, 50, 95, 99, 100]);
  const oneToTen = Array.from({ length: 10 }, (_, i) => i + 1);
  assert.deepEqual(percentiles(oneToTen, [50, 95, 99]), [5, 10, 10]);
  assert.deepEqual(percentiles([7], [1, 50, 100]), [7, 7, 7]);
  assert.deepEqual(percentiles([3, 1, 2], [50]), [2], 'order does not matter');
  assert.deepEqual(percentiles([], [50, 99]), [null, null]);
  assert.deepEqual(percentiles([0.25, 0.5, 0.125, 1e6], [50, 99]), [0.25, 1e6], 'numeric, not lexicographic, order');
});

test('nearestRank is exact for every count up to 1000 and every integer percent', () => {
  for (let n = 1; n <= 1000; n += 1) {
    for (let p = 1; p <= 100; p += 1) {
      const rank = nearestRank(n, p);
      // The defining inequalities, in integers: rank/n >= p/100 and (rank-1)/n < p/100.
      assert.ok(rank * 100 >= p * n && (rank - 1) * 100 < p * n, `n=${n} p=${p} rank=${rank}`);
    }
  }
});

test('percentiles refuse what they are not defined for', () => {
  assert.throws(() => nearestRank(10, 0), RangeError);
  assert.throws(() => nearestRank(10, 101), RangeError);
  assert.throws(() => nearestRank(10, 99.9), RangeError);
  assert.throws(() => nearestRank(0, 50), RangeError);
  assert.deepEqual(percentilesOfSorted([], [50]), [null]);
  assert.throws(() => windowedPercentiles([], [0], 0, [50]), RangeError);
  assert.throws(() => windowedPercentiles([], [0], 10, [0]), RangeError);
});

/** Deterministic pseudo-random numbers (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function naive(points: readonly TimedValues[], q: number, windowMs: number, ps: readonly number[]): { count: number; values: (number | null)[] } {
  const values = points.filter((p) => p.at > q - windowMs && p.at <= q).flatMap((p) => [...p.values]);
  return { count: values.length, values: percentiles(values, ps) };
}

test('windowedPercentiles equals sorting each window, over 300 random histories', () => {
  const ps = [1, 25, 50, 95, 99, 100];
  for (let seed = 1; seed <= 300; seed += 1) {
    const random = rng(seed);
    const windowMs = 1 + Math.floor(random() * 20);
    const points: TimedValues[] = [];
    const pointCount = Math.floor(random() * 30);
    for (let i = 0; i < pointCount; i += 1) {
      // Few distinct values and repeated times: duplicates and ties on the window edges are the hard cases.
      const values = Array.from({ length: Math.floor(random() * 6) }, () => Math.floor(random() * 12) / 4);
      points.push({ at: Math.floor(random() * 50), values });
    }
    // Queries out of order and repeated, before, inside and after the points.
    const queries = Array.from({ length: 1 + Math.floor(random() * 15) }, () => Math.floor(random() * 70) - 10);
    const answers = windowedPercentiles(points, queries, windowMs, ps);
    queries.forEach((q, i) => assert.deepEqual(answers[i], naive(points, q, windowMs, ps), `seed ${seed} query ${q} window ${windowMs}`));
  }
});

test('the window is (q - window, q]: a value exactly one window old has left it', () => {
  const points = [{ at: 0, values: [5] }, { at: 10, values: [7] }];
  const [atTen, atNine, atTwenty] = windowedPercentiles(points, [10, 9, 20], 10, [50]);
  assert.deepEqual(atTen, { count: 1, values: [7] });
  assert.deepEqual(atNine, { count: 1, values: [5] });
  assert.deepEqual(atTwenty, { count: 0, values: [null] });
});

test('windowedPercentiles stays exact over a large history', () => {
  const random = rng(42);
  const points = Array.from({ length: 450 }, (_, i) => ({ at: i * 2000, values: Array.from({ length: 40 }, () => Math.round(random() * 1e6)) }));
  const queries = points.slice(150).map((p) => p.at);
  const answers = windowedPercentiles(points, queries, 300_000, [50, 95, 99]);
  for (const i of [0, 77, 299]) assert.deepEqual(answers[i], naive(points, queries[i]!, 300_000, [50, 95, 99]));
  assert.equal(answers[0]!.count, 150 * 40);
});
