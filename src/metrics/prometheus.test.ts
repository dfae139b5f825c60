import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createNodeMetrics } from './prometheus.js';
import { parseExposition, type MetricFamily } from './prometheus-text.test-support.js';
import { RequestTracker } from './tracker.js';
import type { Sample } from './series.js';

function value(families: Map<string, MetricFamily>, name: string, labels: Record<string, string> = {}): number | undefined {
  const family = [...families.values()].find((f) => f.samples.some((s) => s.name === name));
  return family?.samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

const sample = (overrides: Partial<Sample> = {}): Sample => ({
  seq: 1,
  t: 1,
  intervalMs: 2000,
  nodes: 1,
  generatedTokens: 0,
  tokensPerS: 7.5,
  inFlight: 0,
  waiting: 0,
  ttftMs: { p50: 10, p95: 20, p99: 30, count: 3 },
  cpu: { pct: 40, cores: 8 },
  memory: { usedBytes: 100, totalBytes: 1000 },
  gpu: null,
  ...overrides,
});

test('the exposition parses strictly and the counters follow the requests', async () => {
  let tracker: RequestTracker | null = null;
  const metrics = createNodeMetrics({ nodeId: '12D3KooWtest', name: 'a "quoted"\\name', version: '0.1.0' }, () => tracker!.counters());
  tracker = new RequestTracker({ maxTtftsPerTake: 10, random: Math.random, observer: metrics.observer });
  let families = parseExposition(await metrics.registry.metrics());
  assert.equal(families.get('shoal_requests_total')?.type, 'counter');
  assert.equal(families.get('shoal_time_to_first_token_seconds')?.type, 'histogram');
  assert.equal(value(families, 'shoal_requests_total', { kind: 'generate', outcome: 'ok' }), 0, 'every series exists from the start');
  assert.equal(value(families, 'shoal_node_info', { name: 'a "quoted"\\name' }), 1, 'label values are escaped and read back');

  const r = tracker.arrive('generate', 0);
  tracker.observe(r, { type: 'start', promptTokens: 4 }, 1);
  tracker.observe(r, { type: 'text', text: 'x' }, 30);
  const waitingOne = tracker.arrive('generate', 0);
  families = parseExposition(await metrics.registry.metrics());
  assert.equal(value(families, 'shoal_requests_in_flight'), 2, 'read live at the scrape');
  assert.equal(value(families, 'shoal_requests_waiting'), 1);
  tracker.observe(r, { type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 4, completionTokens: 3 } }, 40);
  tracker.finish(waitingOne, 'cancelled');
  tracker.refuse('embed');
  families = parseExposition(await metrics.registry.metrics());
  assert.equal(value(families, 'shoal_requests_total', { kind: 'generate', outcome: 'ok' }), 1);
  assert.equal(value(families, 'shoal_requests_total', { kind: 'generate', outcome: 'cancelled' }), 1);
  assert.equal(value(families, 'shoal_requests_total', { kind: 'embed', outcome: 'refused' }), 1);
  assert.equal(value(families, 'shoal_generated_tokens_total'), 3);
  assert.equal(value(families, 'shoal_prompt_tokens_total'), 4);
  assert.equal(value(families, 'shoal_time_to_first_token_seconds_count'), 1);
  assert.equal(value(families, 'shoal_time_to_first_token_seconds_bucket', { le: '0.025' }), 0);
  assert.equal(value(families, 'shoal_time_to_first_token_seconds_bucket', { le: '0.05' }), 1, '30 ms');
  assert.equal(value(families, 'shoal_requests_in_flight'), 0);
});

test('sampled gauges: percentiles present only when known, GPU only once read', async () => {
  const metrics = createNodeMetrics({ nodeId: 'n', name: 'n', version: 'v' }, () => ({ inFlight: 0, waiting: 0, generatedTokens: 0, promptTokens: 0 }));
  metrics.updateFromSample(sample());
  let families = parseExposition(await metrics.registry.metrics());
  assert.equal(value(families, 'shoal_time_to_first_token_window_seconds', { quantile: '0.99' }), 0.03);
  assert.equal(value(families, 'shoal_generated_tokens_per_second'), 7.5);
  assert.equal(value(families, 'shoal_node_cpu_percent'), 40);
  assert.equal(families.has('shoal_node_gpu_memory_total_bytes'), false, 'no GPU, no GPU gauges');

  metrics.updateFromSample(sample({ ttftMs: { p50: null, p95: null, p99: null, count: 0 }, gpu: { devices: 2, utilPct: 50, usedBytes: 5, totalBytes: 10 } }));
  families = parseExposition(await metrics.registry.metrics());
  assert.equal(value(families, 'shoal_time_to_first_token_window_seconds', { quantile: '0.5' }), undefined, 'no first token: no percentile');
  assert.equal(value(families, 'shoal_node_gpu_memory_total_bytes'), 10);
  assert.equal(value(families, 'shoal_node_gpu_utilization_percent'), 50);

  metrics.updateFromSample(sample({ gpu: { devices: 2, utilPct: null, usedBytes: 5, totalBytes: 10 } }));
  families = parseExposition(await metrics.registry.metrics());
  assert.equal(families.has('shoal_node_gpu_utilization_percent'), false, 'an unknown figure is withdrawn');
  metrics.updateFromSample(sample({ gpu: { devices: 1, utilPct: 20, usedBytes: 1, totalBytes: 2 } }));
  metrics.updateFromSample(sample({ gpu: null }));
  families = parseExposition(await metrics.registry.metrics());
  assert.equal(families.has('shoal_node_gpu_memory_total_bytes'), false);
  metrics.updateFromSample(sample({ gpu: { devices: 1, utilPct: 20, usedBytes: 1, totalBytes: 2 } }));
  families = parseExposition(await metrics.registry.metrics());
  assert.equal(value(families, 'shoal_node_gpu_utilization_percent'), 20, 'and comes back');
});

test('two nodes in one process have separate registries', async () => {
  const zero = () => ({ inFlight: 0, waiting: 0, generatedTokens: 0, promptTokens: 0 });
  const a = createNodeMetrics({ nodeId: 'a', name: 'a', version: 'v' }, zero);
  const b = createNodeMetrics({ nodeId: 'b', name: 'b', version: 'v' }, zero);
  a.observer.generated?.(5);
  assert.equal(value(parseExposition(await a.registry.metrics()), 'shoal_generated_tokens_total'), 5);
  assert.equal(value(parseExposition(await b.registry.metrics()), 'shoal_generated_tokens_total'), 0);
});
