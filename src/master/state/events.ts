import { z } from 'zod';
import { InstanceId, ClusterId, CommandId, Fingerprint, NodeId } from '../../common/ids.js';
import { INSTANCE_TEXT_MAX_CHARS, InstanceEndReason, InstancePlacement, InstanceSpec } from './instances.js';
import { ClusterSettings } from './settings.js';

export const NODE_NAME_MAX_CHARS = 64;
export const MEMBER_ADDRS_MAX = 16;
export const MULTIADDR_MAX_CHARS = 256;
/** Longest nickname an operator may set (decide enforces it with a typed rejection). */
export const NICKNAME_MAX_CHARS = 64;
export const REJECTION_MESSAGE_MAX_CHARS = 500;

// eslint-disable-next-line no-control-regex
const NO_CONTROL_CHARS = /^[^\u0000-\u001f\u007f]*$/;

export const NodeName = z.string().min(1).max(NODE_NAME_MAX_CHARS).regex(NO_CONTROL_CHARS, 'a node name has no control characters');

/** What the roster knows about a node when it is admitted. */
export const MemberInfo = z.strictObject({
  nodeId: NodeId,
  name: NodeName,
  fingerprint: Fingerprint,
  addrs: z.array(z.string().min(1).max(MULTIADDR_MAX_CHARS)).max(MEMBER_ADDRS_MAX),
});
export type MemberInfo = z.infer<typeof MemberInfo>;

/** Stable, upper snake case; known values are listed in commands.ts (`COMMAND_ERROR_CODES`). */
export const ResultCode = z.string().regex(/^[A-Z][A-Z0-9_]{0,39}$/);

export const ClusterFounded = z.strictObject({ type: z.literal('ClusterFounded'), clusterId: ClusterId, founder: MemberInfo });
export const TermStarted = z.strictObject({ type: z.literal('TermStarted'), term: z.number().int().min(1), masterId: NodeId });
export const MemberAdmitted = z.strictObject({ type: z.literal('MemberAdmitted'), member: MemberInfo });
export const MemberRemoved = z.strictObject({
  type: z.literal('MemberRemoved'),
  nodeId: NodeId,
  reason: z.enum(['removed', 'left']),
});
export const NicknameSet = z.strictObject({
  type: z.literal('NicknameSet'),
  nodeId: NodeId,
  nickname: z.string().min(1).max(NICKNAME_MAX_CHARS).nullable(),
});
export const HostPreferenceSet = z.strictObject({ type: z.literal('HostPreferenceSet'), nodeId: NodeId, preferred: z.boolean() });
/** The ages are the master's own receipt-time measurements that decided the pruning. */
export const NodeTimedOut = z.strictObject({
  type: z.literal('NodeTimedOut'),
  nodeId: NodeId,
  heartbeatAgeMs: z.number().int().min(0),
  lastSeenAgeMs: z.number().int().min(0),
});
export const NodeReturned = z.strictObject({ type: z.literal('NodeReturned'), nodeId: NodeId });
export const ClusterDissolved = z.strictObject({ type: z.literal('ClusterDissolved') });
/** A decided command that changed nothing: in the log so its outcome is recorded exactly once. */
export const CommandRejected = z.strictObject({
  type: z.literal('CommandRejected'),
  commandId: CommandId,
  code: ResultCode,
  message: z.string().max(REJECTION_MESSAGE_MAX_CHARS),
});

/** `replaces`: the instance this one succeeds (re-placement), ended by the record just before it. */
export const InstanceCreated = z.strictObject({ type: z.literal('InstanceCreated'), instance: InstanceSpec, replaces: InstanceId.nullable() });
export const InstanceEnded = z.strictObject({
  type: z.literal('InstanceEnded'),
  instanceId: InstanceId,
  reason: InstanceEndReason,
  message: z.string().max(INSTANCE_TEXT_MAX_CHARS),
});

/** One replica of a replicated instance left it (its node was lost); the others are untouched. */
export const ReplicaDropped = z.strictObject({
  type: z.literal('ReplicaDropped'),
  instanceId: InstanceId,
  nodeId: NodeId,
  message: z.string().max(INSTANCE_TEXT_MAX_CHARS),
});
/** A replicated instance below its replica count gained one. */
export const ReplicaAdded = z.strictObject({ type: z.literal('ReplicaAdded'), instanceId: InstanceId, placement: InstancePlacement });

/** A full part of an instance now runs on another engine of its node (MovePart). */
export const PartMoved = z.strictObject({ type: z.literal('PartMoved'), instanceId: InstanceId, nodeId: NodeId, backend: InstancePlacement.shape.backend });

/** The whole settings after a change, so applying it needs nothing but the event. */
export const SettingsChanged = z.strictObject({ type: z.literal('SettingsChanged'), settings: ClusterSettings });

/** The instance's awaited downloads were approved: its parts may start (and download) now. */
export const DownloadsApproved = z.strictObject({ type: z.literal('DownloadsApproved'), instanceId: InstanceId });

export const Event = z.discriminatedUnion('type', [
  ClusterFounded,
  TermStarted,
  MemberAdmitted,
  MemberRemoved,
  NicknameSet,
  HostPreferenceSet,
  NodeTimedOut,
  NodeReturned,
  ClusterDissolved,
  CommandRejected,
  InstanceCreated,
  InstanceEnded,
  ReplicaDropped,
  ReplicaAdded,
  PartMoved,
  SettingsChanged,
  DownloadsApproved,
]);
export type Event = z.infer<typeof Event>;
export type EventType = Event['type'];
