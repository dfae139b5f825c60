import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appleNode, card, cudaNode, factsA, GiB, MIXED_TEST_BACKENDS, node, nodeId } from './fixtures.test-support.js';
import { planPlacement, tensorSplitArg, tensorSplitOf, type Plan } from './planner.js';
import { chooseBackend, isKnown, type KnownNode } from './nodes.js';
import { predictDecode, NODE_RELAY_S, RPC_HOP_BASE_S, RPC_HOP_PER_LAYER_S, RPC_ROUND_TRIPS_PER_TOKEN, LINK_ROUND_TRIP_S, DEFAULT_LINK_BYTES_PER_S, CPU_ENGINE_COSTS } from './speed.js';

const AT_4096 = { contextTokens: 4096, parallel: 1 };

function planOk(result: ReturnType<typeof planPlacement>): Plan {
  assert.ok(result.ok, result.ok ? '' : result.error.message);
  return result.plan;
}

test('a GPU node is chosen over a CPU node with more RAM, and its part says where the layers go', () => {
  const plan = planOk(planPlacement({ card: card(), facts: factsA(), nodes: [node(0, 64 * GiB), cudaNode(1, 8 * GiB, [24 * GiB])] }, AT_4096));
  assert.equal(plan.shape, 'single');
  const [p] = plan.placements;
  assert.equal(p!.nodeId, nodeId(1));
  assert.equal(p!.backend, 'llama_server-cuda');
  assert.equal(p!.gpuLayers, 33);
  assert.deepEqual(p!.devices.map((d) => [d.index, d.layerCount, d.tensorSplit, d.fits]), [[0, 32, 33, true]]);
  assert.equal(p!.devices[0]!.bytes, 4_977_904_845);
  // No measured speed for a GPU: no figure, and no bound (nothing measured in it).
  assert.equal(plan.predictedDecodeTokPerS, null);
  assert.equal(plan.decodeUpperBoundTokPerS, null);
  assert.equal(tensorSplitArg(plan), null, 'one device holds it all');
});

test('the card\'s backend_preference still wins over the GPU-first rule', () => {
  const n = cudaNode(0, 8 * GiB, [24 * GiB]);
  assert.ok(isKnown(n));
  assert.equal(chooseBackend(card(), n)?.tag, 'llama_server-cuda');
  assert.equal(chooseBackend(card({ backend_preference: ['llama_server-cpu'] }), n)?.tag, 'llama_server-cpu');
  // A GPU tag advertised without a detected device of its compute keeps the card's order (cpu first).
  const noDevice: KnownNode = { ...n, gpus: [] } as KnownNode;
  assert.equal(chooseBackend(card(), noDevice)?.tag, 'llama_server-cpu');
});

test('2x12 GB: one node, placed per device, with the tensor split the engine gets', () => {
  const plan = planOk(planPlacement({ card: card(), facts: factsA(), nodes: [cudaNode(0, 8 * GiB, [12 * GiB, 12 * GiB])] }, AT_4096));
  assert.equal(plan.shape, 'single');
  const [p] = plan.placements;
  assert.deepEqual(p!.devices.map((d) => [d.index, d.firstLayer, d.layerCount, d.holdsOutput, d.tensorSplit]), [
    [0, 0, 16, false, 16],
    [1, 16, 16, true, 17],
  ]);
  assert.equal(p!.gpuLayers, 33);
  // What it takes from RAM is the host side, not the VRAM.
  assert.ok(p!.ramBytes < GiB);
  assert.equal(tensorSplitArg(plan), '16,17');
});

test('spill refused by default (the refusal says how to allow it), allowed on request and said in the plan', () => {
  const nodes = [cudaNode(0, 16 * GiB, [4 * GiB])];
  const refused = planPlacement({ card: card({ compatible_backends: ['llama_server-cuda'] }), facts: factsA(), nodes }, AT_4096);
  assert.equal(refused.ok, false);
  assert.ok(!refused.ok);
  assert.equal(refused.error.code, 'MEMORY_SHORTFALL');
  assert.match(refused.error.message, /GPU 0 needs .* of VRAM, has 4\.00 GiB/);
  assert.match(refused.error.message, /allow_spill/);
  assert.equal(refused.error.single?.[0]?.devices?.[0]?.index, 0);

  const plan = planOk(planPlacement({ card: card({ compatible_backends: ['llama_server-cuda'] }), facts: factsA(), nodes }, { ...AT_4096, allowSpill: true }));
  const [p] = plan.placements;
  assert.equal(p!.spilledLayers, 5);
  assert.equal(p!.gpuLayers, 27);
  assert.equal(plan.allowSpill, true);
  assert.ok(plan.warnings.some((w) => /5 of 32 layers stay in system RAM/.test(w)), plan.warnings.join('\n'));
});

test('a copy wholly on a GPU is preferred to one that spills, even on a larger card', () => {
  const nodes = [cudaNode(0, 16 * GiB, [4.5 * GiB]), cudaNode(1, 16 * GiB, [6 * GiB])];
  const plan = planOk(planPlacement({ card: card(), facts: factsA(), nodes }, { ...AT_4096, allowSpill: true }));
  assert.equal(plan.placements[0]!.nodeId, nodeId(1));
  assert.equal(plan.placements[0]!.spilledLayers, 0);
});

test('Apple unified memory: admitted once against the RAM, and its RAM bytes include the device', () => {
  const c = card({ compatible_backends: MIXED_TEST_BACKENDS });
  const plan = planOk(planPlacement({ card: c, facts: factsA(), nodes: [appleNode(0, 16 * GiB, 12 * GiB)] }, AT_4096));
  const [p] = plan.placements;
  assert.equal(p!.backend, 'llama_server-metal');
  assert.equal(p!.ramBytes, p!.estimate.totalBytes + p!.devices[0]!.bytes);
  const short = planPlacement({ card: c, facts: factsA(), nodes: [appleNode(0, 4.5 * GiB, 12 * GiB)] }, AT_4096);
  assert.equal(short.ok, false);
});

test('a mixed split over a CUDA, a Metal and a CPU node: planned per device, the speed bounded by the measured CPU part', () => {
  const c = card({ compatible_backends: MIXED_TEST_BACKENDS });
  const nodes = [
    cudaNode(0, 4 * GiB, [2.5 * GiB], { backends: MIXED_TEST_BACKENDS }),
    appleNode(1, 3 * GiB, 2 * GiB),
    node(2, 2 * GiB, { backends: MIXED_TEST_BACKENDS, memoryBandwidthBytesPerS: 20e9 }),
  ];
  const plan = planOk(planPlacement({ card: c, facts: factsA(), nodes }, AT_4096));
  assert.equal(plan.shape, 'pooled');
  // Device order: donors first (GPUs before CPU, then most room), the driver (the CUDA node) last.
  assert.deepEqual(plan.placements.map((p) => [p.nodeId, p.role, p.backend]), [
    [nodeId(1), 'donor', 'rpc-metal'],
    [nodeId(2), 'donor', 'rpc-cpu'],
    [nodeId(0), 'driver', 'llama_server-cuda'],
  ]);
  assert.equal(plan.placements.reduce((sum, p) => sum + p.layerShare.layerCount, 0), 32);
  const [metal, cpu, cuda] = plan.placements;
  assert.equal(metal!.devices.length, 1);
  assert.equal(cpu!.devices.length, 0);
  assert.equal(cpu!.gpuLayers, null);
  assert.equal(cuda!.devices[0]!.holdsOutput, true);
  // The node weights are the devices' weights (the CPU part counting as one), layers plus one for the output.
  assert.deepEqual(plan.placements.map((p) => p.tensorSplit), [metal!.layerShare.layerCount, cpu!.layerShare.layerCount, cuda!.layerShare.layerCount + 1]);
  assert.equal(tensorSplitArg(plan), `${metal!.layerShare.layerCount},${cpu!.layerShare.layerCount},${cuda!.layerShare.layerCount + 1}`);
  // A node with two GPUs in a split counts as two devices.
  assert.equal(tensorSplitOf([{ tensorSplit: 3, devices: [{ tensorSplit: 1 }, { tensorSplit: 2 }] }, { tensorSplit: 5, devices: [] }, { tensorSplit: null }]), '1,2,5,0');
  for (const p of plan.placements) for (const d of p.devices) assert.ok(d.fits && d.bytes + 64 * 2 ** 20 < d.freeBytes);
  // No figure (the GPU parts were never measured), but the CPU part's measured time bounds it.
  assert.equal(plan.predictedDecodeTokPerS, null);
  assert.ok(plan.decodeUpperBoundTokPerS !== null && plan.decodeUpperBoundTokPerS > 0);
  assert.ok(plan.speedArithmetic.some((line) => /at most/.test(line)), plan.speedArithmetic.join('\n'));
});

test('the bound is the measured part\'s time plus the relay, by the constants', () => {
  const facts = factsA();
  const p = predictDecode(facts, [
    { share: { firstLayer: 0, layerCount: 13, holdsOutput: false }, backend: 'rpc-cpu', memoryBandwidthBytesPerS: 31e9, donor: true },
    { share: { firstLayer: 13, layerCount: 19, holdsOutput: true }, backend: 'llama_server-cuda', donor: false },
  ]);
  const read = (13 * 100 * 2 ** 20) / 31e9;
  const layers = 13 * CPU_ENGINE_COSTS.rpc!.perLayerS;
  const hop = RPC_HOP_BASE_S + 13 * RPC_HOP_PER_LAYER_S + RPC_ROUND_TRIPS_PER_TOKEN * LINK_ROUND_TRIP_S + (2 * 4096 * 4) / DEFAULT_LINK_BYTES_PER_S;
  assert.equal(p.tokPerS, null);
  assert.ok(Math.abs(p.upperBoundTokPerS! - 1 / (read + layers + hop + NODE_RELAY_S)) < 1e-9);
  // An unmeasured CPU node leaves nothing to bound it with.
  const none = predictDecode(facts, [
    { share: { firstLayer: 0, layerCount: 13, holdsOutput: false }, backend: 'rpc-cpu', donor: true },
    { share: { firstLayer: 13, layerCount: 19, holdsOutput: true }, backend: 'llama_server-cuda', donor: false },
  ]);
  assert.equal(none.upperBoundTokPerS, null);
});

test('the "slower than one node" warning from measured figures: a split bounded below a CPU node alone', () => {
  const c = card({ compatible_backends: MIXED_TEST_BACKENDS });
  // A fast CPU node (measured 200 GB/s, no rpc) holds the model; min_nodes 2 forces a split of a GPU driver
  // and a slow measured CPU donor (5 GB/s), whose 13 layers alone take ~270 ms a token.
  const nodes = [
    node(0, 16 * GiB, { backends: ['llama_server-cpu'], memoryBandwidthBytesPerS: 200e9 }),
    node(1, 16 * GiB, { backends: ['rpc-cpu'], memoryBandwidthBytesPerS: 5e9 }),
    cudaNode(2, 8 * GiB, [24 * GiB], { backends: MIXED_TEST_BACKENDS }),
  ];
  const plan = planOk(planPlacement({ card: c, facts: factsA(), nodes }, { ...AT_4096, minNodes: 2 }));
  assert.equal(plan.shape, 'pooled');
  assert.equal(plan.predictedDecodeTokPerS, null);
  assert.ok(plan.warnings.some((w) => /slower than one node: at most ~.* tok\/s split \(its measured CPU parts alone\) against ~.* on /.test(w)), plan.warnings.join('\n'));
});

test('a split across nodes deals to each GPU of a multi-GPU member as its own device', () => {
  const c = card();
  // 2x2 GiB on the driver and 2 GiB of RAM on a CPU donor: no single node holds model A (~4.7 GiB).
  const nodes = [cudaNode(0, 4 * GiB, [2 * GiB, 2 * GiB]), node(1, 2 * GiB)];
  const plan = planOk(planPlacement({ card: c, facts: factsA(), nodes }, AT_4096));
  assert.equal(plan.shape, 'pooled');
  const [donor, driver] = plan.placements;
  assert.deepEqual([donor!.role, donor!.backend, driver!.role, driver!.backend], ['donor', 'rpc-cpu', 'driver', 'llama_server-cuda']);
  assert.deepEqual(driver!.devices.map((d) => d.index), [0, 1]);
  assert.equal(driver!.devices[0]!.firstLayer, donor!.layerShare.layerCount, 'the driver\'s layers follow the donor\'s');
  assert.equal(driver!.devices[1]!.holdsOutput, true);
  assert.equal(driver!.gpuLayers, driver!.layerShare.layerCount + 1);
  assert.equal(driver!.tensorSplit, driver!.devices[0]!.tensorSplit + driver!.devices[1]!.tensorSplit);
  assert.equal(tensorSplitArg(plan)!.split(',').length, 3);
  for (const d of driver!.devices) assert.equal(d.fits, true);
});
