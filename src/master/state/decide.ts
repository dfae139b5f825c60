import { assertNever } from '../../common/errors.js';
import type { CommandErrorCode, Origin } from './commands.js';
import { NICKNAME_MAX_CHARS, type Event } from './events.js';
import { MAX_INSTANCES, type InstanceSpec } from './instances.js';
import { patchSettings } from './settings.js';
import { instanceOf, MAX_MEMBERS, memberOf, type ClusterState } from './state.js';

export type Decision = { events: Event[] } | { error: { code: CommandErrorCode; message: string } };

function reject(code: CommandErrorCode, message: string): Decision {
  return { error: { code, message } };
}

// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

/** Why `spec` cannot be created in `state`, or null when it can. */
function instanceProblem(state: ClusterState, spec: InstanceSpec, replacing: boolean): Decision | null {
  if (instanceOf(state, spec.instanceId) !== undefined) return reject('INSTANCE_EXISTS', `instance ${spec.instanceId} already exists`);
  if (!replacing && Object.keys(state.instances).length >= MAX_INSTANCES) {
    return reject('TOO_MANY_INSTANCES', `a cluster runs at most ${MAX_INSTANCES} instances: stop one first`);
  }
  const nodes = new Set<string>();
  for (const placement of spec.placements) {
    const member = memberOf(state, placement.nodeId);
    if (member === undefined || member.status !== 'active') {
      return reject('NODE_UNAVAILABLE', `node ${placement.nodeId} is not an active member: plan the placement again`);
    }
    if (nodes.has(placement.nodeId)) return reject('NODE_UNAVAILABLE', `node ${placement.nodeId} appears twice in one placement`);
    nodes.add(placement.nodeId);
  }
  return null;
}

/**
 * The master's judgement of one command against the current state: the events it becomes, or why not.
 * Pure; the caller logs a rejection as CommandRejected so every decided command is in the log exactly once.
 */
export function decide(state: ClusterState, origin: Origin): Decision {
  const { command, from } = origin;
  if (command.type === 'FoundCluster') {
    if (state.clusterId !== null) return reject('CLUSTER_EXISTS', 'this node is already in a cluster: leave it before founding another');
    if (command.founder.nodeId !== from) return reject('FORBIDDEN', 'a node can only found a cluster with itself as the founder');
    return { events: [{ type: 'ClusterFounded', clusterId: command.clusterId, founder: command.founder }] };
  }
  if (state.clusterId === null) return reject('NO_CLUSTER', 'there is no cluster yet: found one first');
  if (state.dissolved) return reject('CLUSTER_DISSOLVED', 'the cluster was dissolved');
  if (memberOf(state, from) === undefined) return reject('NOT_A_MEMBER', `node ${from} is not a member of this cluster`);
  switch (command.type) {
    case 'AdmitMember': {
      if (memberOf(state, command.member.nodeId) !== undefined) return { events: [{ type: 'MemberAdmitted', member: command.member }] };
      if (Object.keys(state.members).length >= MAX_MEMBERS) {
        return reject('CLUSTER_FULL', `a cluster holds at most ${MAX_MEMBERS} members: remove one first`);
      }
      return { events: [{ type: 'MemberAdmitted', member: command.member }] };
    }
    case 'RemoveMember':
      if (memberOf(state, command.nodeId) === undefined) return reject('MEMBER_NOT_FOUND', `node ${command.nodeId} is not a member`);
      return { events: [{ type: 'MemberRemoved', nodeId: command.nodeId, reason: 'removed' }] };
    case 'LeaveCluster':
      if (command.nodeId !== from) return reject('FORBIDDEN', 'a node can only leave for itself: use RemoveMember for another node');
      return { events: [{ type: 'MemberRemoved', nodeId: command.nodeId, reason: 'left' }] };
    case 'SetNickname': {
      if (memberOf(state, command.nodeId) === undefined) return reject('MEMBER_NOT_FOUND', `node ${command.nodeId} is not a member`);
      const { nickname } = command;
      if (nickname !== null && (nickname.length === 0 || nickname.length > NICKNAME_MAX_CHARS || CONTROL_CHARS.test(nickname))) {
        return reject('INVALID_NICKNAME', `a nickname is 1 to ${NICKNAME_MAX_CHARS} characters without control characters (or null to clear it)`);
      }
      return { events: [{ type: 'NicknameSet', nodeId: command.nodeId, nickname }] };
    }
    case 'SetHostPreference':
      if (memberOf(state, command.nodeId) === undefined) return reject('MEMBER_NOT_FOUND', `node ${command.nodeId} is not a member`);
      return { events: [{ type: 'HostPreferenceSet', nodeId: command.nodeId, preferred: command.preferred }] };
    case 'DissolveCluster':
      return { events: [{ type: 'ClusterDissolved' }] };
    case 'PlaceInstance':
      return instanceProblem(state, command.instance, false) ?? { events: [{ type: 'InstanceCreated', instance: command.instance, replaces: null }] };
    case 'EndInstance': {
      if (instanceOf(state, command.instanceId) === undefined) return reject('INSTANCE_NOT_FOUND', `instance ${command.instanceId} is not running (it may have ended already)`);
      const ended = { type: 'InstanceEnded' as const, instanceId: command.instanceId, reason: command.reason, message: command.message };
      if (command.successor === null) return { events: [ended] };
      const problem = instanceProblem(state, command.successor, true);
      if (problem) return problem;
      return { events: [ended, { type: 'InstanceCreated', instance: command.successor, replaces: command.instanceId }] };
    }
    case 'DropReplica': {
      const instance = instanceOf(state, command.instanceId);
      if (instance === undefined) return reject('INSTANCE_NOT_FOUND', `instance ${command.instanceId} is not running (it may have ended already)`);
      if (instance.shape !== 'replicas') return reject('REPLICA_REFUSED', `instance ${command.instanceId} is not replicated: re-place it instead`);
      if (!instance.placements.some((p) => p.nodeId === command.nodeId)) return reject('REPLICA_REFUSED', `instance ${command.instanceId} has no replica on ${command.nodeId}`);
      if (instance.placements.length <= 1) return reject('REPLICA_REFUSED', `the replica on ${command.nodeId} is the last one of ${command.instanceId}: re-place the instance instead`);
      return { events: [{ type: 'ReplicaDropped', instanceId: command.instanceId, nodeId: command.nodeId, message: command.message }] };
    }
    case 'AddReplica': {
      const instance = instanceOf(state, command.instanceId);
      if (instance === undefined) return reject('INSTANCE_NOT_FOUND', `instance ${command.instanceId} is not running (it may have ended already)`);
      if (instance.shape !== 'replicas' || command.placement.role !== 'full') return reject('REPLICA_REFUSED', `instance ${command.instanceId} is not replicated, or the part is not a full replica`);
      if (instance.placements.length >= instance.replicas) return reject('REPLICA_REFUSED', `instance ${command.instanceId} already has its ${instance.replicas} replicas`);
      const member = memberOf(state, command.placement.nodeId);
      if (member === undefined || member.status !== 'active') return reject('NODE_UNAVAILABLE', `node ${command.placement.nodeId} is not an active member: plan the replica again`);
      if (instance.placements.some((p) => p.nodeId === command.placement.nodeId)) return reject('REPLICA_REFUSED', `node ${command.placement.nodeId} already holds a replica of ${command.instanceId}`);
      return { events: [{ type: 'ReplicaAdded', instanceId: command.instanceId, placement: command.placement }] };
    }
    case 'MovePart': {
      if (command.nodeId !== from) return reject('FORBIDDEN', 'a node reports only the moves of its own parts');
      const instance = instanceOf(state, command.instanceId);
      if (instance === undefined) return reject('INSTANCE_NOT_FOUND', `instance ${command.instanceId} is not running (it may have ended already)`);
      const part = instance.placements.find((p) => p.nodeId === command.nodeId);
      if (part === undefined || part.role !== 'full') return reject('REPLICA_REFUSED', `instance ${command.instanceId} has no full part on ${command.nodeId}: only a part that serves alone moves engines`);
      return { events: [{ type: 'PartMoved', instanceId: command.instanceId, nodeId: command.nodeId, backend: command.backend }] };
    }
    case 'SetSettings':
      // Merged here, against the settings the log holds, so two members' patches to different fields both stay.
      return { events: [{ type: 'SettingsChanged', settings: patchSettings(state.settings, command.patch) }] };
    case 'ApproveDownloads':
      if (instanceOf(state, command.instanceId) === undefined) return reject('INSTANCE_NOT_FOUND', `instance ${command.instanceId} is not running (it may have ended already)`);
      // Approving one that no longer waits is a yes already given: the same event, which changes nothing.
      return { events: [{ type: 'DownloadsApproved', instanceId: command.instanceId }] };
    default:
      return assertNever(command, 'command');
  }
}
