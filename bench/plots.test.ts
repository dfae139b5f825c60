import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { concurrencyPoints, renderPng, throughputSpec, ttftSpec } from './plots.js';

const summary = (median: number) => ({ median, min: median - 1, max: median + 1, p25: median, p75: median, n: 3, samples: [] });
const result = {
  results: [
    { clients: 1, shoal: { aggregateTokPerS: summary(50), ttftMs: { p50: 20, p95: 25 } }, llamaServer: { aggregateTokPerS: summary(60), ttftMs: { p50: 10, p95: 12 } } },
    { clients: 4, shoal: { aggregateTokPerS: summary(150), ttftMs: { p50: 40, p95: 90 } }, llamaServer: { aggregateTokPerS: 'broken', ttftMs: { p50: 30 } } },
    { clients: 'x' },
  ],
};

describe('concurrency plots', () => {
  it('takes the points from a concurrency result, leaving out what is missing', () => {
    const { throughput, ttft } = concurrencyPoints(result);
    assert.deepEqual(throughput.map((p) => [p.clients, p.server, p.tokPerS, p.min, p.max]), [
      [1, "Shoal's API", 50, 49, 51],
      [1, 'llama-server, launched by hand', 60, 59, 61],
      [4, "Shoal's API", 150, 149, 151],
    ]);
    assert.equal(ttft.length, 7);
    assert.deepEqual(ttft.filter((p) => p.clients === 4 && p.server.startsWith('llama')), [{ clients: 4, server: 'llama-server, launched by hand', percentile: 'p50', ms: 30 }]);
    assert.deepEqual(concurrencyPoints(null), { throughput: [], ttft: [] });
  });

  it('titles the charts and labels the axes with units', () => {
    const { throughput, ttft } = concurrencyPoints(result);
    const t = JSON.stringify(throughputSpec(throughput, 'sub'));
    assert.match(t, /Aggregate decode throughput vs concurrent clients/);
    assert.match(t, /Aggregate decode throughput \(tokens\/s\)/);
    assert.match(t, /Concurrent clients/);
    assert.match(t, /"title":"Server"/);
    const l = JSON.stringify(ttftSpec(ttft, 'sub'));
    assert.match(l, /Time to first token \(ms\)/);
    assert.match(l, /p50 solid, p95 dashed/);
  });

  it('renders a PNG', async () => {
    const png = await renderPng(throughputSpec(concurrencyPoints(result).throughput, 'test'));
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.ok(png.length > 5000, `a chart with lines and axes, not an empty image (${png.length} bytes)`);
  });
});
