import assert from 'node:assert/strict';
import { test } from 'node:test';
import { percentiles } from './percentiles.js';
import { KEPT_SAMPLES, SAMPLE_INTERVAL_MS, SERIES_SAMPLES, Sample, sumSeries, toSample, ttftSummaries, WireSample } from './series.js';

function wire(overrides: Partial<WireSample> & { t: number }): WireSample {
  return {
    seq: 1,
    intervalMs: 2000,
    nodes: 1,
    generatedTokens: 0,
    tokensPerS: 0,
    inFlight: 0,
    waiting: 0,
    ttftMs: { p50: null, p95: null, p99: null, count: 0 },
    cpu: { pct: 50, cores: 2 },
    memory: { usedBytes: 1, totalBytes: 10 },
    gpu: null,
    ttftUs: [],
    ...overrides,
  };
}

test('the kept history covers the shown series plus one TTFT window', () => {
  assert.equal(SERIES_SAMPLES, 300);
  assert.equal(KEPT_SAMPLES, 450);
});

test('toSample drops the first-token list and the result is a valid sample', () => {
  const w = wire({ t: 5, ttftUs: [1, 2] });
  const s = toSample(w);
  assert.equal('ttftUs' in s, false);
  assert.equal(Sample.safeParse(s).success, true);
  assert.equal(WireSample.safeParse(w).success, true);
  assert.equal(WireSample.safeParse({ ...w, ttftUs: new Array(257).fill(1) }).success, false, 'bounded on the wire');
});

test('ttftSummaries turns microseconds into milliseconds, exact', () => {
  const [summary] = ttftSummaries([{ t: 0, ttftUs: [1500, 2500, 10_000] }], [0]);
  assert.deepEqual(summary, { p50: 2.5, p95: 10, p99: 10, count: 3 });
  assert.deepEqual(ttftSummaries([], [0]), [{ p50: null, p95: null, p99: null, count: 0 }]);
});

test('two nodes sum per 2 s bucket; CPU is core-weighted; a bucket with one node counts one', () => {
  const a = [wire({ seq: 1, t: 10_000, tokensPerS: 5, generatedTokens: 10, inFlight: 2, waiting: 1, cpu: { pct: 100, cores: 2 } }), wire({ seq: 2, t: 12_000, tokensPerS: 1 })];
  // Node b samples 700 ms later than a: the same buckets.
  const b = [wire({ seq: 7, t: 10_700, tokensPerS: 3, generatedTokens: 6, inFlight: 1, cpu: { pct: 0, cores: 6 }, memory: { usedBytes: 4, totalBytes: 20 } })];
  const sum = sumSeries([{ nodeId: 'a', samples: a }, { nodeId: 'b', samples: b }]);
  assert.equal(sum.length, 2);
  const [first, second] = sum as [Sample, Sample];
  assert.equal(first.t, 10_000);
  assert.equal(first.nodes, 2);
  assert.equal(first.tokensPerS, 8);
  assert.equal(first.generatedTokens, 16);
  assert.equal(first.inFlight, 3);
  assert.equal(first.waiting, 1);
  assert.deepEqual(first.cpu, { pct: 25, cores: 8 });
  assert.deepEqual(first.memory, { usedBytes: 5, totalBytes: 30 });
  assert.equal(second.nodes, 1);
  assert.equal(second.tokensPerS, 1);
  for (const s of sum) assert.equal(Sample.safeParse(s).success, true);
});

test('a node with two samples in one bucket (a late timer) counts once, with its newer sample', () => {
  const a = [wire({ seq: 1, t: 9_900, tokensPerS: 4 }), wire({ seq: 2, t: 10_400, tokensPerS: 6 })];
  const [only] = sumSeries([{ nodeId: 'a', samples: a }]);
  assert.equal(only!.nodes, 1);
  assert.equal(only!.tokensPerS, 6);
});

test('GPU figures sum over the nodes that have one; utilization is device-weighted; unknowns stay unknown', () => {
  const a = [wire({ t: 0, gpu: { devices: 1, utilPct: 90, usedBytes: 1, totalBytes: 8 } })];
  const b = [wire({ t: 0, gpu: { devices: 3, utilPct: 10, usedBytes: 2, totalBytes: 24 } })];
  const c = [wire({ t: 0, gpu: null, cpu: { pct: null, cores: 4 } })];
  const d = [wire({ t: 0, gpu: { devices: 2, utilPct: null, usedBytes: 1, totalBytes: 2 } })];
  const [s] = sumSeries([a, b, c, d].map((samples, i) => ({ nodeId: String(i), samples })));
  assert.deepEqual(s!.gpu, { devices: 6, utilPct: 30, usedBytes: 4, totalBytes: 34 });
  assert.deepEqual(s!.cpu, { pct: 50, cores: 10 }, 'a node without a CPU figure adds cores but not to the mean');
  const [none] = sumSeries([{ nodeId: 'c', samples: c }]);
  assert.equal(none!.gpu, null);
  assert.equal(none!.cpu.pct, null);
});

test('cluster TTFT percentiles are exact over the union of the nodes’ first tokens in each window', () => {
  const a: WireSample[] = [];
  const b: WireSample[] = [];
  let x = 7;
  const next = (): number => (x = (x * 1103515245 + 12345) % 2 ** 31) % 100_000;
  for (let i = 0; i < KEPT_SAMPLES; i += 1) {
    a.push(wire({ seq: i + 1, t: i * SAMPLE_INTERVAL_MS, ttftUs: Array.from({ length: i % 4 }, next) }));
    b.push(wire({ seq: i + 1, t: i * SAMPLE_INTERVAL_MS + 900, ttftUs: Array.from({ length: i % 3 }, next) }));
  }
  const sum = sumSeries([{ nodeId: 'a', samples: a }, { nodeId: 'b', samples: b }]);
  assert.equal(sum.length, SERIES_SAMPLES);
  for (const point of [sum[0]!, sum[123]!, sum.at(-1)!]) {
    const inWindow = [...a, ...b].filter((s) => Math.round(s.t / SAMPLE_INTERVAL_MS) * SAMPLE_INTERVAL_MS > point.t - 300_000 && Math.round(s.t / SAMPLE_INTERVAL_MS) * SAMPLE_INTERVAL_MS <= point.t).flatMap((s) => s.ttftUs);
    const [p50, p95, p99] = percentiles(inWindow, [50, 95, 99]).map((v) => (v === null ? null : v / 1000));
    assert.deepEqual(point.ttftMs, { p50, p95, p99, count: inWindow.length });
    assert.ok(point.ttftMs.count > 200, 'a full window: 150 buckets of both nodes');
  }
});

test('only the newest `points` buckets are returned; nothing in, nothing out', () => {
  const samples = Array.from({ length: 10 }, (_, i) => wire({ seq: i + 1, t: i * 2000 }));
  assert.deepEqual(sumSeries([{ nodeId: 'a', samples }], { points: 3 }).map((s) => s.t), [14_000, 16_000, 18_000]);
  assert.deepEqual(sumSeries([]), []);
  assert.deepEqual(sumSeries([{ nodeId: 'a', samples: [] }]), []);
});
