import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appleNode, cudaNode, factsA, GiB, MiB, node } from './fixtures.test-support.js';
import { fitOnNode, deviceContextCeiling } from './devices.js';
import { DEVICE_FLOOR_BYTES, estimateDevice, estimateHost, estimateMemory, fullShare, OVERHEAD_FLOOR_BYTES } from './memory.js';
import { devicesFor, isKnown, plannerGpus, type ClusterNode, type KnownNode } from './nodes.js';

const AT_4096 = { contextTokens: 4096, sequences: 1 };
const FULL = { entry: true, allowSpill: false };

function known(n: ClusterNode): KnownNode {
  assert.ok(isKnown(n));
  return n;
}

test('a full copy on one GPU: every term by hand, the embeddings stay in RAM', () => {
  const facts = factsA();
  const d = estimateDevice(facts, fullShare(facts), AT_4096);
  // weights  = 32 × 100 MiB + 128 MiB output head (the embeddings stay on the CPU) = 3328 MiB
  assert.equal(d.weightsBytes, 3_489_660_928);
  // KV 512 MiB and the 32000 × 512 × 4 B logits workspace, as in RAM
  assert.equal(d.kvBytes, 536_870_912);
  assert.equal(d.outputWorkspaceBytes, 65_536_000);
  // overhead = ceil(10% × 3,489,660,928) = 348,966,093; floor 512 MiB per device
  assert.equal(d.overheadBytes, 348_966_093);
  assert.equal(d.floorBytes, DEVICE_FLOOR_BYTES);
  assert.equal(DEVICE_FLOOR_BYTES, 536_870_912);
  assert.equal(d.totalBytes, 4_977_904_845);
  assert.ok(d.arithmetic.includes('device floor 512 MiB'), d.arithmetic.join('\n'));
  // host = 64 MiB embeddings + ceil(10%) 6,710,887 + the runner's 256 MiB floor
  const h = estimateHost(facts, { firstLayer: 0, layerCount: 0, holdsOutput: false }, AT_4096, true);
  assert.equal(h.totalBytes, 67_108_864 + 6_710_887 + OVERHEAD_FLOOR_BYTES);
});

test('a tied model: the GPU holding the output gets its own copy of the embedding table', () => {
  const facts = factsA({ outputTied: true, outputBytes: 0 });
  const d = estimateDevice(facts, fullShare(facts), AT_4096);
  assert.equal(d.weightsBytes, (3200 + 64) * MiB);
});

test('1x24 GB: the whole model on the GPU, -ngl all layers plus the output', () => {
  const facts = factsA();
  const n = known(cudaNode(0, 8 * GiB, [24 * GiB]));
  const fit = fitOnNode(facts, fullShare(facts), n, devicesFor(n, 'llama_server-cuda'), AT_4096, FULL);
  assert.equal(fit.fits, true);
  assert.equal(fit.gpuLayers, 33);
  assert.equal(fit.spilledLayers, 0);
  assert.equal(fit.devices.length, 1);
  assert.equal(fit.devices[0]!.estimate.totalBytes, 4_977_904_845);
  assert.equal(fit.devices[0]!.tensorSplit, 33);
  // Discrete: only the host side counts against RAM.
  assert.equal(fit.ramBytes, 67_108_864 + 6_710_887 + OVERHEAD_FLOOR_BYTES);
});

test('2x12 GB: layers dealt per device by room after fixed costs, the output on the last', () => {
  const facts = factsA();
  const n = known(cudaNode(0, 8 * GiB, [12 * GiB, 12 * GiB]));
  const fit = fitOnNode(facts, fullShare(facts), n, devicesFor(n, 'llama_server-cuda'), AT_4096, FULL);
  assert.equal(fit.fits, true);
  assert.deepEqual(
    fit.devices.map((d) => [d.index, d.share.firstLayer, d.share.layerCount, d.share.holdsOutput]),
    // device 1 pays the output's fixed costs first (~203 MiB), so it gets no more layers than device 0
    [
      [0, 0, 16, false],
      [1, 16, 16, true],
    ],
  );
  assert.deepEqual(fit.devices.map((d) => d.tensorSplit), [16, 17]);
  assert.equal(fit.gpuLayers, 33);

  // Uneven cards: 12 GiB and 4 GiB free. Room after fixed costs (margin 64 MiB, floor 512 MiB, output
  // ~203 MiB on the last): 11,712 MiB and ~3,317 MiB, so 32 × 11712/15029 = 24.9 → 25 and 7.
  const uneven = known(cudaNode(0, 8 * GiB, [12 * GiB, 4 * GiB]));
  const u = fitOnNode(facts, fullShare(facts), uneven, devicesFor(uneven, 'llama_server-cuda'), AT_4096, FULL);
  assert.equal(u.fits, true);
  assert.deepEqual(u.devices.map((d) => d.share.layerCount), [25, 7]);
});

test('a GPU too small: refused unless spilling is allowed; then the most layers that fit stay on it', () => {
  const facts = factsA();
  const n = known(cudaNode(0, 16 * GiB, [4 * GiB]));
  const devices = devicesFor(n, 'llama_server-cuda');
  const refused = fitOnNode(facts, fullShare(facts), n, devices, AT_4096, FULL);
  assert.equal(refused.fits, false);
  assert.equal(refused.reason, 'GPU 0');
  // Per layer on the device: 100 MiB + 16 MiB KV (4096 B/token × 4096) + 10 MiB overhead = 126 MiB.
  // 126 g + 512 (floor) + 64 (margin) < 4096 → g ≤ 27 (27: 3978 MiB; 28: 4104 MiB).
  const spilled = fitOnNode(facts, fullShare(facts), n, devices, AT_4096, { entry: true, allowSpill: true });
  assert.equal(spilled.fits, true);
  assert.equal(spilled.gpuLayers, 27, 'no +1: with a layer spilled the output head stays on the CPU');
  assert.equal(spilled.spilledLayers, 5);
  assert.deepEqual([spilled.devices[0]!.share.firstLayer, spilled.devices[0]!.share.layerCount, spilled.devices[0]!.share.holdsOutput], [5, 27, false]);
  // The host holds layers 0-4 with their KV, the embeddings, the output head and its logits.
  const host = estimateHost(facts, { firstLayer: 0, layerCount: 5, holdsOutput: true }, AT_4096, true);
  assert.equal(spilled.host.totalBytes, host.totalBytes);
  assert.equal(host.weightsBytes, (500 + 64 + 128) * MiB);
  assert.equal(host.outputWorkspaceBytes, 65_536_000);
});

test('spilling needs room in RAM too', () => {
  const facts = factsA();
  const n = known(cudaNode(0, GiB, [4 * GiB]));
  const fit = fitOnNode(facts, fullShare(facts), n, devicesFor(n, 'llama_server-cuda'), AT_4096, { entry: true, allowSpill: true });
  assert.equal(fit.fits, false);
});

test('unified memory counts once: the device is offered only the RAM left after the host part', () => {
  const facts = factsA();
  // The device reports 12 GiB of working set but the node has 4.5 GiB of RAM free: the ~4.64 GiB device
  // part plus the ~0.32 GiB host part do not fit, though either alone would.
  const apple = known(appleNode(0, 4.5 * GiB, 12 * GiB));
  const refused = fitOnNode(facts, fullShare(facts), apple, devicesFor(apple, 'llama_server-metal'), AT_4096, FULL);
  assert.equal(refused.fits, false);
  // The same figures on a discrete GPU fit: its VRAM is not the RAM.
  const discrete = known(cudaNode(0, 4.5 * GiB, [12 * GiB]));
  assert.equal(fitOnNode(facts, fullShare(facts), discrete, devicesFor(discrete, 'llama_server-cuda'), AT_4096, FULL).fits, true);
  // With room, a unified part's RAM bytes are its host and device bytes together.
  const roomy = known(appleNode(0, 16 * GiB, 12 * GiB));
  const fit = fitOnNode(facts, fullShare(facts), roomy, devicesFor(roomy, 'llama_server-metal'), AT_4096, FULL);
  assert.equal(fit.fits, true);
  assert.equal(fit.ramBytes, fit.host.totalBytes + fit.devices[0]!.estimate.totalBytes);
  assert.equal(fit.devices[0]!.freeBytes, 12 * GiB, 'capped by the device, not the RAM, when RAM is the larger');
});

test('a CPU backend on a GPU node ignores the GPUs: the RAM estimate as before', () => {
  const facts = factsA();
  const n = known(cudaNode(0, 8 * GiB, [24 * GiB]));
  const fit = fitOnNode(facts, fullShare(facts), n, devicesFor(n, 'llama_server-cpu'), AT_4096, FULL);
  assert.deepEqual(fit.devices, []);
  assert.equal(fit.gpuLayers, null);
  assert.equal(fit.host.totalBytes, estimateMemory(facts, fullShare(facts), AT_4096).totalBytes);
});

test('the context ceiling on a GPU is the largest 256-multiple the devices still hold', () => {
  const facts = factsA({ trainedContext: 65536 });
  const n = known(cudaNode(0, 8 * GiB, [6 * GiB]));
  const devices = devicesFor(n, 'llama_server-cuda');
  const ceiling = deviceContextCeiling(facts, fullShare(facts), n, devices, 32, 1, AT_4096, true);
  const at = (tokens: number): boolean => fitOnNode(facts, fullShare(facts), n, devices, { contextTokens: tokens, sequences: 1 }, FULL).fits;
  assert.equal(ceiling % 256, 0);
  assert.ok(ceiling > 4096);
  assert.equal(at(ceiling), true);
  assert.equal(at(ceiling + 256), false);
});

test('--vram-budget caps each device at the budget less what is committed there, never above free VRAM', () => {
  const readings = [
    { index: 0, name: 'A', compute: 'cuda' as const, vramFreeBytes: 20 * GiB, unifiedMemory: false },
    { index: 1, name: 'B', compute: 'cuda' as const, vramFreeBytes: 4 * GiB, unifiedMemory: false },
  ];
  const committed = (index: number): number => (index === 0 ? 6 * GiB : 0);
  assert.deepEqual(plannerGpus(readings, null, committed).map((g) => g.freeBytes), [20 * GiB, 4 * GiB]);
  assert.deepEqual(plannerGpus(readings, 10 * GiB, committed).map((g) => g.freeBytes), [4 * GiB, 4 * GiB]);
  assert.deepEqual(plannerGpus(readings, 5 * GiB, committed).map((g) => g.freeBytes), [0, 4 * GiB]);
});

test('devicesFor: only the devices of the tag\'s compute, in index order; none for a CPU tag or a CPU node', () => {
  const n = node(0, GiB, {
    gpus: [
      { index: 1, name: 'b', compute: 'cuda', freeBytes: GiB, unifiedMemory: false },
      { index: 0, name: 'a', compute: 'cuda', freeBytes: GiB, unifiedMemory: false },
      { index: 2, name: 'c', compute: 'vulkan', freeBytes: GiB, unifiedMemory: false },
    ],
  });
  assert.deepEqual(devicesFor(n, 'llama_server-cuda').map((d) => d.index), [0, 1]);
  assert.deepEqual(devicesFor(n, 'rpc-vulkan').map((d) => d.index), [2]);
  assert.deepEqual(devicesFor(n, 'llama_server-cpu'), []);
  assert.deepEqual(devicesFor(node(1, GiB), 'llama_server-cuda'), []);
});
