import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { apply, applyRecord } from './apply.js';
import { Command } from './commands.js';
import type { Event } from './events.js';
import { defaultSettings } from './settings.js';
import { decide, type Decision } from './decide.js';
import { emptyState, MAX_MEMBERS, type ClusterState } from './state.js';
import { CLUSTER_ID, clusterLog, instanceSpec, member, nodeId, origin } from './fixtures.test-support.js';
import type { InstanceId } from '../../common/ids.js';
import { MAX_INSTANCES } from './instances.js';

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

describe('decide: instances', () => {
  const place = (id: string, nodes: number[]): Command => ({ type: 'PlaceInstance', instance: instanceSpec(id, nodes) });
  const withInstance = (): ClusterState => apply(cluster(), { type: 'InstanceCreated', instance: instanceSpec('inst-a', [0]), replaces: null }, 9);

  test('PlaceInstance creates it when every node is an active member and the id is new', () => {
    assert.deepEqual(events(decide(cluster(), origin(1, place('inst-a', [0, 2])))), [{ type: 'InstanceCreated', instance: instanceSpec('inst-a', [0, 2]), replaces: null }]);
    assert.equal(code(decide(withInstance(), origin(1, place('inst-a', [1])))), 'INSTANCE_EXISTS');
    assert.equal(code(decide(cluster(), origin(1, place('inst-b', [0, 40])))), 'NODE_UNAVAILABLE');
    const pruned = apply(cluster(), { type: 'NodeTimedOut', nodeId: nodeId(2), heartbeatAgeMs: 1, lastSeenAgeMs: 1 }, 9);
    assert.equal(code(decide(pruned, origin(1, place('inst-b', [2])))), 'NODE_UNAVAILABLE', 'a pruned node takes no new work');
    const twice = { type: 'PlaceInstance', instance: { ...instanceSpec('inst-b', [0]), placements: [...instanceSpec('x', [0]).placements, ...instanceSpec('x', [0]).placements] } } as Command;
    assert.equal(code(decide(cluster(), origin(1, twice))), 'NODE_UNAVAILABLE');
  });

  test('PlaceInstance is refused beyond MAX_INSTANCES', () => {
    let state = cluster();
    for (let i = 0; i < MAX_INSTANCES; i++) state = apply(state, { type: 'InstanceCreated', instance: instanceSpec(`inst-${i}`, [0]), replaces: null }, 10 + i);
    assert.equal(code(decide(state, origin(1, place('inst-new', [1])))), 'TOO_MANY_INSTANCES');
  });

  test('EndInstance ends it, or ends it and creates its successor in one decision', () => {
    const end: Command = { type: 'EndInstance', instanceId: 'inst-a' as InstanceId, reason: 'deleted', message: 'stopped', successor: null };
    assert.deepEqual(events(decide(withInstance(), origin(1, end))), [{ type: 'InstanceEnded', instanceId: 'inst-a', reason: 'deleted', message: 'stopped' }]);
    assert.equal(code(decide(cluster(), origin(1, end))), 'INSTANCE_NOT_FOUND');
    const replace: Command = { ...end, reason: 'replaced', successor: instanceSpec('inst-b', [1, 2]) };
    const decided = events(decide(withInstance(), origin(1, replace)));
    assert.equal(decided.length, 2);
    assert.deepEqual(decided[1], { type: 'InstanceCreated', instance: instanceSpec('inst-b', [1, 2]), replaces: 'inst-a' });
    const bad: Command = { ...replace, successor: instanceSpec('inst-b', [40]) };
    assert.equal(code(decide(withInstance(), origin(1, bad))), 'NODE_UNAVAILABLE', 'a successor on a stranger is refused and the instance stays');
  });

  test('DropReplica drops one replica of a replicated instance, never the last; AddReplica fills it back', () => {
    const replicated = apply(cluster(), { type: 'InstanceCreated', instance: instanceSpec('inst-r', [0, 1]), replaces: null }, 10);
    const drop = (n: number, instanceId = 'inst-r'): Command => ({ type: 'DropReplica', instanceId: instanceId as InstanceId, nodeId: nodeId(n), message: 'lost' });
    assert.deepEqual(events(decide(replicated, origin(1, drop(1)))), [{ type: 'ReplicaDropped', instanceId: 'inst-r', nodeId: nodeId(1), message: 'lost' }]);
    assert.equal(code(decide(replicated, origin(1, drop(2)))), 'REPLICA_REFUSED', 'no replica there');
    const one = apply(replicated, { type: 'ReplicaDropped', instanceId: 'inst-r' as InstanceId, nodeId: nodeId(1), message: 'lost' }, 11);
    assert.equal(code(decide(one, origin(1, drop(0)))), 'REPLICA_REFUSED', 'the last replica is re-placed, not dropped');
    assert.equal(code(decide(withInstance(), origin(1, drop(0, 'inst-a')))), 'REPLICA_REFUSED', 'a single instance has no replicas to drop');
    const add = (n: number): Command => ({ type: 'AddReplica', instanceId: 'inst-r' as InstanceId, placement: instanceSpec('x', [n]).placements[0]! });
    assert.deepEqual(events(decide(one, origin(1, add(2)))), [{ type: 'ReplicaAdded', instanceId: 'inst-r', placement: instanceSpec('x', [2]).placements[0] }]);
    assert.equal(code(decide(one, origin(1, add(0)))), 'REPLICA_REFUSED', 'that node holds one already');
    assert.equal(code(decide(one, origin(1, add(40)))), 'NODE_UNAVAILABLE');
    assert.equal(code(decide(replicated, origin(1, add(2)))), 'REPLICA_REFUSED', 'it has all its replicas');
  });

  test('MovePart records the engine a full part moved onto, from its own node only', () => {
    const move = (n: number, instanceId = 'inst-a'): Command => ({ type: 'MovePart', instanceId: instanceId as InstanceId, nodeId: nodeId(n), backend: 'llama_server-cpu' });
    assert.deepEqual(events(decide(withInstance(), origin(0, move(0)))), [{ type: 'PartMoved', instanceId: 'inst-a', nodeId: nodeId(0), backend: 'llama_server-cpu' }]);
    assert.equal(code(decide(withInstance(), origin(1, move(0)))), 'FORBIDDEN', 'another node cannot move it');
    assert.equal(code(decide(withInstance(), origin(1, move(1)))), 'REPLICA_REFUSED', 'no part there');
    assert.equal(code(decide(cluster(), origin(0, move(0)))), 'INSTANCE_NOT_FOUND');
    const pooled = apply(cluster(), { type: 'InstanceCreated', instance: instanceSpec('inst-p', [0, 1], 'pooled'), replaces: null }, 10);
    assert.equal(code(decide(pooled, origin(1, move(1, 'inst-p')))), 'REPLICA_REFUSED', 'a split part does not move alone');
  });

  test('SetSettings merges the fields it names into the settings the log holds', () => {
    const first = events(decide(cluster(), origin(1, { type: 'SetSettings', patch: { corsOrigins: ['https://app.example'] } })));
    assert.deepEqual(first, [{ type: 'SettingsChanged', settings: { ...defaultSettings(), corsOrigins: ['https://app.example'] } }]);
    const state = apply(cluster(), first[0] as Event, 10);
    const second = events(decide(state, origin(2, { type: 'SetSettings', patch: { defaultParallel: 2, defaultContextTokens: null } })));
    assert.deepEqual(second, [{ type: 'SettingsChanged', settings: { ...defaultSettings(), corsOrigins: ['https://app.example'], defaultParallel: 2 } }], 'the earlier change stays');
    assert.equal(code(decide(emptyState(), origin(0, { type: 'SetSettings', patch: {} }))), 'NO_CLUSTER');
  });

  test('SetSettings on the wire refuses values out of range and origins that are not origins', () => {
    for (const patch of [{ defaultParallel: 0 }, { corsOrigins: ['https://app.example/path'] }, { corsOrigins: ['ftp://x'] }, { apiKeyDigests: ['not-hex'] }, { downloadApprovalBytes: -1 }, { unknown: 1 }]) {
      assert.equal(Command.safeParse({ type: 'SetSettings', patch }).success, false, JSON.stringify(patch));
    }
    assert.equal(Command.safeParse({ type: 'SetSettings', patch: { corsOrigins: ['*', 'http://localhost:5173'] } }).success, true);
  });

  test('the tracing switch: a patch that does not name it leaves it as it is', () => {
    const on = events(decide(cluster(), origin(1, { type: 'SetSettings', patch: { tracing: true } })));
    assert.deepEqual(on, [{ type: 'SettingsChanged', settings: { ...defaultSettings(), tracing: true } }]);
    const state = apply(cluster(), on[0] as Event, 10);
    // Parsed as it arrives from another member: zod must not fill `tracing: false` into a patch that omits it.
    const parsed = Command.parse({ type: 'SetSettings', patch: { defaultParallel: 2 } });
    assert.deepEqual(events(decide(state, origin(2, parsed))), [{ type: 'SettingsChanged', settings: { ...defaultSettings(), tracing: true, defaultParallel: 2 } }]);
    assert.equal(Command.safeParse({ type: 'SetSettings', patch: { tracing: 'yes' } }).success, false);
  });
});
