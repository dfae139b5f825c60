// Model A (fixtures) needs 4,850,398,005 B free (≈ 4.52 GiB) for a full copy at 4096 tokens × 1:
// weights 3392 MiB + KV 512 MiB + logits 62.5 MiB + overhead 339.2 MiB + floor 256 MiB, + 64 MiB margin.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TINY_MODEL_SPEC } from '../models/generate/builtin.js';
import { generateRandomModel } from '../models/generate/random-model.js';
import { BUILTIN_CARDS } from '../models/cards/catalog.js';
import { readGgufFacts } from '../models/cards/gguf-facts.js';
import { ALL_TEST_BACKENDS, card, factsA, GiB, MiB, node, nodeId } from './fixtures.test-support.js';
import { planPlacement, tensorSplitArg, type PlanInput, type PlanOptions, type PlanResult } from './planner.js';
import type { ModelCard } from '../models/cards/card.js';
import { fullShare } from './memory.js';
import { predictDecode } from './speed.js';
import { chooseBackend, unrankedOrder, type ClusterNode, type KnownNode } from './nodes.js';

function plan(nodes: ClusterNode[], options: PlanOptions = {}, input: Partial<PlanInput> = {}): PlanResult {
  return planPlacement({ card: card(), facts: factsA(), nodes, ...input }, options);
}

function ok(result: PlanResult) {
  assert.ok(result.ok, result.ok ? '' : `${result.error.code}: ${result.error.message}`);
  return result.plan;
}

function err(result: PlanResult) {
  assert.ok(!result.ok, 'expected a placement error');
  return result.error;
}

test('single node: the one with most free memory, full copy, ceiling and speed stamped', () => {
  const p = ok(plan([node(0, 6 * GiB), node(1, 8 * GiB), node(2, 5 * GiB)]));
  assert.equal(p.shape, 'single');
  assert.equal(p.placements.length, 1);
  const [only] = p.placements;
  assert.equal(only!.nodeId, nodeId(1));
  assert.equal(only!.role, 'full');
  assert.deepEqual(only!.layerShare, { firstLayer: 0, layerCount: 32, fraction: 1 });
  assert.equal(only!.tensorSplit, undefined);
  assert.equal(p.contextTokens, 4096);
  // 8 GiB leaves room for 32,626 tokens; capped at the trained 8192
  assert.equal(p.contextCeiling, 8192);
  // None of these nodes has measured its memory bandwidth: no figure, and the arithmetic says why.
  assert.equal(p.predictedDecodeTokPerS, null);
  assert.ok(p.speedArithmetic.some((line) => /not measured its memory bandwidth/.test(line)), p.speedArithmetic.join('\n'));
  assert.deepEqual(p.refusal, { hops: 0, fellBack: false });
  assert.equal(tensorSplitArg(p), null);
});

test('the speed is predicted only on a node that measured its memory bandwidth', () => {
  const measured = ok(plan([node(0, 6 * GiB), node(1, 8 * GiB, { memoryBandwidthBytesPerS: 31e9 })]));
  // 3328 MiB read per token at the measured 31 GB/s (8.88 tok/s on bytes alone), plus the engine's per-token costs
  const expected = predictDecode(factsA(), [{ share: fullShare(factsA()), backend: measured.placements[0]!.backend, memoryBandwidthBytesPerS: 31e9, donor: false }]).tokPerS!;
  assert.ok(Math.abs(measured.predictedDecodeTokPerS! - expected) < 1e-9 && expected < 8.883, `${measured.predictedDecodeTokPerS} vs ${expected}`);
  // The same placement on the same node, unmeasured there (its neighbour's figure does not count).
  const unmeasured = ok(plan([node(0, 6 * GiB, { memoryBandwidthBytesPerS: 31e9 }), node(1, 8 * GiB)]));
  assert.equal(unmeasured.placements[0]!.nodeId, nodeId(1));
  assert.equal(unmeasured.predictedDecodeTokPerS, null);
  // Replicas: one unmeasured copy leaves the slowest unknown.
  const replicas = ok(plan([node(0, 6 * GiB, { memoryBandwidthBytesPerS: 31e9 }), node(1, 8 * GiB)], { replicas: 2 }));
  assert.equal(replicas.predictedDecodeTokPerS, null);
});

test('node choice: memory first, then backend preference, then id', () => {
  const cpu = ['llama_cpp-cpu'];
  const cuda = ['llama_cpp-cuda'];
  const cases: Array<{ what: string; nodes: ClusterNode[]; preference: string[]; expected: number; backend: string }> = [
    { what: 'equal memory: preference decides', nodes: [node(0, 8 * GiB, { backends: cpu }), node(1, 8 * GiB, { backends: cuda })], preference: ['llama_cpp-cuda'], expected: 1, backend: 'llama_cpp-cuda' },
    { what: 'equal memory, no preference: compatible order', nodes: [node(0, 8 * GiB, { backends: cuda }), node(1, 8 * GiB, { backends: cpu })], preference: [], expected: 1, backend: 'llama_cpp-cpu' },
    { what: 'more memory beats preference', nodes: [node(0, 9 * GiB, { backends: cpu }), node(1, 8 * GiB, { backends: cuda })], preference: ['llama_cpp-cuda'], expected: 0, backend: 'llama_cpp-cpu' },
    { what: 'all equal: lower id', nodes: [node(1, 8 * GiB, { backends: cpu }), node(0, 8 * GiB, { backends: cpu })], preference: [], expected: 0, backend: 'llama_cpp-cpu' },
    { what: 'a node offering two: its preferred one', nodes: [node(0, 8 * GiB, { backends: [...cpu, ...cuda] })], preference: ['llama_cpp-cuda', 'llama_cpp-cpu'], expected: 0, backend: 'llama_cpp-cuda' },
  ];
  for (const c of cases) {
    const p = ok(plan(c.nodes, {}, { card: card({ backend_preference: c.preference }) }));
    assert.equal(p.placements[0]!.nodeId, nodeId(c.expected), c.what);
    assert.equal(p.placements[0]!.backend, c.backend, c.what);
  }
});

test('a node offering both engines: llama_server before llama_cpp, from built-in cards, hub cards and the tie-break', () => {
  const both = ['llama_cpp-cpu', 'llama_server-cpu', 'rpc-cpu'];
  const nodes = [node(0, 8 * GiB, { backends: both })];
  const cases: Array<{ what: string; card: ModelCard; expected: string }> = [
    { what: 'no preference, llama_cpp listed first: the faster engine of the same compute', card: card({ compatible_backends: both, backend_preference: [] }), expected: 'llama_server-cpu' },
    { what: 'every engine and compute, llama_cpp first, no preference (a hub card)', card: card({ compatible_backends: ALL_TEST_BACKENDS, backend_preference: [] }), expected: 'llama_server-cpu' },
    { what: 'a built-in card', card: BUILTIN_CARDS[0]!, expected: 'llama_server-cpu' },
    { what: 'an explicit preference still wins', card: card({ compatible_backends: both, backend_preference: ['llama_cpp-cpu'] }), expected: 'llama_cpp-cpu' },
  ];
  for (const c of cases) assert.equal(chooseBackend(c.card, nodes[0] as KnownNode)?.tag, c.expected, c.what);
  assert.equal(ok(plan(nodes)).placements[0]!.backend, 'llama_server-cpu');
  // A node without llama-server built still serves through node-llama-cpp.
  assert.equal(ok(plan([node(0, 8 * GiB, { backends: ['llama_cpp-cpu'] })])).placements[0]!.backend, 'llama_cpp-cpu');
  // Compute order stays the card's: the faster engine is only preferred within one compute.
  assert.deepEqual(unrankedOrder(['llama_cpp-cuda', 'llama_cpp-cpu', 'llama_server-cpu', 'llama_server-cuda', 'rpc-cpu']), ['llama_server-cuda', 'llama_cpp-cuda', 'llama_server-cpu', 'llama_cpp-cpu', 'rpc-cpu']);
});

test('compatible_backends is a hard filter', () => {
  const cudaOnly = card({ compatible_backends: ['llama_cpp-cuda'] });
  const p = ok(plan([node(0, 16 * GiB, { backends: ['llama_cpp-cpu'] }), node(1, 6 * GiB, { backends: ['llama_cpp-cuda'] })], {}, { card: cudaOnly }));
  assert.equal(p.placements[0]!.nodeId, nodeId(1), 'the bigger node offers no compatible backend');
  const gap = err(plan([node(0, 16 * GiB, { backends: ['llama_cpp-cpu', 'rpc-cpu'] })], {}, { card: cudaOnly }));
  assert.equal(gap.code, 'TOPOLOGY_GAP');
  assert.match(gap.message, /llama_cpp-cuda/);
  assert.equal(err(plan([])).code, 'TOPOLOGY_GAP');
});

test('exclusions are honoured and stamped on the plan (deduplicated, sorted)', () => {
  const nodes = [node(0, 8 * GiB), node(1, 6 * GiB), node(2, 5 * GiB)];
  const p = ok(plan(nodes, { exclusions: [nodeId(1), nodeId(0), nodeId(1)] }));
  assert.equal(p.placements[0]!.nodeId, nodeId(2));
  assert.deepEqual(p.exclusions, [nodeId(0), nodeId(1)]);
  // Excluding an unknown node is harmless.
  assert.deepEqual(ok(plan(nodes, { exclusions: [nodeId(9)] })).exclusions, [nodeId(9)]);
});

test('ALL_EXCLUDED when the exclusions remove every usable node', () => {
  const all = err(plan([node(0, 8 * GiB), node(1, 6 * GiB)], { exclusions: [nodeId(0), nodeId(1)] }));
  assert.equal(all.code, 'ALL_EXCLUDED');
  assert.deepEqual(all.exclusions, [nodeId(0), nodeId(1)]);
  // The only compatible node is excluded; the other could never run it.
  const onlyOne = err(plan([node(0, 8 * GiB), node(1, 64 * GiB, { backends: ['llama_cpp-metal'] })], { exclusions: [nodeId(0)] }));
  assert.equal(onlyOne.code, 'ALL_EXCLUDED');
});

test('INFO_PENDING only when the nodes that reported are not enough', () => {
  const pendingSmall = err(plan([node(0, null), node(1, 3 * GiB)]));
  assert.equal(pendingSmall.code, 'INFO_PENDING');
  assert.deepEqual(pendingSmall.pendingNodes, [nodeId(0)]);
  assert.equal(pendingSmall.causes?.[0]?.code, 'MEMORY_SHORTFALL');
  assert.match(pendingSmall.message, /Retry/);

  const allPending = err(plan([node(0, null), node(1, null)]));
  assert.equal(allPending.code, 'INFO_PENDING');
  assert.deepEqual(allPending.pendingNodes, [nodeId(0), nodeId(1)]);

  // A node that reported memory but not backends is still pending.
  const halfReported = err(plan([{ nodeId: nodeId(0), freeBytes: 8 * GiB, backends: null }]));
  assert.equal(halfReported.code, 'INFO_PENDING');

  const placed = ok(plan([node(0, null), node(1, 8 * GiB)]));
  assert.equal(placed.placements[0]!.nodeId, nodeId(1));
  assert.ok(placed.warnings.some((w) => w.includes(nodeId(0)) && /not reported/.test(w)));

  // An excluded pending node is not waited for.
  assert.equal(err(plan([node(0, null), node(1, 3 * GiB)], { exclusions: [nodeId(0)] })).code, 'MEMORY_SHORTFALL');
});

test('replicas: N distinct nodes each with a full copy, counted exactly', () => {
  const nodes = [node(0, 6 * GiB), node(1, 8 * GiB), node(2, 5 * GiB)];
  const cases = [
    { replicas: 1, shape: 'single', expected: [1] },
    { replicas: 2, shape: 'replicas', expected: [1, 0] },
    { replicas: 3, shape: 'replicas', expected: [1, 0, 2] },
  ];
  for (const c of cases) {
    const p = ok(plan(nodes, { replicas: c.replicas }));
    assert.equal(p.shape, c.shape);
    assert.deepEqual(p.placements.map((x) => x.nodeId), c.expected.map(nodeId), `${c.replicas} replicas`);
    assert.ok(p.placements.every((x) => x.role === 'full' && x.layerShare.fraction === 1));
    assert.equal(p.replicas, c.replicas);
  }
  const gap = err(plan(nodes, { replicas: 4 }));
  assert.equal(gap.code, 'TOPOLOGY_GAP');
  assert.match(gap.message, /4 replicas need 4 nodes .* 3 can/);
  const short = err(plan([node(0, 8 * GiB), node(1, 3 * GiB)], { replicas: 2 }));
  assert.equal(short.code, 'MEMORY_SHORTFALL');
  assert.deepEqual(short.single?.map((s) => s.nodeId), [nodeId(1)]);
  assert.equal(err(plan(nodes, { replicas: 2, minNodes: 2 })).code, 'INVALID_REQUEST');
  assert.equal(err(plan(nodes, { replicas: 0 })).code, 'INVALID_REQUEST');
});

test('pooled when no node fits: driver = most memory, donors next, as few as needed', () => {
  // 3 GiB driver + 2 GiB donor: 13 + 19 layers (split.test.ts works the numbers).
  const two = ok(plan([node(0, 3 * GiB), node(1, 2 * GiB), node(2, 2 * GiB), node(3, 2 * GiB)]));
  assert.equal(two.shape, 'pooled');
  assert.deepEqual(two.placements.map((p) => [p.nodeId, p.role, p.layerShare.layerCount]), [
    [nodeId(1), 'donor', 13],
    [nodeId(0), 'driver', 19],
  ]);
  assert.equal(two.placements[0]!.backend, 'rpc-cpu');
  assert.equal(two.placements[1]!.backend, 'llama_server-cpu');
  assert.equal(tensorSplitArg(two), '13,20');

  // 44 layers × 126 MiB = 5544 MiB: more than one donor's room plus the driver's (1728 + 2478.3 = 4206.3),
  // less than two donors' plus the driver's (5934.3): 44 × 1728/5934.3 = 12.81 → 13 each, driver 18.
  const three = ok(plan([node(0, 3 * GiB), node(1, 2 * GiB), node(2, 2 * GiB), node(3, 2 * GiB)], {}, { facts: factsA({ blockCount: 44 }) }));
  assert.deepEqual(three.placements.map((p) => [p.nodeId, p.role, p.layerShare.firstLayer, p.layerShare.layerCount]), [
    [nodeId(1), 'donor', 0, 13],
    [nodeId(2), 'donor', 13, 13],
    [nodeId(0), 'driver', 26, 18],
  ]);
  assert.equal(tensorSplitArg(three), '13,13,19');
  assert.ok(three.placements.every((p) => p.estimate.totalBytes < p.freeBytes));
  assert.ok(three.contextCeiling >= three.contextTokens);
});

test('min_nodes: forces a split even when one node fits, and warns that it is slower', () => {
  const measured = { memoryBandwidthBytesPerS: 31e9 };
  const forced = ok(plan([node(0, 8 * GiB, measured), node(1, 6 * GiB, measured)], {}, { card: card({ runtime: { parallel: 1, min_nodes: 2 } }) }));
  assert.equal(forced.shape, 'pooled');
  assert.equal(forced.placements.length, 2);
  assert.equal(forced.minNodes, 2);
  assert.ok(forced.warnings.some((w) => /slower than one node.*min_nodes 2 forces/.test(w)), forced.warnings.join('\n'));

  const gap = err(plan([node(0, 8 * GiB), node(1, 6 * GiB)], { minNodes: 3 }));
  assert.equal(gap.code, 'TOPOLOGY_GAP');
  assert.match(gap.message, /min_nodes 3/);

  // min_nodes wider than needed: 3 nodes used though 2 would do.
  const wide = ok(plan([node(0, 3 * GiB), node(1, 2 * GiB), node(2, 2 * GiB)], { minNodes: 3 }));
  assert.equal(wide.placements.length, 3);

  const noPool = err(plan([node(0, 8 * GiB), node(1, 8 * GiB)], { minNodes: 2 }, { card: card({ compatible_backends: ['llama_cpp-cpu'] }) }));
  assert.equal(noPool.code, 'TOPOLOGY_GAP');
});

test('a split predicted slower than one node at a smaller context says so', () => {
  // 8192 tokens need KV 1 GiB: 5,387,268,917 B free. Node 0 (5 GiB) fits it alone up to 7936 tokens.
  const big = card({ runtime: { parallel: 1, context_size: 8192 } });
  const measured = { memoryBandwidthBytesPerS: 31e9 };
  const p = ok(plan([node(0, 5 * GiB, measured), node(1, 3 * GiB, measured)], {}, { card: big }));
  assert.equal(p.shape, 'pooled');
  assert.ok(p.warnings.some((w) => /up to 7936 tokens of context \(asked for 8192\)/.test(w)), p.warnings.join('\n'));
  // A donor with far more bandwidth makes the split the faster option: no such warning.
  const fast = ok(plan([node(0, 5 * GiB, { memoryBandwidthBytesPerS: 10e9 }), node(1, 3 * GiB, { memoryBandwidthBytesPerS: 200e9 })], {}, { card: big }));
  assert.ok(!fast.warnings.some((w) => /slower than one node/.test(w)), fast.warnings.join('\n'));
  assert.ok(!fast.warnings.some((w) => /bandwidth/.test(w)));
});

test('MEMORY_SHORTFALL carries the numbers, per node, for one copy and for the widest split', () => {
  const e = err(plan([node(0, 2 * GiB), node(1, GiB)]));
  assert.equal(e.code, 'MEMORY_SHORTFALL');
  assert.deepEqual(e.single?.map((s) => [s.nodeId, s.neededBytes, s.freeBytes]), [
    [nodeId(0), 4_850_398_005, 2 * GiB],
    [nodeId(1), 4_850_398_005, GiB],
  ]);
  assert.match(e.message, /test\/model-a at 4096 tokens × 1 sequence/);
  assert.match(e.message, new RegExp(`${nodeId(0)} \\(full\\) needs 4\\.52 GiB, has 2\\.00 GiB`));
  assert.match(e.message, new RegExp(`${nodeId(1)} \\(full\\) needs 4\\.52 GiB, has 1\\.00 GiB`));
  assert.match(e.message, /a split over all 2 usable nodes does not fit/);
  assert.deepEqual(e.pooled?.map((s) => s.role), ['donor', 'driver']);
  assert.ok(e.pooled!.every((s) => s.estimate.arithmetic.length > 0));

  const noSplit = err(plan([node(0, 2 * GiB)], {}, { card: card({ compatible_backends: ['llama_cpp-cpu'] }) }));
  assert.equal(noSplit.code, 'MEMORY_SHORTFALL');
  assert.match(noSplit.message, /allows no split/);
});

test('the context asked for comes from the options, then the card, then min(4096, trained)', () => {
  const nodes = [node(0, 64 * GiB)];
  assert.equal(ok(plan(nodes)).contextTokens, 4096);
  assert.equal(ok(plan(nodes, {}, { facts: factsA({ trainedContext: 2048 }) })).contextTokens, 2048);
  assert.equal(ok(plan(nodes, {}, { card: card({ runtime: { parallel: 1, context_size: 1024 } }) })).contextTokens, 1024);
  assert.equal(ok(plan(nodes, { contextTokens: 512 }, { card: card({ runtime: { parallel: 1, context_size: 1024 } }) })).contextTokens, 512);
  const beyond = ok(plan(nodes, { contextTokens: 16384 }));
  assert.ok(beyond.warnings.some((w) => /beyond the 8192 tokens/.test(w)));
});

test('the built-in tiny model, from its real GGUF header, fits a 512 MiB node and not a 300 MiB one', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-plan-tiny-'));
  try {
    const path = join(dir, 'tiny.gguf');
    await generateRandomModel(TINY_MODEL_SPEC, path);
    const facts = await readGgufFacts(path);
    const tinyCard = BUILTIN_CARDS.find((c) => c.id === 'shoal/tiny')!;
    // ~1 MiB weights + 16 slots × 1 MiB KV (4096 tokens) + 2 MiB logits (1024 × 512 × 4) + 256 MiB floor ≈ 275 MiB, + 64 MiB margin
    const p = ok(planPlacement({ card: tinyCard, facts, nodes: [node(0, 512 * MiB, { backends: ['llama_cpp-cpu'] })] }));
    assert.equal(p.shape, 'single');
    assert.equal(p.placements[0]!.backend, 'llama_cpp-cpu');
    assert.equal(p.parallel, 16);
    assert.equal(p.contextCeiling, 4096);
    assert.ok(p.placements[0]!.estimate.totalBytes > 274 * MiB && p.placements[0]!.estimate.totalBytes < 277 * MiB);
    const e = err(planPlacement({ card: tinyCard, facts, nodes: [node(0, 300 * MiB, { backends: ['llama_cpp-cpu'] })] }));
    assert.equal(e.code, 'MEMORY_SHORTFALL');
    assert.match(e.message, /allows no split/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

// Slots from the memory fit. Model A at 4096 tokens costs 512 MiB of f16 KV per slot on top of
// 4049.7 MiB fixed (weights 3392 + logits 62.5 + overhead 339.2 + floor 256) and the 64 MiB margin.
const autoSlots = card({ runtime: {} });

test('slots: a roomy node gets the default 16, a tight one as many as fit', () => {
  const roomy = ok(plan([node(0, 64 * GiB)], {}, { card: autoSlots }));
  assert.equal(roomy.parallel, 16);
  assert.equal(roomy.contextTokens, 4096);
  assert.deepEqual(roomy.sizing, { parallel: 'memory fit', contextTokens: 'default' });
  assert.equal(roomy.placements[0]!.estimate.sequences, 16);
  // 8 GiB: 8192 - 4049.7 - 64 = 4078.3 MiB of room, 7 slots of 512 MiB
  const tight = ok(plan([node(0, 8 * GiB)], {}, { card: autoSlots }));
  assert.equal(tight.parallel, 7);
  assert.equal(tight.shape, 'single');
  // q8_0 costs 272 MiB a slot: 14 fit where f16 fitted 7
  assert.equal(ok(plan([node(0, 8 * GiB)], { kvCacheType: 'q8_0' }, { card: autoSlots })).parallel, 14);
});

test('slots: the request wins over the card, the card over the fit', () => {
  const nodes = [node(0, 64 * GiB)];
  const asked = ok(plan(nodes, { parallel: 2 }, { card: card({ runtime: { parallel: 3 } }) }));
  assert.equal(asked.parallel, 2);
  assert.equal(asked.sizing.parallel, 'request');
  const carded = ok(plan(nodes, {}, { card: card({ runtime: { parallel: 3 } }) }));
  assert.equal(carded.parallel, 3);
  assert.equal(carded.sizing.parallel, 'card');
  // An explicit count is kept: an unset context gives way (8 slots of 4096 need 4096 MiB, 4078.3 are free),
  // a set one refuses.
  const cpuOnly = card({ compatible_backends: ['llama_cpp-cpu'] });
  const squeezed = ok(plan([node(0, 8 * GiB)], { parallel: 8 }, { card: cpuOnly }));
  assert.equal(squeezed.parallel, 8);
  assert.equal(squeezed.contextTokens, 3840);
  assert.equal(err(plan([node(0, 8 * GiB)], { parallel: 8, contextTokens: 4096 }, { card: cpuOnly })).code, 'MEMORY_SHORTFALL');
});

test('slots never buy a split: a model one node holds with one slot stays on one node', () => {
  const p = ok(plan([node(0, 5 * GiB), node(1, 5 * GiB)], {}, { card: autoSlots }));
  assert.equal(p.shape, 'single');
  // 5120 - 4049.7 - 64 = 1006.3 MiB: one slot of 512
  assert.equal(p.parallel, 1);
});

test('an unset context is lowered to fit before the planner refuses; a set one is not', () => {
  const cpuOnly = card({ runtime: {}, compatible_backends: ['llama_cpp-cpu'] });
  const n = [node(0, 4.4 * GiB)];
  // 4505.6 - 4049.7 - 64 = 391.9 MiB: 3135 tokens of 128 KiB, 3072 in steps of 256
  const p = ok(plan(n, {}, { card: cpuOnly }));
  assert.equal(p.contextTokens, 3072);
  assert.equal(p.parallel, 1);
  assert.deepEqual(p.sizing, { parallel: 'memory fit', contextTokens: 'memory fit' });
  assert.ok(p.warnings.some((w) => /lowered from the default 4096 to 3072/.test(w)));
  assert.equal(err(plan(n, { contextTokens: 4096 }, { card: cpuOnly })).code, 'MEMORY_SHORTFALL');
  // Below the 2048-token floor it refuses: 4.2 GiB leaves 187 MiB, 1280 tokens
  assert.equal(err(plan([node(0, 4.2 * GiB)], {}, { card: cpuOnly })).code, 'MEMORY_SHORTFALL');
});

test('KV cache type and flash attention are stamped; a quantized cache without flash attention is refused', () => {
  const p = ok(plan([node(0, 64 * GiB)], { kvCacheType: 'q4_0', flashAttention: 'on' }));
  assert.equal(p.kvCacheType, 'q4_0');
  assert.equal(p.flashAttention, 'on');
  assert.equal(p.placements[0]!.estimate.kvCacheType, 'q4_0');
  const fromCard = ok(plan([node(0, 64 * GiB)], {}, { card: card({ runtime: { parallel: 1, kv_cache_type: 'q8_0' } }) }));
  assert.equal(fromCard.kvCacheType, 'q8_0');
  assert.equal(fromCard.flashAttention, 'auto');
  const refused = err(plan([node(0, 64 * GiB)], { kvCacheType: 'q8_0', flashAttention: 'off' }));
  assert.equal(refused.code, 'INVALID_REQUEST');
  assert.match(refused.message, /flash attention/);
  // Quantized blocks hold 32 values: a model with 16-wide heads cannot use them.
  const narrow = err(plan([node(0, 64 * GiB)], { kvCacheType: 'q4_0' }, { facts: factsA({ keyLength: 16, valueLength: 16 }) }));
  assert.equal(narrow.code, 'INVALID_REQUEST');
  assert.match(narrow.message, /16 \(K\) and 16 \(V\) wide/);
  // Flash attention off counts the attention scores: 4096 cells × 512 × 32 heads × 4 B = 256 MiB
  const off = ok(plan([node(0, 64 * GiB)], { flashAttention: 'off' }));
  assert.equal(off.placements[0]!.estimate.attentionScoresBytes, 256 * MiB);
});

test('a plan on a backend the speed model does not know shows no prediction, and the launch still plans', () => {
  const gpuOnly = card({ compatible_backends: ['llama_server-cuda'] });
  const p = ok(plan([node(0, 8 * GiB, { memoryBandwidthBytesPerS: 31e9 })], {}, { card: gpuOnly }));
  assert.equal(p.shape, 'single');
  assert.equal(p.predictedDecodeTokPerS, null);
  assert.ok(p.speedArithmetic.some((line) => /llama_server-cuda/.test(line)), p.speedArithmetic.join('\n'));
  const replicas = ok(plan([node(0, 8 * GiB), node(1, 8 * GiB)], { replicas: 2 }, { card: gpuOnly }));
  assert.equal(replicas.predictedDecodeTokPerS, null);
  const cpu = ok(plan([node(0, 8 * GiB, { memoryBandwidthBytesPerS: 31e9 })], {}, { card: card({ compatible_backends: ['llama_server-cpu'] }) }));
  assert.ok(cpu.predictedDecodeTokPerS !== null && cpu.predictedDecodeTokPerS > 0);
});

test('slots never widen a split: the nodes one slot needs are the nodes it gets', () => {
  // Neither 4 GiB node holds Model A; two do with one slot, and more slots would need a third.
  const nodes = [node(0, 4 * GiB), node(1, 4 * GiB), node(2, 4 * GiB)];
  const one = ok(plan(nodes));
  assert.equal(one.shape, 'pooled');
  const fitted = ok(plan(nodes, {}, { card: autoSlots }));
  assert.equal(fitted.placements.length, one.placements.length);
  assert.ok(fitted.parallel >= 1);
  const wide = ok(plan(nodes, { parallel: 16 }, { card: autoSlots }));
  assert.ok(wide.placements.length > one.placements.length, 'sixteen slots would take a wider split');
});
