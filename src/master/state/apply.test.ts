import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { apply, applyRecord } from './apply.js';
import { Event, type EventType } from './events.js';
import { stateHash } from './hash.js';
import { ClusterSettings, defaultSettings } from './settings.js';
import { emptyState, MAX_MEMBERS, type ClusterState } from './state.js';
import { CLUSTER_ID, clusterLog, commandId, instanceSpec, member, nodeId } from './fixtures.test-support.js';
import type { InstanceId } from '../../common/ids.js';

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

function founded(): ClusterState {
  let state = emptyState();
  for (const record of clusterLog(3).records) state = applyRecord(state, record);
  return deepFreeze(state);
}

const stranger = nodeId(40);

/** One example of every event type, about a known member where it names one. */
const EXAMPLES: Record<EventType, Event> = {
  ClusterFounded: { type: 'ClusterFounded', clusterId: CLUSTER_ID, founder: member(0) },
  TermStarted: { type: 'TermStarted', term: 3, masterId: nodeId(1) },
  MemberAdmitted: { type: 'MemberAdmitted', member: member(5) },
  MemberRemoved: { type: 'MemberRemoved', nodeId: nodeId(2), reason: 'removed' },
  NicknameSet: { type: 'NicknameSet', nodeId: nodeId(1), nickname: 'attic' },
  HostPreferenceSet: { type: 'HostPreferenceSet', nodeId: nodeId(2), preferred: true },
  NodeTimedOut: { type: 'NodeTimedOut', nodeId: nodeId(1), heartbeatAgeMs: 31_000, lastSeenAgeMs: 30_500 },
  NodeReturned: { type: 'NodeReturned', nodeId: nodeId(1) },
  ClusterDissolved: { type: 'ClusterDissolved' },
  CommandRejected: { type: 'CommandRejected', commandId: commandId(), code: 'MEMBER_NOT_FOUND', message: 'no' },
  InstanceCreated: { type: 'InstanceCreated', instance: instanceSpec('inst-a', [0, 1]), replaces: null },
  InstanceEnded: { type: 'InstanceEnded', instanceId: 'inst-a' as InstanceId, reason: 'deleted', message: 'stopped by an operator' },
  ReplicaDropped: { type: 'ReplicaDropped', instanceId: 'inst-a' as InstanceId, nodeId: nodeId(1), message: 'lost' },
  ReplicaAdded: { type: 'ReplicaAdded', instanceId: 'inst-a' as InstanceId, placement: instanceSpec('inst-x', [2]).placements[0]! },
  PartMoved: { type: 'PartMoved', instanceId: 'inst-a' as InstanceId, nodeId: nodeId(1), backend: 'llama_server-cpu' },
  SettingsChanged: { type: 'SettingsChanged', settings: { ...defaultSettings(), corsOrigins: ['https://app.example'], defaultParallel: 4 } },
  DownloadsApproved: { type: 'DownloadsApproved', instanceId: 'inst-a' as InstanceId },
};

describe('apply', () => {
  test('the examples cover every event type', () => {
    const types = Event.options.map((option) => option.shape.type.value).sort();
    assert.deepEqual(Object.keys(EXAMPLES).sort(), types);
  });

  test('ClusterFounded founds once: the founder is most senior and holds term slot 0', () => {
    const state = apply(emptyState(), EXAMPLES.ClusterFounded, 1);
    assert.equal(state.clusterId, CLUSTER_ID);
    assert.deepEqual(state.members[nodeId(0)], {
      ...member(0),
      nickname: null,
      admittedIdx: 1,
      termSlot: 0,
      hostPreferred: false,
      status: 'active',
    });
    const again = apply(state, { type: 'ClusterFounded', clusterId: 'ffffffffffffffffffffffffffffffff' as never, founder: member(9) }, 7);
    assert.equal(again, state, 'a second founding changes nothing');
  });

  test('MemberAdmitted takes the smallest free term slot and its idx as seniority', () => {
    const state = founded();
    assert.equal(state.members[nodeId(1)]!.termSlot, 1);
    assert.equal(state.members[nodeId(2)]!.termSlot, 2);
    const removed = apply(state, { type: 'MemberRemoved', nodeId: nodeId(1), reason: 'left' }, 10);
    const readmitted = apply(removed, EXAMPLES.MemberAdmitted, 11);
    assert.equal(readmitted.members[nodeId(5)]!.termSlot, 1, 'the freed slot is reused');
    assert.equal(readmitted.members[nodeId(5)]!.admittedIdx, 11);
  });

  test('MemberAdmitted of a member refreshes what it says about itself and keeps rank, nickname and status', () => {
    let state = apply(founded(), EXAMPLES.NicknameSet, 8);
    state = apply(state, EXAMPLES.NodeTimedOut, 9);
    const renamed = { ...member(1), name: 'renamed', addrs: ['/ip4/10.9.9.9/tcp/1'] };
    const after = apply(state, { type: 'MemberAdmitted', member: renamed }, 12);
    assert.deepEqual(after.members[nodeId(1)], { ...state.members[nodeId(1)]!, name: 'renamed', addrs: ['/ip4/10.9.9.9/tcp/1'] });
  });

  test('MemberAdmitted into a full roster changes nothing (decide refuses it first)', () => {
    let state = founded();
    for (let n = 3; n < MAX_MEMBERS; n++) state = apply(state, { type: 'MemberAdmitted', member: member(n) }, n + 10);
    assert.equal(Object.keys(state.members).length, MAX_MEMBERS);
    assert.equal(apply(state, { type: 'MemberAdmitted', member: member(MAX_MEMBERS + 1) }, 999), state);
  });

  test('each member event does what it says', () => {
    const state = founded();
    assert.equal(apply(state, EXAMPLES.MemberRemoved, 9).members[nodeId(2)], undefined);
    assert.equal(apply(state, EXAMPLES.NicknameSet, 9).members[nodeId(1)]!.nickname, 'attic');
    assert.equal(apply(state, { type: 'NicknameSet', nodeId: nodeId(1), nickname: null }, 9).members[nodeId(1)]!.nickname, null);
    assert.equal(apply(state, EXAMPLES.HostPreferenceSet, 9).members[nodeId(2)]!.hostPreferred, true);
    const pruned = apply(state, EXAMPLES.NodeTimedOut, 9);
    assert.equal(pruned.members[nodeId(1)]!.status, 'pruned');
    assert.equal(apply(pruned, EXAMPLES.NodeReturned, 10).members[nodeId(1)]!.status, 'active');
    assert.equal(apply(state, EXAMPLES.ClusterDissolved, 9).dissolved, true);
  });

  test('TermStarted and CommandRejected leave the state alone', () => {
    const state = founded();
    assert.equal(apply(state, EXAMPLES.TermStarted, 9), state);
    assert.equal(apply(state, EXAMPLES.CommandRejected, 9), state);
  });

  test('events naming an unknown node are no-ops, never throws', () => {
    const state = founded();
    for (const event of [
      { type: 'MemberRemoved', nodeId: stranger, reason: 'removed' },
      { type: 'NicknameSet', nodeId: stranger, nickname: 'x' },
      { type: 'HostPreferenceSet', nodeId: stranger, preferred: true },
      { type: 'NodeTimedOut', nodeId: stranger, heartbeatAgeMs: 1, lastSeenAgeMs: 1 },
      { type: 'NodeReturned', nodeId: stranger },
    ] satisfies Event[]) {
      assert.equal(apply(state, event, 20), state, event.type);
    }
    // Before any cluster exists, too.
    for (const event of Object.values(EXAMPLES)) if (event.type !== 'ClusterFounded') assert.doesNotThrow(() => apply(emptyState(), event, 1));
  });

  test('apply never mutates its input (every example on a frozen state)', () => {
    const state = founded();
    const before = stateHash(state);
    for (const [i, event] of Object.values(EXAMPLES).entries()) apply(state, event, 20 + i);
    assert.equal(stateHash(state), before);
  });

  test('replay is idempotent: applying any event twice at its idx equals applying it once', () => {
    const state = founded();
    for (const event of Object.values(EXAMPLES)) {
      const once = apply(state, event, 30);
      assert.equal(stateHash(apply(once, event, 30)), stateHash(once), event.type);
    }
  });

  test('replaying the same log gives the same state hash', () => {
    const log = clusterLog(5);
    const a = log.records.reduce(applyRecord, emptyState());
    const b = structuredClone(log.records).reduce(applyRecord, emptyState());
    assert.equal(stateHash(a), stateHash(b));
  });
});

describe('apply: instances', () => {
  test('InstanceCreated adds the instance stamped with its idx; a second one with the same id changes nothing', () => {
    const state = apply(founded(), EXAMPLES.InstanceCreated, 20);
    assert.deepEqual(state.instances['inst-a' as InstanceId], { ...instanceSpec('inst-a', [0, 1]), createdIdx: 20 });
    const again = apply(state, { type: 'InstanceCreated', instance: instanceSpec('inst-a', [2]), replaces: null }, 21);
    assert.equal(again, state);
  });

  test('InstanceCreated with `replaces` removes its predecessor in the same step', () => {
    const first = apply(founded(), EXAMPLES.InstanceCreated, 20);
    const next = apply(first, { type: 'InstanceCreated', instance: instanceSpec('inst-b', [2]), replaces: 'inst-a' as InstanceId }, 21);
    assert.deepEqual(Object.keys(next.instances), ['inst-b']);
  });

  test('ReplicaDropped removes one replica and keeps the others as they are; never the last one', () => {
    const state = apply(founded(), EXAMPLES.InstanceCreated, 20);
    const dropped = apply(state, EXAMPLES.ReplicaDropped, 21);
    const instance = dropped.instances['inst-a' as InstanceId]!;
    assert.deepEqual(instance.placements, [state.instances['inst-a' as InstanceId]!.placements[0]]);
    assert.equal(instance.createdIdx, 20, 'the same instance, not a new one');
    const last = { type: 'ReplicaDropped' as const, instanceId: 'inst-a' as InstanceId, nodeId: nodeId(0), message: 'lost' };
    assert.equal(apply(dropped, last, 22), dropped);
  });

  test('ReplicaAdded appends a replica once', () => {
    const state = apply(apply(founded(), EXAMPLES.InstanceCreated, 20), EXAMPLES.ReplicaDropped, 21);
    const added = apply(state, EXAMPLES.ReplicaAdded, 22);
    assert.deepEqual(
      added.instances['inst-a' as InstanceId]!.placements.map((p) => p.nodeId),
      [nodeId(0), nodeId(2)],
    );
    assert.equal(apply(added, EXAMPLES.ReplicaAdded, 23), added);
  });

  test("PartMoved changes the backend of that node's part only; an unknown instance or a part already there is a no-op", () => {
    const state = apply(founded(), EXAMPLES.InstanceCreated, 20);
    const moved = apply(state, EXAMPLES.PartMoved, 21);
    assert.deepEqual(
      moved.instances['inst-a' as InstanceId]!.placements.map((p) => [p.nodeId, p.backend]),
      [
        [nodeId(0), 'llama_cpp-cpu'],
        [nodeId(1), 'llama_server-cpu'],
      ],
    );
    assert.equal(moved.instances['inst-a' as InstanceId]!.createdIdx, 20, 'the same instance, serving on');
    assert.equal(apply(moved, EXAMPLES.PartMoved, 22), moved);
    assert.equal(apply(founded(), EXAMPLES.PartMoved, 21).instances['inst-a' as InstanceId], undefined);
  });

  test('InstanceEnded removes it; an unknown id is a no-op', () => {
    const state = apply(founded(), EXAMPLES.InstanceCreated, 20);
    assert.deepEqual(apply(state, EXAMPLES.InstanceEnded, 21).instances, {});
    const unknown = founded();
    assert.equal(apply(unknown, EXAMPLES.InstanceEnded, 21), unknown);
  });

  test('removing a member keeps its instances: ending them is a decision of its own', () => {
    const state = apply(founded(), EXAMPLES.InstanceCreated, 20);
    const removed = apply(state, { type: 'MemberRemoved', nodeId: nodeId(1), reason: 'removed' }, 21);
    assert.ok(removed.instances['inst-a' as InstanceId]);
  });
});

describe('apply: settings', () => {
  test('a new cluster starts from the default settings', () => {
    assert.deepEqual(founded().settings, defaultSettings());
    assert.equal(defaultSettings().downloadApprovalBytes, 4 * 2 ** 30);
  });

  test('SettingsChanged replaces the settings with the ones it carries, lists sorted and without repeats', () => {
    const settings: ClusterSettings = { ...defaultSettings(), corsOrigins: ['https://b.example', 'http://a.example:8080', 'https://b.example'], downloadApprovalBytes: 0 };
    const state = apply(founded(), { type: 'SettingsChanged', settings }, 20);
    assert.deepEqual(state.settings, { ...settings, corsOrigins: ['http://a.example:8080', 'https://b.example'] });
    assert.deepEqual(state.members, founded().members, 'nothing else changes');
  });

  test('a state with settings survives its own schema, and a snapshot state without them reads as the defaults', async () => {
    const { ClusterState: Schema } = await import('./state.js');
    const state = apply(founded(), EXAMPLES.SettingsChanged, 20);
    assert.deepEqual(Schema.parse(structuredClone(state)), state);
    const { settings: _settings, ...old } = founded();
    assert.deepEqual(Schema.parse(old).settings, defaultSettings());
  });
});
