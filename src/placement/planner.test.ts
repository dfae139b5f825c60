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
import { card, factsA, GiB, MiB, node, nodeId } from './fixtures.test-support.js';
import { planPlacement, tensorSplitArg, type PlanInput, type PlanOptions, type PlanResult } from './planner.js';
import type { ClusterNode } from './nodes.js';

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
  // 3328 MiB read per token at the assumed 31 GB/s = 8.88 tok/s
  assert.ok(Math.abs(p.predictedDecodeTokPerS - 8.883) < 0.01);
  assert.ok(p.warnings.some((w) => /bandwidth/.test(w)));
  assert.deepEqual(p.refusal, { hops: 0, fellBack: false });
  assert.equal(tensorSplitArg(p), null);
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
  const forced = ok(plan([node(0, 8 * GiB), node(1, 6 * GiB)], {}, { card: card({ runtime: { min_nodes: 2 } }) }));
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
  const big = card({ runtime: { context_size: 8192 } });
  const p = ok(plan([node(0, 5 * GiB), node(1, 3 * GiB)], {}, { card: big }));
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
  assert.equal(ok(plan(nodes, {}, { card: card({ runtime: { context_size: 1024 } }) })).contextTokens, 1024);
  assert.equal(ok(plan(nodes, { contextTokens: 512 }, { card: card({ runtime: { context_size: 1024 } }) })).contextTokens, 512);
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
    // ~1 MiB weights + 1 MiB KV (4096 tokens) + 2 MiB logits (1024 × 512 × 4) + 256 MiB floor ≈ 260 MiB, + 64 MiB margin
    const p = ok(planPlacement({ card: tinyCard, facts, nodes: [node(0, 512 * MiB, { backends: ['llama_cpp-cpu'] })] }));
    assert.equal(p.shape, 'single');
    assert.equal(p.placements[0]!.backend, 'llama_cpp-cpu');
    assert.equal(p.contextCeiling, 4096);
    assert.ok(p.placements[0]!.estimate.totalBytes > 259 * MiB && p.placements[0]!.estimate.totalBytes < 262 * MiB);
    const e = err(planPlacement({ card: tinyCard, facts, nodes: [node(0, 300 * MiB, { backends: ['llama_cpp-cpu'] })] }));
    assert.equal(e.code, 'MEMORY_SHORTFALL');
    assert.match(e.message, /allows no split/);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
