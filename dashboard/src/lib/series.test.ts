import assert from 'node:assert/strict';
import { test } from 'node:test';
import { appendSample, pointsOf, samplesOf, type MetricsSample } from './series.js';

function sample(t: number, tokensPerS: number): MetricsSample {
  return {
    seq: t / 2000,
    t,
    intervalMs: 2000,
    nodes: 1,
    generatedTokens: 0,
    tokensPerS,
    inFlight: 0,
    waiting: 0,
    ttftMs: { p50: null, p95: null, p99: null, count: 0 },
    cpu: { pct: null, cores: 2 },
    memory: { usedBytes: 1, totalBytes: 2 },
    gpu: null,
  };
}

test('samples come out oldest first from any wrapper', () => {
  const list = [sample(4000, 2), sample(2000, 1)];
  assert.deepEqual(samplesOf({ samples: list }).map((s) => s.t), [2000, 4000]);
  assert.deepEqual(samplesOf(list).map((s) => s.t), [2000, 4000]);
  assert.deepEqual(samplesOf({ nothing: true }), []);
});

test('a hole of more than 1.5 intervals breaks the line; null values stay null', () => {
  const points = pointsOf([sample(2000, 1), sample(4000, 2), sample(10_000, 3)], (s) => (s.t === 4000 ? null : s.tokensPerS));
  assert.deepEqual(points, [
    { x: 2000, y: 1 },
    { x: 4000, y: null },
    { x: 7000, y: null },
    { x: 10_000, y: 3 },
  ]);
});

test('pushed samples replace the same time and keep the newest max', () => {
  let list = [sample(2000, 1), sample(4000, 2)];
  list = appendSample(list, sample(4000, 5), 10);
  assert.deepEqual(list.map((s) => s.tokensPerS), [1, 5]);
  list = appendSample(list, sample(6000, 6), 2);
  assert.deepEqual(list.map((s) => s.t), [4000, 6000]);
});
