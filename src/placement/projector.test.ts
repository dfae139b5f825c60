// A vision card's projector (its mmproj file) counted by the memory estimate and the planner:
// llama-server loads it beside the model, where the draft sits (with the output).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { card, cudaNode, factsA, GiB, MiB, node } from './fixtures.test-support.js';
import { estimateDevice, estimateHost, estimateMemory, fullShare, OVERHEAD_FRACTION } from './memory.js';
import { planPlacement, type PlanInput, type PlanResult } from './planner.js';

const PROJECTOR_BYTES = 600 * MiB;
const visionCard = card({
  projector: { kind: 'file', path: '/models/mmproj-a.gguf' },
  capabilities: { vision: true },
  compatible_backends: ['llama_server-cpu', 'llama_server-cuda', 'rpc-cpu'],
});
const AT_4096 = { contextTokens: 4096, parallel: 1 };

function plan(nodes: PlanInput['nodes'], input: Partial<PlanInput> = {}): PlanResult {
  return planPlacement({ card: visionCard, facts: factsA(), nodes, ...input }, AT_4096);
}

test('the projector costs its file and 10% on the part holding the output, by hand; a donor none', () => {
  const facts = factsA();
  const options = { contextTokens: 4096, sequences: 1 };
  const alone = estimateMemory(facts, fullShare(facts), options);
  const withProjector = estimateMemory(facts, fullShare(facts), { ...options, projectorBytes: PROJECTOR_BYTES });
  // 600 MiB = 629,145,600 B + ceil(10%) 62,914,560 B
  assert.equal(withProjector.projectorBytes, 629_145_600 + 62_914_560);
  assert.equal(withProjector.totalBytes, alone.totalBytes + withProjector.projectorBytes);
  assert.ok(withProjector.arithmetic.includes(`projector 660 MiB = its file 600 MiB + ${OVERHEAD_FRACTION * 100}%`), withProjector.arithmetic.join('\n'));
  assert.equal(alone.projectorBytes, 0);
  assert.equal(estimateMemory(facts, { firstLayer: 0, layerCount: 16, holdsOutput: false }, { ...options, projectorBytes: PROJECTOR_BYTES }).projectorBytes, 0);
  // On a GPU part it sits on the device with the output; the host side holds none of it.
  assert.equal(estimateDevice(facts, fullShare(facts), { ...options, projectorBytes: PROJECTOR_BYTES }).projectorBytes, withProjector.projectorBytes);
  assert.equal(estimateHost(facts, { firstLayer: 0, layerCount: 0, holdsOutput: false }, { ...options, projectorBytes: PROJECTOR_BYTES }, true).projectorBytes, 0);
});

test('a vision model that fits a node alone does not fit it with its projector, and the refusal shows it', () => {
  // Model A alone needs 4,850,398,005 B free at 4096 × 1 (planner.test.ts).
  const tight = [node(0, 4_850_398_005 + 100 * MiB)];
  assert.ok(plan(tight).ok, 'without the projector counted it fits');
  const refused = plan(tight, { projectorBytes: PROJECTOR_BYTES });
  assert.ok(!refused.ok, 'the projector does not fit beside the model');
  assert.equal(refused.error.code, 'MEMORY_SHORTFALL');
  assert.ok(refused.error.single?.[0]?.estimate.arithmetic.some((line) => line.startsWith('projector ')));
  const roomy = plan([node(0, 6 * GiB)], { projectorBytes: PROJECTOR_BYTES });
  assert.ok(roomy.ok, roomy.ok ? '' : roomy.error.message);
  assert.equal(roomy.plan.placements[0]!.ramBytes, roomy.plan.placements[0]!.estimate.totalBytes);
  assert.ok(roomy.plan.placements[0]!.estimate.projectorBytes > PROJECTOR_BYTES);
  assert.deepEqual(roomy.plan.warnings, []);
});

test('on a GPU the projector takes device memory; a projector not on this node is not counted and the plan says so', () => {
  // Model A on one GPU takes 4,977,904,845 B of VRAM (planner-gpu.test.ts).
  const gpuOnly = plan([cudaNode(0, 16 * GiB, [4_977_904_845 + 100 * MiB])], { projectorBytes: PROJECTOR_BYTES });
  assert.ok(!gpuOnly.ok, 'the GPU holds the model but not its projector too');
  const short = gpuOnly.error.single?.[0]?.devices?.[0];
  assert.ok(short !== undefined && short.estimate.projectorBytes > 0 && short.neededBytes > short.freeBytes);
  const unknown = plan([node(0, 6 * GiB)]);
  assert.ok(unknown.ok);
  assert.equal(unknown.plan.placements[0]!.estimate.projectorBytes, 0);
  assert.ok(unknown.plan.warnings.some((w) => w.includes('the projector of test/model-a is not on this node') && w.includes('not counted')), unknown.plan.warnings.join('\n'));
  // A text card is never charged for a projector, whatever bytes are at hand.
  const text = planPlacement({ card: card(), facts: factsA(), nodes: [node(0, 6 * GiB)], projectorBytes: PROJECTOR_BYTES }, AT_4096);
  assert.ok(text.ok);
  assert.equal(text.plan.placements[0]!.estimate.projectorBytes, 0);
  assert.deepEqual(text.plan.warnings, []);
});
