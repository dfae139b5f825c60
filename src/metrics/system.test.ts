import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SystemProbe } from './system.js';

test('the probe reads CPU and memory at once and the GPU from the last finished probe', async () => {
  let calls = 0;
  const probe = new SystemProbe({ readGpu: async () => ({ devices: 1, utilPct: ++calls, usedBytes: 1, totalBytes: 2 }) });
  const first = probe.read();
  assert.ok(first.cpu.cores >= 1);
  assert.ok(first.memory.totalBytes > 0 && first.memory.usedBytes <= first.memory.totalBytes);
  assert.equal(first.gpu, null, 'the first probe is still running');
  await probe.settle();
  assert.equal(probe.read().gpu?.utilPct, 1);
  const none = new SystemProbe({ readGpu: async () => { throw new Error('driver gone'); } });
  await none.settle();
  assert.equal(none.read().gpu, null);
});
