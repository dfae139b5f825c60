import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { GpuReading } from '../wire/telemetry.js';
import { createNodeMetrics, type NodeGpus } from './prometheus.js';
import { parseExposition } from './prometheus-text.test-support.js';

const GIB = 1024 ** 3;
const reading = (index: number, extra: Partial<GpuReading> = {}): GpuReading => ({
  index,
  name: 'Test GPU 12G',
  vendor: 'nvidia',
  compute: 'cuda',
  vramTotalBytes: 12 * GIB,
  vramFreeBytes: 10 * GIB,
  unifiedMemory: false,
  utilizationPct: null,
  temperatureC: null,
  powerW: null,
  ...extra,
});

test('per-GPU gauges: one series per member and device, figures the platform does not report absent, gone when the report is', async () => {
  let nodes: NodeGpus[] = [
    { nodeId: 'id-a', name: 'alpha', gpus: [reading(0, { utilizationPct: 40, temperatureC: 55, powerW: 150 }), reading(1)] },
    { nodeId: 'id-b', name: 'beta', gpus: [] },
  ];
  const metrics = createNodeMetrics({ nodeId: 'id-a', name: 'alpha', version: 'v' }, () => ({ inFlight: 0, waiting: 0, generatedTokens: 0, promptTokens: 0 }), () => nodes);
  let families = parseExposition(await metrics.registry.metrics());
  const samples = (name: string) => families.get(name)?.samples.map((s) => [s.labels, s.value]) ?? [];
  const labels = (gpu: string) => ({ node_id: 'id-a', node: 'alpha', gpu, name: 'Test GPU 12G', compute: 'cuda' });
  assert.equal(families.get('shoal_gpu_vram_total_bytes')?.type, 'gauge');
  assert.deepEqual(samples('shoal_gpu_vram_total_bytes'), [[labels('0'), 12 * GIB], [labels('1'), 12 * GIB]]);
  assert.deepEqual(samples('shoal_gpu_vram_free_bytes'), [[labels('0'), 10 * GIB], [labels('1'), 10 * GIB]]);
  assert.deepEqual(samples('shoal_gpu_utilization_percent'), [[labels('0'), 40]]);
  assert.deepEqual(samples('shoal_gpu_temperature_celsius'), [[labels('0'), 55]]);
  assert.deepEqual(samples('shoal_gpu_power_watts'), [[labels('0'), 150]]);
  nodes = [{ nodeId: 'id-a', name: 'alpha', gpus: [reading(0)] }];
  families = parseExposition(await metrics.registry.metrics());
  assert.deepEqual(samples('shoal_gpu_vram_total_bytes'), [[labels('0'), 12 * GIB]]);
  assert.deepEqual(samples('shoal_gpu_utilization_percent'), []);
});
