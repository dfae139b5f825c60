import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../common/errors.js';
import { MAX_TELEMETRY_MESSAGE_BYTES } from '../master/core/messages.js';
import { encodeValue } from '../router/framing.js';
import { GpuReading, MAX_REPORTED_BACKENDS, MAX_REPORTED_GPUS, MAX_REPORTED_PEERS, ResourcesMessage } from '../wire/telemetry.js';
import { GPU_NAME_MAX_CHARS, gpuUse, llamaCppReadings, mergeReadings, parseNvidiaSmiGpus, parseRocmSmiGpus, parseTestGpus } from './gpu-readings.js';

const GIB = 1024 ** 3;
const MIB = 1024 ** 2;

test('nvidia-smi CSV: one reading per device, MiB to bytes, [N/A] as unknown, broken lines skipped', () => {
  const csv = [
    '0, NVIDIA GeForce RTX 4090, 24564, 23012, 37, 45, 61.52',
    '1, NVIDIA A100-SXM4-80GB, 81920, 80000, [N/A], [N/A], [Not Supported]',
    'garbage line',
    '2, Tesla, T4, 15360, 15000, 0, 30, 12.0',
    '',
  ].join('\n');
  const gpus = parseNvidiaSmiGpus(csv);
  assert.equal(gpus.length, 3);
  assert.deepEqual(gpus[0], {
    index: 0,
    name: 'NVIDIA GeForce RTX 4090',
    vendor: 'nvidia',
    compute: 'cuda',
    vramTotalBytes: 24564 * MIB,
    vramFreeBytes: 23012 * MIB,
    unifiedMemory: false,
    utilizationPct: 37,
    temperatureC: 45,
    powerW: 61.52,
  });
  assert.deepEqual([gpus[1]!.utilizationPct, gpus[1]!.temperatureC, gpus[1]!.powerW], [null, null, null]);
  // A comma inside the name does not shift the figures.
  assert.equal(gpus[2]!.name, 'Tesla, T4');
  assert.equal(gpus[2]!.vramTotalBytes, 15360 * MIB);
  for (const gpu of gpus) assert.ok(GpuReading.safeParse(gpu).success, 'every reading fits the wire schema');
  assert.deepEqual(parseNvidiaSmiGpus(''), []);
});

test('rocm-smi JSON: cards by index, bytes, edge temperature, package power, the series as the name', () => {
  const json = JSON.stringify({
    card1: { 'VRAM Total Memory (B)': '17163091968', 'VRAM Total Used Memory (B)': '163091968', 'GPU use (%)': '3', 'Temperature (Sensor edge) (C)': '41.0', 'Current Socket Graphics Package Power (W)': '25.0', 'Card series': 'Navi 21 [Radeon RX 6800]' },
    card0: { 'VRAM Total Memory (B)': '8589934592', 'VRAM Total Used Memory (B)': '0', 'GPU use (%)': 'N/A', 'Average Graphics Package Power (W)': '9.5' },
    system: { 'Driver version': '6.7.0' },
  });
  const gpus = parseRocmSmiGpus(json);
  assert.deepEqual(
    gpus.map((g) => [g.index, g.name, g.vendor, g.compute, g.vramTotalBytes, g.vramFreeBytes, g.utilizationPct, g.temperatureC, g.powerW]),
    [
      [0, 'AMD GPU 0', 'amd', 'vulkan', 8589934592, 8589934592, null, null, 9.5],
      [1, 'Navi 21 [Radeon RX 6800]', 'amd', 'vulkan', 17163091968, 17000000000, 3, 41, 25],
    ],
  );
  assert.deepEqual(parseRocmSmiGpus('not json'), []);
  assert.deepEqual(parseRocmSmiGpus('{"card0":{"GPU use (%)":"1"}}'), [], 'no memory size, no reading');
});

test('SHOAL_TEST_GPUS: index defaults to the position, the rest to unknown and discrete memory', () => {
  const gpus = parseTestGpus(
    JSON.stringify([
      { name: 'Test GPU 12G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 12 * GIB, vramFreeBytes: 11 * GIB },
      { name: 'Test GPU 12G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 12 * GIB, vramFreeBytes: 12 * GIB, utilizationPct: 5, powerW: 70 },
    ]),
  );
  assert.deepEqual(
    gpus.map((g) => [g.index, g.unifiedMemory, g.utilizationPct, g.temperatureC, g.powerW]),
    [
      [0, false, null, null, null],
      [1, false, 5, null, 70],
    ],
  );
  const apple = parseTestGpus('[{"name":"Apple M2 Max","vendor":"apple","compute":"metal","vramTotalBytes":68719476736,"vramFreeBytes":51539607552,"unifiedMemory":true}]');
  assert.equal(apple[0]!.unifiedMemory, true);
  assert.deepEqual(parseTestGpus('[]'), []);
});

test('a malformed SHOAL_TEST_GPUS is refused with one line naming the field', () => {
  const refused = (text: string, pattern: RegExp): void =>
    assert.throws(
      () => parseTestGpus(text),
      (e: unknown) => e instanceof ShoalError && e.code === 'BAD_REQUEST' && !e.message.includes('\n') && pattern.test(e.message),
    );
  refused('[{name:', /SHOAL_TEST_GPUS is not JSON/);
  refused('{"name":"x"}', /SHOAL_TEST_GPUS is malformed at the value/);
  refused('[{"name":"x","vendor":"nvidia","compute":"cuda","vramFreeBytes":1}]', /at \[0\]\.vramTotalBytes/);
  refused('[{"name":"x","vendor":"nvidia","compute":"rocm","vramTotalBytes":2,"vramFreeBytes":1}]', /at \[0\]\.compute/);
  refused('[{"name":"x","vendor":"nvidia","compute":"cuda","vramTotalBytes":1,"vramFreeBytes":2}]', /at \[0\]\.vramFreeBytes: vramFreeBytes is more than vramTotalBytes/);
  refused('[{"name":"x","vendor":"nvidia","compute":"cuda","vramTotalBytes":2,"vramFreeBytes":1,"colour":"green"}]', /at \[0\]/);
  refused(JSON.stringify(Array.from({ length: 9 }, () => ({ name: 'x', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 2, vramFreeBytes: 1 }))), /malformed/);
});

test("node-llama-cpp's readings: one device exact, several share the sum, Apple silicon is unified system memory", () => {
  const linux = { platform: 'linux' as const, arch: 'x64', totalMemoryBytes: 64 * GIB, freeMemoryBytes: 32 * GIB };
  const one = llamaCppReadings({ active: 'vulkan', devices: ['Intel(R) Arc(tm) A770 Graphics'], vram: { totalBytes: 16 * GIB, freeBytes: 15 * GIB } }, linux);
  assert.deepEqual(one.map((g) => [g.vendor, g.compute, g.vramTotalBytes, g.vramFreeBytes, g.unifiedMemory]), [['intel', 'vulkan', 16 * GIB, 15 * GIB, false]]);
  const two = llamaCppReadings({ active: 'cuda', devices: ['NVIDIA GeForce RTX 3060', 'NVIDIA GeForce RTX 3060'], vram: { totalBytes: 24 * GIB, freeBytes: 22 * GIB } }, linux);
  assert.deepEqual(two.map((g) => [g.index, g.vramTotalBytes, g.vramFreeBytes]), [[0, 12 * GIB, 11 * GIB], [1, 12 * GIB, 11 * GIB]]);
  const mac = llamaCppReadings({ active: 'metal', devices: ['Apple M3 Pro'], vram: { totalBytes: 27 * GIB, freeBytes: 27 * GIB } }, { platform: 'darwin', arch: 'arm64', totalMemoryBytes: 36 * GIB, freeMemoryBytes: 20 * GIB });
  assert.deepEqual(mac.map((g) => [g.vendor, g.compute, g.vramTotalBytes, g.vramFreeBytes, g.unifiedMemory]), [['apple', 'metal', 36 * GIB, 20 * GIB, true]]);
  assert.deepEqual(llamaCppReadings({ active: null, devices: [], vram: null }, linux), [], 'the CPU build: no GPU');
});

test('the smi tools win over node-llama-cpp and are renumbered in order; the sum for the sampler', () => {
  const llama = llamaCppReadings({ active: 'cuda', devices: ['NVIDIA GeForce RTX 4090'], vram: { totalBytes: 24 * GIB, freeBytes: 20 * GIB } }, { platform: 'linux', arch: 'x64', totalMemoryBytes: 0, freeMemoryBytes: 0 });
  const nvidia = parseNvidiaSmiGpus('0, NVIDIA GeForce RTX 4090, 24564, 20000, 50, 60, 200');
  const amd = parseRocmSmiGpus(JSON.stringify({ card0: { 'VRAM Total Memory (B)': String(8 * GIB), 'VRAM Total Used Memory (B)': String(GIB), 'GPU use (%)': '10' } }));
  assert.deepEqual(mergeReadings({ nvidia: [], amd: [] }, llama), llama);
  const merged = mergeReadings({ nvidia, amd }, llama);
  assert.deepEqual(merged.map((g) => [g.index, g.vendor]), [[0, 'nvidia'], [1, 'amd']]);
  assert.deepEqual(gpuUse(merged), { devices: 2, utilPct: 30, usedBytes: 24564 * MIB - 20000 * MIB + GIB, totalBytes: 24564 * MIB + 8 * GIB });
  assert.equal(gpuUse([]), null);
});

test('a resources report with the most GPUs at the longest names, peers and tags still fits the telemetry limit', () => {
  const nodeId = `12D3KooW${'x'.repeat(44)}`;
  const nvidia = parseNvidiaSmiGpus(Array.from({ length: MAX_REPORTED_GPUS }, (_, i) => `${i}, ${'é'.repeat(200)}, 99999999, 99999999, 99.5, 85.5, 450.25`).join('\n'));
  assert.equal(nvidia.length, MAX_REPORTED_GPUS);
  assert.equal(nvidia[0]!.name.length, GPU_NAME_MAX_CHARS, 'names are clipped');
  const message = ResourcesMessage.parse({
    type: 'resources',
    clusterId: 'a'.repeat(32),
    nodeId,
    seq: 2 ** 40,
    memory: { totalBytes: 2 ** 40, availableBytes: 2 ** 40, offerBytes: 2 ** 40 },
    cpu: { cores: 256, loadPct: 99.5 },
    gpus: nvidia.map((g) => ({ ...g, compute: 'vulkan', vramTotalBytes: 2 ** 45, vramFreeBytes: 2 ** 45 })),
    // Every tag there is (engines x computes): fewer than MAX_REPORTED_BACKENDS.
    backends: ['llama_cpp', 'llama_server', 'rpc'].flatMap((e) => ['cpu', 'cuda', 'vulkan', 'metal'].map((c) => `${e}-${c}`)).slice(0, MAX_REPORTED_BACKENDS),
    memoryBandwidthBytesPerS: 1.5e11,
    disk: { freeBytes: 2 ** 44 },
    peers: Array.from({ length: MAX_REPORTED_PEERS }, () => nodeId),
  });
  const bytes = encodeValue(message).byteLength;
  assert.ok(bytes < MAX_TELEMETRY_MESSAGE_BYTES, `${bytes} bytes`);
  assert.throws(() => parseTestGpus(JSON.stringify([{ name: 'x'.repeat(GPU_NAME_MAX_CHARS + 1), vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 2, vramFreeBytes: 1 }])), /at \[0\]\.name/);
});
