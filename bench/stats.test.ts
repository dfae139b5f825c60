import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { alternation, percentile, percentiles, ratio, summarize } from './stats.js';

describe('summarize', () => {
  it('gives the median and spread of unsorted samples, keeping them in their order', () => {
    const s = summarize([5, 1, 3, 2, 4]);
    assert.deepEqual({ median: s.median, min: s.min, max: s.max, p25: s.p25, p75: s.p75, n: s.n }, { median: 3, min: 1, max: 5, p25: 2, p75: 4, n: 5 });
    assert.deepEqual(s.samples, [5, 1, 3, 2, 4]);
  });

  it('interpolates the median of an even count and rounds to 3 decimals', () => {
    assert.equal(summarize([1, 2]).median, 1.5);
    assert.equal(summarize([1 / 3]).median, 0.333);
  });

  it('is NaN, not an exception, without samples', () => {
    assert.ok(Number.isNaN(summarize([]).median));
    assert.equal(summarize([]).n, 0);
  });
});

describe('percentile and percentiles', () => {
  it('interpolates between neighbours', () => {
    const xs = Array.from({ length: 21 }, (_, i) => i * 10); // 0..200
    assert.equal(percentile(xs, 0.5), 100);
    assert.equal(percentile(xs, 0.95), 190);
    assert.equal(percentile([10, 20], 0.95), 19.5);
  });

  it('rejects a quantile outside 0..1', () => {
    assert.throws(() => percentile([1], 95), RangeError);
  });

  it('p50 and p95 of one sample are that sample', () => {
    assert.deepEqual(percentiles([42]), { p50: 42, p95: 42, min: 42, max: 42, n: 1 });
  });

  it('does not depend on input order', () => {
    assert.deepEqual(percentiles([3, 1, 2, 100]), percentiles([100, 2, 3, 1]));
  });
});

describe('ratio', () => {
  it('divides to 3 decimals', () => {
    assert.equal(ratio(2, 3), 0.667);
  });

  it('is null when it cannot be stated', () => {
    assert.equal(ratio(1, 0), null);
    assert.equal(ratio(null, 1), null);
    assert.equal(ratio(NaN, 1), null);
    assert.equal(ratio(1, undefined), null);
  });
});

describe('alternation', () => {
  it('rotates the sides by one per repetition, so each goes first equally often', () => {
    const sides = ['a', 'b', 'c'];
    const orders = [0, 1, 2, 3].map((rep) => alternation(sides, rep));
    assert.deepEqual(orders, [
      ['a', 'b', 'c'],
      ['b', 'c', 'a'],
      ['c', 'a', 'b'],
      ['a', 'b', 'c'],
    ]);
    const firsts = Array.from({ length: 6 }, (_, rep) => alternation(['x', 'y'], rep)[0]);
    assert.equal(firsts.filter((f) => f === 'x').length, 3);
  });

  it('copes with no sides and a negative repetition', () => {
    assert.deepEqual(alternation([], 3), []);
    assert.deepEqual(alternation(['a', 'b'], -1), ['b', 'a']);
  });
});
