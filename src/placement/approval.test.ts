import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { InstanceId } from '../common/ids.js';
import { assignmentsFor } from '../worker/assignments.js';
import { apply, applyRecord } from '../master/state/apply.js';
import { Command } from '../master/state/commands.js';
import { decide } from '../master/state/decide.js';
import { emptyState, type ClusterState } from '../master/state/state.js';
import { clusterLog, instanceSpec, nodeId, origin } from '../master/state/fixtures.test-support.js';

const ID = 'inst-wait' as InstanceId;

function waiting(): ClusterState {
  const state = clusterLog(3).records.reduce(applyRecord, emptyState());
  const spec = { ...instanceSpec(ID, [0, 1]), awaitingApproval: [{ nodeId: nodeId(1), bytes: 5 * 2 ** 30, source: 'peer' as const }] };
  return apply(state, { type: 'InstanceCreated', instance: spec, replaces: null }, 20);
}

describe('downloads awaiting approval', () => {
  test('an instance awaiting approval is assigned to no node, so none starts a part or a download', () => {
    const state = waiting();
    assert.deepEqual(assignmentsFor(state, nodeId(0)), []);
    assert.deepEqual(assignmentsFor(state, nodeId(1)), []);
  });

  test('ApproveDownloads becomes DownloadsApproved, which clears the wait; the parts are assigned then', () => {
    const state = waiting();
    const decision = decide(state, origin(2, { type: 'ApproveDownloads', instanceId: ID }));
    assert.deepEqual(decision, { events: [{ type: 'DownloadsApproved', instanceId: ID }] });
    const approved = apply(state, { type: 'DownloadsApproved', instanceId: ID }, 21);
    assert.equal(approved.instances[ID]?.awaitingApproval, undefined);
    assert.equal(Object.hasOwn(approved.instances[ID] ?? {}, 'awaitingApproval'), false, 'the field is gone, not undefined (state hashes stay canonical)');
    assert.deepEqual(assignmentsFor(approved, nodeId(1)).map((a) => a.instance.instanceId), [ID]);
  });

  test('approving twice changes nothing more; an unknown instance is a typed rejection', () => {
    const approved = apply(waiting(), { type: 'DownloadsApproved', instanceId: ID }, 21);
    assert.equal(apply(approved, { type: 'DownloadsApproved', instanceId: ID }, 22), approved);
    assert.deepEqual(decide(approved, origin(0, { type: 'ApproveDownloads', instanceId: 'inst-none' as InstanceId })), {
      error: { code: 'INSTANCE_NOT_FOUND', message: 'instance inst-none is not running (it may have ended already)' },
    });
    const none = clusterLog(3).records.reduce(applyRecord, emptyState());
    assert.equal(apply(none, { type: 'DownloadsApproved', instanceId: ID }, 22), none);
  });

  test('the wire refuses an empty wait list (absent means nothing waits)', () => {
    const spec = { ...instanceSpec(ID, [0]), awaitingApproval: [] };
    assert.equal(Command.safeParse({ type: 'PlaceInstance', instance: spec }).success, false);
    assert.equal(Command.safeParse({ type: 'PlaceInstance', instance: { ...spec, awaitingApproval: [{ nodeId: nodeId(0), bytes: 1, source: 'hub' }] } }).success, true);
  });
});
