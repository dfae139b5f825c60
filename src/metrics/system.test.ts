import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseNvidiaSmi, SystemProbe } from './system.js';

const MIB = 1024 * 1024;

test('nvidia-smi output is summed over the devices', () => {
  assert.deepEqual(parseNvidiaSmi('37, 1024, 143771\n'), { devices: 1, utilPct: 37, usedBytes: 1024 * MIB, totalBytes: 143771 * MIB });
  assert.deepEqual(parseNvidiaSmi('10, 100, 1000\n30, 300, 3000\n'), { devices: 2, utilPct: 20, usedBytes: 400 * MIB, totalBytes: 4000 * MIB });
});

test('fields the driver does not report are unknown, not zero', () => {
  assert.deepEqual(parseNvidiaSmi('[N/A], 512, 8192\n'), { devices: 1, utilPct: null, usedBytes: 512 * MIB, totalBytes: 8192 * MIB });
  assert.deepEqual(parseNvidiaSmi('[Not Supported], [N/A], 8192\n50, 10, 1000'), { devices: 2, utilPct: 50, usedBytes: 10 * MIB, totalBytes: 9192 * MIB });
  assert.equal(parseNvidiaSmi('5, 10, [N/A]\n'), null, 'a device with no memory size is not charted');
});

test('output that is not the queried CSV is no reading', () => {
  assert.equal(parseNvidiaSmi(''), null);
  assert.equal(parseNvidiaSmi('NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'), null);
  assert.equal(parseNvidiaSmi('1, 2\n'), null);
  assert.equal(parseNvidiaSmi('-5, 2, 3\n')?.utilPct ?? null, null);
});

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
