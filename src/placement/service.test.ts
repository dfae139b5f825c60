import { test } from 'node:test';
import assert from 'node:assert/strict';
import { newInstanceId } from '../common/ids.js';
import { InstanceSpec } from '../master/state/instances.js';
import { appleNode, card, cudaNode, factsA, GiB, MIXED_TEST_BACKENDS, node } from './fixtures.test-support.js';
import { planPlacement, type Plan, type PlanInput, type PlanOptions } from './planner.js';
import { planFromSpec, specFromPlan } from './service.js';

function planOf(input: PlanInput, options: PlanOptions): Plan {
  const result = planPlacement(input, { contextTokens: 4096, parallel: 1, ...options });
  assert.ok(result.ok, result.ok ? '' : result.error.message);
  return result.plan;
}

test('the instance record carries what the engine needs per GPU: -ngl, devices and their tensor split', () => {
  const c = card();
  const plan = planOf({ card: c, facts: factsA(), nodes: [cudaNode(0, 8 * GiB, [12 * GiB, 12 * GiB])] }, {});
  const spec = InstanceSpec.parse(specFromPlan(plan, c, newInstanceId(), 0));
  const [p] = spec.placements;
  assert.equal(p!.gpuLayers, 33);
  assert.deepEqual(p!.devices?.map((d) => [d.index, d.layerCount, d.tensorSplit]), [
    [0, 16, 16],
    [1, 16, 17],
  ]);
  assert.equal(p!.devices?.[1]!.estimatedBytes, Math.ceil(plan.placements[0]!.devices[1]!.bytes));
  // The worker's memory guard checks RAM: the host side only on a discrete GPU.
  assert.equal(p!.estimatedBytes, Math.ceil(plan.placements[0]!.ramBytes));
  assert.ok(p!.estimatedBytes < GiB);
  assert.equal(spec.allowSpill, undefined);
  // Rebuilt for a re-placement, the layout and the knob come back.
  const again = planFromSpec(spec, factsA());
  assert.equal(again.placements[0]!.gpuLayers, 33);
  assert.deepEqual(again.placements[0]!.devices.map((d) => d.tensorSplit), [16, 17]);
  assert.equal(again.allowSpill, false);
});

test('a CPU part records no GPU fields; a spilled one records allowSpill; unified memory counts the device in RAM', () => {
  const c = card();
  const cpu = InstanceSpec.parse(specFromPlan(planOf({ card: c, facts: factsA(), nodes: [node(0, 16 * GiB)] }, {}), c, newInstanceId(), 0));
  assert.equal(cpu.placements[0]!.gpuLayers, undefined);
  assert.equal(cpu.placements[0]!.devices, undefined);

  const spilled = planOf({ card: c, facts: factsA(), nodes: [cudaNode(0, 16 * GiB, [4 * GiB])] }, { allowSpill: true });
  const spec = InstanceSpec.parse(specFromPlan(spilled, c, newInstanceId(), 0));
  assert.equal(spec.allowSpill, true);
  assert.equal(spec.placements[0]!.gpuLayers, 27);
  assert.equal(planFromSpec(spec, factsA()).placements[0]!.spilledLayers, 5);

  const mixed = card({ compatible_backends: MIXED_TEST_BACKENDS });
  const apple = planOf({ card: mixed, facts: factsA(), nodes: [appleNode(0, 16 * GiB, 12 * GiB)] }, {});
  const placed = specFromPlan(apple, mixed, newInstanceId(), 0).placements[0]!;
  assert.equal(placed.estimatedBytes, Math.ceil(apple.placements[0]!.estimate.totalBytes + apple.placements[0]!.devices[0]!.bytes));
});
