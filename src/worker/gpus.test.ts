import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../common/errors.js';
import { createLogger } from '../common/log.js';
import { offeredBackends } from './engine-factory.js';
import { GpuMonitor } from './gpus.js';

const GIB = 1024 ** 3;
const log = createLogger({ level: 'silent' });
const RTX_24G = { name: 'Test GPU 24G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 24 * GIB, vramFreeBytes: 23 * GIB };

test('backends follow the facts: 1x24 GB CUDA, 2x12 GB, Apple unified, the CPU alone, a configured list', () => {
  const cpuOnly = { loaded: true, error: null, supportedGpuTypes: [], activeGpu: null };
  const base = { engines: null, llamaCpp: cpuOnly, gpuRequest: 'auto' as const, override: null, nvidiaDevicePresent: false };
  assert.deepEqual(offeredBackends(base).tags, ['llama_cpp-cpu']);
  // One 24 GB card whose CUDA build loads, engines built for CUDA.
  const cuda = { loaded: true, error: null, supportedGpuTypes: ['cuda' as const], activeGpu: 'cuda' as const };
  assert.deepEqual(offeredBackends({ ...base, llamaCpp: cuda, engines: { compute: 'cuda' }, nvidiaDevicePresent: true }).tags, ['llama_cpp-cuda', 'llama_cpp-cpu', 'llama_server-cuda', 'rpc-cuda']);
  // Two 12 GB cards: the same tags (the backends say what runs, the readings how much fits).
  assert.deepEqual(offeredBackends({ ...base, llamaCpp: cuda, engines: { compute: 'cpu' } }).tags, ['llama_cpp-cuda', 'llama_cpp-cpu', 'llama_server-cpu', 'rpc-cpu']);
  // Apple silicon: Metal.
  const metal = { loaded: true, error: null, supportedGpuTypes: ['metal' as const], activeGpu: 'metal' as const };
  assert.deepEqual(offeredBackends({ ...base, llamaCpp: metal, engines: { compute: 'metal' } }).tags, ['llama_cpp-metal', 'llama_cpp-cpu', 'llama_server-metal', 'rpc-metal']);
  // An NVIDIA card whose CUDA build does not load: the CPU only, and a warning for the start log.
  const unusable = offeredBackends({ ...base, nvidiaDevicePresent: true });
  assert.deepEqual(unusable.tags, ['llama_cpp-cpu']);
  assert.equal(unusable.conflicts[0]?.id, 'backends.nvidia');
  // --gpu false: no GPU tag whatever loads.
  assert.deepEqual(offeredBackends({ ...base, llamaCpp: cuda, gpuRequest: false }).tags, ['llama_cpp-cpu']);
  // --backends replaces detection; a tag not detected is a conflict the node logs.
  const configured = offeredBackends({ ...base, override: ['llama_cpp-cpu', 'llama_cpp-cuda'] });
  assert.deepEqual(configured.tags, ['llama_cpp-cuda', 'llama_cpp-cpu']);
  assert.deepEqual(configured.detected, ['llama_cpp-cpu']);
  assert.match(configured.conflicts.map((c) => c.summary).join('\n'), /llama_cpp-cuda is configured but was not detected/);
});

test('SHOAL_TEST_GPUS replaces the readings, never what loads: llama_cpp-cuda only where the CUDA build loads', async () => {
  const monitor = await GpuMonitor.start({ gpu: 'auto', maxThreads: 1, log, env: { SHOAL_TEST_GPUS: JSON.stringify([RTX_24G]) } });
  assert.equal(monitor.source, 'test-hook');
  assert.equal(monitor.present(), true);
  assert.deepEqual(monitor.readings(), [{ ...RTX_24G, index: 0, unifiedMemory: false, utilizationPct: null, temperatureC: null, powerW: null }]);
  // node-llama-cpp was asked for real: its CUDA build is advertised exactly when it is usable here.
  assert.equal(monitor.llamaCpp.loaded, true, monitor.llamaCpp.error ?? '');
  const tags = offeredBackends({ engines: null, llamaCpp: monitor.llamaCpp, gpuRequest: 'auto', override: null, nvidiaDevicePresent: monitor.nvidiaDevicePresent }).tags;
  const cudaUsable = monitor.llamaCpp.supportedGpuTypes.includes('cuda') || monitor.llamaCpp.activeGpu === 'cuda';
  assert.equal(tags.includes('llama_cpp-cuda'), cudaUsable, `tags ${tags.join(', ')}`);
  assert.ok(tags.includes('llama_cpp-cpu'));
});

test('a malformed SHOAL_TEST_GPUS fails the detection; --gpu false detects nothing', async () => {
  await assert.rejects(
    GpuMonitor.start({ gpu: 'auto', maxThreads: 1, log, env: { SHOAL_TEST_GPUS: '[{"name":"x","vendor":"nvidia","compute":"cuda"}]' } }),
    (e: unknown) => e instanceof ShoalError && /SHOAL_TEST_GPUS is malformed at \[0\]\.vramTotalBytes/.test(e.message),
  );
  const off = await GpuMonitor.start({ gpu: false, maxThreads: 1, log, env: { SHOAL_TEST_GPUS: JSON.stringify([RTX_24G]) } });
  assert.deepEqual(off.readings(), []);
  assert.deepEqual(off.llamaCpp.supportedGpuTypes, []);
});
