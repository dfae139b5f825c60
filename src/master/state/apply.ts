import { assertNever } from '../../common/errors.js';
import type { Event } from './events.js';
import type { NodeId } from '../../common/ids.js';
import type { LogRecord } from './record.js';
import { defaultSettings, patchSettings } from './settings.js';
import { MAX_MEMBERS, memberOf, type ClusterState, type MemberState } from './state.js';
import { MAX_INSTANCE_PLACEMENTS } from './instances.js';

function withMember(state: ClusterState, nodeId: NodeId, update: (member: MemberState) => MemberState): ClusterState {
  const member = memberOf(state, nodeId);
  // Unknown ids are a no-op: a replayed or reordered history must never make apply throw.
  if (member === undefined) return state;
  return { ...state, members: { ...state.members, [nodeId]: update(member) } };
}

function freeTermSlot(state: ClusterState): number | null {
  const used = new Set(Object.values(state.members).map((member) => member.termSlot));
  for (let slot = 0; slot < MAX_MEMBERS; slot++) if (!used.has(slot)) return slot;
  return null;
}

/**
 * The one way replicated state changes. Pure and total: it never mutates its input and never throws for
 * any event a schema accepts. `idx` is the record's position in the log (it becomes seniority).
 */
export function apply(state: ClusterState, event: Event, idx: number): ClusterState {
  switch (event.type) {
    case 'ClusterFounded': {
      if (state.clusterId !== null) return state;
      const founder: MemberState = {
        ...event.founder,
        nickname: null,
        admittedIdx: idx,
        termSlot: 0,
        hostPreferred: false,
        status: 'active',
      };
      return { clusterId: event.clusterId, members: { [event.founder.nodeId]: founder }, dissolved: false, instances: {}, settings: defaultSettings() };
    }
    case 'MemberAdmitted': {
      const existing = memberOf(state, event.member.nodeId);
      if (existing !== undefined) {
        // Re-admission refreshes what the node says about itself; rank, nickname and status stay.
        return withMember(state, event.member.nodeId, (member) => ({ ...member, ...event.member }));
      }
      const termSlot = freeTermSlot(state);
      if (termSlot === null) return state;
      const member: MemberState = {
        ...event.member,
        nickname: null,
        admittedIdx: idx,
        termSlot,
        hostPreferred: false,
        status: 'active',
      };
      return { ...state, members: { ...state.members, [event.member.nodeId]: member } };
    }
    case 'MemberRemoved': {
      if (memberOf(state, event.nodeId) === undefined) return state;
      const members = { ...state.members };
      delete members[event.nodeId];
      // Its instances stay until the master ends or re-places them: that is a decision, made in the log.
      return { ...state, members };
    }
    case 'NicknameSet':
      return withMember(state, event.nodeId, (member) => ({ ...member, nickname: event.nickname }));
    case 'HostPreferenceSet':
      return withMember(state, event.nodeId, (member) => ({ ...member, hostPreferred: event.preferred }));
    case 'NodeTimedOut':
      return withMember(state, event.nodeId, (member) => ({ ...member, status: 'pruned' }));
    case 'NodeReturned':
      return withMember(state, event.nodeId, (member) => ({ ...member, status: 'active' }));
    case 'ClusterDissolved':
      return state.dissolved ? state : { ...state, dissolved: true };
    case 'InstanceCreated': {
      if (Object.hasOwn(state.instances, event.instance.instanceId)) return state;
      const instances = { ...state.instances };
      if (event.replaces !== null) delete instances[event.replaces];
      instances[event.instance.instanceId] = { ...event.instance, createdIdx: idx };
      return { ...state, instances };
    }
    case 'InstanceEnded': {
      if (!Object.hasOwn(state.instances, event.instanceId)) return state;
      const instances = { ...state.instances };
      delete instances[event.instanceId];
      return { ...state, instances };
    }
    case 'ReplicaDropped': {
      const instance = Object.hasOwn(state.instances, event.instanceId) ? state.instances[event.instanceId] : undefined;
      const placements = instance?.placements.filter((p) => p.nodeId !== event.nodeId) ?? [];
      // An instance never has no placement: the last replica is re-placed, not dropped (decide refuses it).
      if (instance === undefined || placements.length === 0 || placements.length === instance.placements.length) return state;
      return { ...state, instances: { ...state.instances, [event.instanceId]: { ...instance, placements } } };
    }
    case 'ReplicaAdded': {
      const instance = Object.hasOwn(state.instances, event.instanceId) ? state.instances[event.instanceId] : undefined;
      if (instance === undefined || instance.placements.some((p) => p.nodeId === event.placement.nodeId)) return state;
      if (instance.placements.length >= MAX_INSTANCE_PLACEMENTS) return state;
      return { ...state, instances: { ...state.instances, [event.instanceId]: { ...instance, placements: [...instance.placements, event.placement] } } };
    }
    case 'PartMoved': {
      const instance = Object.hasOwn(state.instances, event.instanceId) ? state.instances[event.instanceId] : undefined;
      if (instance === undefined || !instance.placements.some((p) => p.nodeId === event.nodeId && p.role === 'full' && p.backend !== event.backend)) return state;
      const placements = instance.placements.map((p) => (p.nodeId === event.nodeId ? { ...p, backend: event.backend } : p));
      return { ...state, instances: { ...state.instances, [event.instanceId]: { ...instance, placements } } };
    }
    case 'SettingsChanged':
      // Normalized again so that a history whatever its writer hashes the same.
      return { ...state, settings: patchSettings(event.settings, {}) };
    case 'DownloadsApproved': {
      const instance = Object.hasOwn(state.instances, event.instanceId) ? state.instances[event.instanceId] : undefined;
      if (instance?.awaitingApproval === undefined) return state;
      const { awaitingApproval: _approved, ...approved } = instance;
      return { ...state, instances: { ...state.instances, [event.instanceId]: approved } };
    }
    case 'TermStarted':
    case 'CommandRejected':
      // Facts about the log, not the cluster: the core reads them from records.
      return state;
    default:
      return assertNever(event, 'event');
  }
}

export function applyRecord(state: ClusterState, record: LogRecord): ClusterState {
  return apply(state, record.event, record.idx);
}
