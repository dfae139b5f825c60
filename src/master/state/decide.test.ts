import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { apply, applyRecord } from './apply.js';
import type { Command } from './commands.js';
import { decide, type Decision } from './decide.js';
import { emptyState, MAX_MEMBERS, type ClusterState } from './state.js';
import { CLUSTER_ID, clusterLog, member, nodeId, origin } from './fixtures.test-support.js';

function cluster(): ClusterState {
  return clusterLog(3).records.reduce(applyRecord, emptyState());
}

function code(decision: Decision): string | null {
  return 'error' in decision ? decision.error.code : null;
}

function events(decision: Decision): unknown[] {
  assert.ok('events' in decision, `expected events, got ${JSON.stringify(decision)}`);
  return decision.events;
}

const stranger = nodeId(40);
const found: Command = { type: 'FoundCluster', clusterId: CLUSTER_ID, founder: member(0) };

describe('decide', () => {
  test('FoundCluster: only without a cluster, only for oneself', () => {
    assert.deepEqual(events(decide(emptyState(), origin(0, found))), [{ type: 'ClusterFounded', clusterId: CLUSTER_ID, founder: member(0) }]);
    assert.equal(code(decide(cluster(), origin(0, found))), 'CLUSTER_EXISTS');
    assert.equal(code(decide(emptyState(), origin(1, found))), 'FORBIDDEN');
  });

  test('everything else needs a live cluster and a member asking', () => {
    const nick: Command = { type: 'SetNickname', nodeId: nodeId(1), nickname: 'x' };
    assert.equal(code(decide(emptyState(), origin(0, nick))), 'NO_CLUSTER');
    assert.equal(code(decide(apply(cluster(), { type: 'ClusterDissolved' }, 9), origin(0, nick))), 'CLUSTER_DISSOLVED');
    assert.equal(code(decide(cluster(), { ...origin(0, nick), from: stranger })), 'NOT_A_MEMBER');
    // A pruned member is still a member.
    const pruned = apply(cluster(), { type: 'NodeTimedOut', nodeId: nodeId(1), heartbeatAgeMs: 1, lastSeenAgeMs: 1 }, 9);
    assert.equal(code(decide(pruned, origin(1, nick))), null);
  });

  test('AdmitMember: new members, members again (idempotent), and a full roster', () => {
    assert.deepEqual(events(decide(cluster(), origin(1, { type: 'AdmitMember', member: member(7) }))), [{ type: 'MemberAdmitted', member: member(7) }]);
    assert.deepEqual(events(decide(cluster(), origin(1, { type: 'AdmitMember', member: member(2) }))), [{ type: 'MemberAdmitted', member: member(2) }]);
    let full = cluster();
    for (let n = 3; n < MAX_MEMBERS; n++) full = apply(full, { type: 'MemberAdmitted', member: member(n) }, n + 10);
    assert.equal(code(decide(full, origin(0, { type: 'AdmitMember', member: member(MAX_MEMBERS + 3) }))), 'CLUSTER_FULL');
    assert.equal(code(decide(full, origin(0, { type: 'AdmitMember', member: member(5) }))), null, 're-admitting an existing member still works');
  });

  test('RemoveMember: known members only', () => {
    assert.deepEqual(events(decide(cluster(), origin(0, { type: 'RemoveMember', nodeId: nodeId(2) }))), [
      { type: 'MemberRemoved', nodeId: nodeId(2), reason: 'removed' },
    ]);
    assert.equal(code(decide(cluster(), origin(0, { type: 'RemoveMember', nodeId: stranger }))), 'MEMBER_NOT_FOUND');
  });

  test('LeaveCluster: only for oneself', () => {
    assert.deepEqual(events(decide(cluster(), origin(2, { type: 'LeaveCluster', nodeId: nodeId(2) }))), [
      { type: 'MemberRemoved', nodeId: nodeId(2), reason: 'left' },
    ]);
    assert.equal(code(decide(cluster(), origin(1, { type: 'LeaveCluster', nodeId: nodeId(2) }))), 'FORBIDDEN');
  });

  test('SetNickname: 1 to 64 characters without control characters, or null', () => {
    const set = (nickname: string | null): Decision => decide(cluster(), origin(0, { type: 'SetNickname', nodeId: nodeId(1), nickname }));
    assert.deepEqual(events(set('attic')), [{ type: 'NicknameSet', nodeId: nodeId(1), nickname: 'attic' }]);
    assert.deepEqual(events(set(null)), [{ type: 'NicknameSet', nodeId: nodeId(1), nickname: null }]);
    assert.equal(code(set('x'.repeat(64))), null);
    assert.equal(code(set('x'.repeat(65))), 'INVALID_NICKNAME');
    assert.equal(code(set('')), 'INVALID_NICKNAME');
    assert.equal(code(set('tab\there')), 'INVALID_NICKNAME');
    assert.equal(code(decide(cluster(), origin(0, { type: 'SetNickname', nodeId: stranger, nickname: 'x' }))), 'MEMBER_NOT_FOUND');
  });

  test('SetHostPreference: known members only', () => {
    assert.deepEqual(events(decide(cluster(), origin(0, { type: 'SetHostPreference', nodeId: nodeId(2), preferred: true }))), [
      { type: 'HostPreferenceSet', nodeId: nodeId(2), preferred: true },
    ]);
    assert.equal(code(decide(cluster(), origin(0, { type: 'SetHostPreference', nodeId: stranger, preferred: true }))), 'MEMBER_NOT_FOUND');
  });

  test('DissolveCluster: any member', () => {
    assert.deepEqual(events(decide(cluster(), origin(2, { type: 'DissolveCluster' }))), [{ type: 'ClusterDissolved' }]);
  });
});
