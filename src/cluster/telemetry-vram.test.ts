import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ClusterState } from '../master/state/state.js';
import { instanceSpec, nodeId } from '../master/state/fixtures.test-support.js';
import { committedVramBytes } from './telemetry.js';

test('committed VRAM: the device estimates of the parts placed on that node and GPU, nothing else', () => {
  const gpuPart = { ...instanceSpec('a', [0]).placements[0]!, backend: 'llama_server-cuda', gpuLayers: 3, devices: [
    { index: 0, layerCount: 1, tensorSplit: 1, estimatedBytes: 700 },
    { index: 1, layerCount: 1, tensorSplit: 2, estimatedBytes: 900 },
  ] };
  const other = { ...instanceSpec('b', [1]).placements[0]!, backend: 'llama_server-cuda', gpuLayers: 3, devices: [{ index: 0, layerCount: 2, tensorSplit: 3, estimatedBytes: 5000 }] };
  const cpu = instanceSpec('c', [0]).placements[0]!;
  const state = { instances: { a: { placements: [gpuPart] }, b: { placements: [other] }, c: { placements: [cpu] } } } as unknown as ClusterState;
  assert.equal(committedVramBytes(state, nodeId(0), 0), 700);
  assert.equal(committedVramBytes(state, nodeId(0), 1), 900);
  assert.equal(committedVramBytes(state, nodeId(0), 2), 0);
  assert.equal(committedVramBytes(state, nodeId(1), 0), 5000);
});
