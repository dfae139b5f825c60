import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { InstanceId } from '../common/ids.js';
import { apply, applyRecord } from '../master/state/apply.js';
import { clusterLog, instanceSpec, nodeId } from '../master/state/fixtures.test-support.js';
import { emptyState, type ClusterState } from '../master/state/state.js';
import { assignmentsFor, MEMORY_GUARD_TOLERANCE, memoryGuard, nextActions } from './assignments.js';

function withInstances(...specs: ReturnType<typeof instanceSpec>[]): ClusterState {
  let state = clusterLog(3).records.reduce(applyRecord, emptyState());
  specs.forEach((spec, i) => {
    state = apply(state, { type: 'InstanceCreated', instance: spec, replaces: null }, 100 + i);
  });
  return state;
}

const id = (text: string): InstanceId => text as InstanceId;

describe('worker assignments', () => {
  test('a node is assigned exactly the parts placed on it, oldest first', () => {
    const state = withInstances(instanceSpec('inst-b', [1, 2]), instanceSpec('inst-a', [0]), instanceSpec('inst-c', [0, 1, 2], 'pooled'));
    assert.deepEqual(assignmentsFor(state, nodeId(1)).map((a) => [a.instance.instanceId, a.placement.role]), [
      ['inst-b', 'full'],
      ['inst-c', 'donor'],
    ]);
    assert.deepEqual(assignmentsFor(state, nodeId(2)).map((a) => [a.instance.instanceId, a.placement.role]), [
      ['inst-b', 'full'],
      ['inst-c', 'driver'],
    ]);
    assert.deepEqual(assignmentsFor(state, nodeId(40)), []);
  });

  test('starts what is missing (donors first, drivers last) and stops what state dropped', () => {
    const state = withInstances(instanceSpec('inst-d', [0, 1], 'pooled'), instanceSpec('inst-f', [1]), instanceSpec('inst-e', [1, 2], 'pooled'));
    const actions = nextActions(assignmentsFor(state, nodeId(1)), [{ instanceId: id('inst-gone'), local: false }, { instanceId: id('inst-default'), local: true }], new Set());
    assert.deepEqual(
      actions.map((a) => (a.type === 'stop' ? `stop ${a.instanceId}` : `start ${a.assignment.instance.instanceId} ${a.assignment.placement.role}`)),
      ['stop inst-gone', 'start inst-e donor', 'start inst-f full', 'start inst-d driver'],
      "the node's own default instance is never stopped by state",
    );
  });

  test('held and starting parts are not started again; a converged node has nothing to do', () => {
    const state = withInstances(instanceSpec('inst-a', [0]), instanceSpec('inst-b', [0]));
    const assignments = assignmentsFor(state, nodeId(0));
    assert.deepEqual(nextActions(assignments, [{ instanceId: id('inst-a'), local: false }], new Set([id('inst-b')])), []);
  });

  test('the memory guard refuses only beyond its tolerance', () => {
    const estimate = 1000 * 2 ** 20;
    assert.deepEqual(memoryGuard(estimate, estimate), { ok: true });
    assert.deepEqual(memoryGuard(estimate, estimate * (1 - MEMORY_GUARD_TOLERANCE)), { ok: true }, 'exactly at the tolerance passes');
    const refused = memoryGuard(estimate, estimate * (1 - MEMORY_GUARD_TOLERANCE) - 1);
    assert.equal(refused.ok, false);
    assert.match(refused.ok ? '' : refused.message, /needs about 1000 MiB .* can offer 900 MiB/);
  });
});
