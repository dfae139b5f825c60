// The speculative draft (card runtime.speculative) counted by the memory estimate and the planner:
// llama-server loads it beside the model, with its own KV cache of the same cells.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { card, cudaNode, factsA, GiB, MiB, node, nodeId } from './fixtures.test-support.js';
import { DRAFT_KV_CACHE_TYPE, estimateDevice, estimateHost, estimateMemory, fullShare, OVERHEAD_FRACTION } from './memory.js';
import { planPlacement, type PlanInput, type PlanOptions, type PlanResult } from './planner.js';

/** "Draft D": model A's shape with 4 layers (400 MiB), embeddings 64 MiB, output 128 MiB: 592 MiB of weights. */
const draftD = factsA({ blockCount: 4 });
/** A draft as big as model A's 16 layers: 1792 MiB of weights. */
const bigDraft = factsA({ blockCount: 16 });
const speculativeCard = card({ runtime: { parallel: 1, speculative: { draft: 'test/draft' } } });
const AT_4096 = { contextTokens: 4096, parallel: 1 };

function plan(nodes: PlanInput['nodes'], input: Partial<PlanInput> = {}, options: PlanOptions = AT_4096): PlanResult {
  return planPlacement({ card: speculativeCard, facts: factsA(), nodes, ...input }, options);
}

test("the draft on a CPU part: its weights, its own f16 KV of the target's cells, its logits rows and 10%, by hand", () => {
  const facts = factsA();
  const alone = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 2 });
  const withDraft = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 2, draft: draftD });
  // weights  = 4 × 100 + 64 + 128 MiB = 592 MiB = 620,756,992 B
  // KV       = 4 layers × (128 + 128) × 8 KV heads × 2 B = 16,384 B/cell × 8192 cells = 128 MiB = 134,217,728 B
  // logits   = 32000 vocab × min(512, 2 sequences) × 4 B = 256,000 B (llama-server caps the draft's outputs at n_parallel)
  // overhead = ceil(10% × 620,756,992) = 62,075,700 B
  assert.equal(withDraft.draftBytes, 620_756_992 + 134_217_728 + 256_000 + 62_075_700);
  assert.equal(withDraft.totalBytes, alone.totalBytes + withDraft.draftBytes);
  assert.equal(alone.draftBytes, 0);
  assert.ok(withDraft.arithmetic.some((line) => line.startsWith('draft ') && line.includes('(f16, 8192 cells)')), withDraft.arithmetic.join('\n'));
  // The target's cache type does not reach the draft: llama-server's draft cache defaults to f16.
  const q8 = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 2, kvCacheType: 'q8_0', draft: draftD });
  assert.equal(DRAFT_KV_CACHE_TYPE, 'f16');
  assert.equal(q8.draftBytes, withDraft.draftBytes);
  // Flash attention off: the draft's attention scores too, 8192 cells × 512 × 32 heads × 4 B = 512 MiB.
  const off = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 2, flashAttention: 'off', draft: draftD });
  assert.equal(off.draftBytes, withDraft.draftBytes + 512 * MiB);
});

test('only the part holding the output (the llama-server process) holds the draft; a donor none', () => {
  const facts = factsA();
  const options = { contextTokens: 4096, sequences: 1, draft: draftD };
  assert.equal(estimateMemory(facts, { firstLayer: 0, layerCount: 16, holdsOutput: false }, options).draftBytes, 0);
  assert.ok(estimateMemory(facts, { firstLayer: 16, layerCount: 16, holdsOutput: true }, options).draftBytes > 0);
});

test('on a GPU part the draft sits with the output on the device, its token embeddings on the host', () => {
  const facts = factsA();
  const options = { contextTokens: 4096, sequences: 1, draft: draftD };
  const device = estimateDevice(facts, fullShare(facts), options);
  const host = estimateHost(facts, { firstLayer: 0, layerCount: 0, holdsOutput: false }, options, true);
  // device: 400 + 128 MiB weights (553,648,128 B) + 64 MiB KV (4096 cells) + 128,000 B logits + ceil(10%) 55,364,813 B
  assert.equal(device.draftBytes, 553_648_128 + 67_108_864 + 128_000 + 55_364_813);
  // host: its 64 MiB embeddings + 10%
  assert.equal(host.draftBytes, 64 * MiB + Math.ceil(64 * MiB * OVERHEAD_FRACTION));
  // A device without the output, and a donor's host, hold none of it.
  assert.equal(estimateDevice(facts, { firstLayer: 0, layerCount: 16, holdsOutput: false }, options).draftBytes, 0);
  assert.equal(estimateHost(facts, { firstLayer: 0, layerCount: 0, holdsOutput: false }, options, false).draftBytes, 0);
  // A spilled part keeps its output in RAM, and the whole draft there with it.
  assert.equal(estimateHost(facts, { firstLayer: 0, layerCount: 4, holdsOutput: true }, options, true).draftBytes, estimateMemory(draftD, fullShare(draftD), { contextTokens: 4096, sequences: 1, draft: draftD }).draftBytes);
});

test('a model that fits a node alone does not fit it with a big draft', () => {
  // Model A alone needs 4,850,398,005 B free at 4096 × 1 (planner.test.ts); 5 GiB has it.
  const nodes = [node(0, 5 * GiB)];
  const alone = plan(nodes);
  assert.ok(alone.ok, alone.ok ? '' : alone.error.message);
  const refused = plan(nodes, { draft: bigDraft });
  assert.ok(!refused.ok, 'the draft does not fit beside the model');
  assert.equal(refused.error.code, 'MEMORY_SHORTFALL');
  assert.ok(refused.error.single?.[0]?.estimate.arithmetic.some((line) => line.startsWith('draft ')), 'the refusal shows the draft it counted');
  // With room for both, the placement reserves both: what the worker's memory guard checks it against.
  const both = plan([node(0, 7 * GiB)], { draft: bigDraft });
  assert.ok(both.ok, both.ok ? '' : both.error.message);
  const [part] = both.plan.placements;
  assert.ok(part!.estimate.draftBytes > 1792 * MiB);
  assert.equal(part!.ramBytes, part!.estimate.totalBytes);
  const roomAlone = plan([node(0, 7 * GiB)]);
  assert.ok(roomAlone.ok);
  assert.ok(both.plan.contextCeiling < roomAlone.plan.contextCeiling, `the draft also lowers the context ceiling: ${both.plan.contextCeiling} vs ${roomAlone.plan.contextCeiling}`);
  assert.deepEqual(both.plan.warnings, []);
});

test("a draft whose file is not on this node is not counted, and the plan says so", () => {
  const result = plan([node(0, 5 * GiB)]);
  assert.ok(result.ok);
  assert.equal(result.plan.placements[0]!.estimate.draftBytes, 0);
  assert.ok(result.plan.warnings.some((w) => w.includes('the draft test/draft is not on this node') && w.includes('not counted')), result.plan.warnings.join('\n'));
  // No speculative card, no warning and no draft, whatever facts are at hand.
  const plain = planPlacement({ card: card(), facts: factsA(), nodes: [node(0, 5 * GiB)], draft: bigDraft }, AT_4096);
  assert.ok(plain.ok);
  assert.deepEqual(plain.plan.warnings, []);
  assert.equal(plain.plan.placements[0]!.estimate.draftBytes, 0);
});

test('the in-process engine loads no draft: a node without llama-server is not charged for one', () => {
  const result = plan([node(0, 5 * GiB, { backends: ['llama_cpp-cpu'] })], { draft: bigDraft });
  assert.ok(result.ok, result.ok ? '' : result.error.message);
  assert.equal(result.plan.placements[0]!.backend, 'llama_cpp-cpu');
  assert.equal(result.plan.placements[0]!.estimate.draftBytes, 0);
  assert.deepEqual(result.plan.warnings, []);
});

test('a GPU that holds the model alone does not hold it with a big draft', () => {
  // Model A on one GPU takes 4,977,904,845 B of VRAM (planner-gpu.test.ts): 5 GiB admits it, not with the draft.
  const nodes = [cudaNode(0, 16 * GiB, [5 * GiB])];
  const alone = plan(nodes);
  assert.ok(alone.ok, alone.ok ? '' : alone.error.message);
  assert.equal(alone.plan.placements[0]!.backend, 'llama_server-cuda');
  const refused = plan(nodes, { draft: bigDraft });
  assert.ok(!refused.ok, 'the draft does not fit the GPU beside the model');
  const short = refused.error.single?.[0]?.devices?.[0];
  assert.ok(short !== undefined && short.estimate.draftBytes > 0 && short.neededBytes > short.freeBytes, 'the GPU is what falls short, by the draft it counted');
  const roomy = plan([cudaNode(0, 16 * GiB, [8 * GiB])], { draft: bigDraft });
  assert.ok(roomy.ok, roomy.ok ? '' : roomy.error.message);
  const [part] = roomy.plan.placements;
  assert.ok(part!.devices[0]!.bytes > alone.plan.placements[0]!.devices[0]!.bytes + 1792 * MiB - 256 * MiB, 'the device holds the draft without its embeddings');
  assert.equal(part!.estimate.draftBytes, 64 * MiB + Math.ceil(64 * MiB * OVERHEAD_FRACTION), 'the host holds its token embeddings');
});

test('a split counts the draft on its driver only', () => {
  // Neither 3 GiB node holds model A; the split's driver also holds the draft.
  const result = plan([node(0, 3 * GiB), node(1, 3 * GiB), node(2, 3 * GiB)], { draft: draftD }, { ...AT_4096, minNodes: 2 });
  assert.ok(result.ok, result.ok ? '' : result.error.message);
  assert.equal(result.plan.shape, 'pooled');
  const driver = result.plan.placements.find((p) => p.role === 'driver')!;
  const donors = result.plan.placements.filter((p) => p.role === 'donor');
  assert.ok(driver.estimate.draftBytes > 0);
  assert.ok(donors.every((p) => p.estimate.draftBytes === 0));
  // The driver gets fewer layers than it would without the draft, to make room for it.
  const without = plan([node(0, 3 * GiB), node(1, 3 * GiB), node(2, 3 * GiB)], {}, { ...AT_4096, minNodes: 2 });
  assert.ok(without.ok);
  const driverWithout = without.plan.placements.find((p) => p.role === 'driver')!;
  assert.ok(driver.layerShare.layerCount < driverWithout.layerShare.layerCount, `${driver.layerShare.layerCount} vs ${driverWithout.layerShare.layerCount}`);
  assert.notEqual(driver.nodeId, undefined);
  assert.ok([nodeId(0), nodeId(1), nodeId(2)].includes(driver.nodeId));
});
