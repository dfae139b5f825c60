import { z } from 'zod';
import { ClusterId, CommandId, NodeId, InstanceId } from '../../common/ids.js';
import { MemberInfo, REJECTION_MESSAGE_MAX_CHARS, ResultCode } from './events.js';
import { INSTANCE_TEXT_MAX_CHARS, InstanceEndReason, InstancePlacement, InstanceSpec } from './instances.js';
import { SettingsPatch } from './settings.js';

/** Longest nickname the wire carries; anything over NICKNAME_MAX_CHARS is a typed rejection, not a drop. */
export const NICKNAME_WIRE_MAX_CHARS = 256;

/** `founder` must be the submitting node itself. */
export const FoundCluster = z.strictObject({ type: z.literal('FoundCluster'), clusterId: ClusterId, founder: MemberInfo });
export const AdmitMember = z.strictObject({ type: z.literal('AdmitMember'), member: MemberInfo });
export const RemoveMember = z.strictObject({ type: z.literal('RemoveMember'), nodeId: NodeId });
export const LeaveCluster = z.strictObject({ type: z.literal('LeaveCluster'), nodeId: NodeId });
export const SetNickname = z.strictObject({
  type: z.literal('SetNickname'),
  nodeId: NodeId,
  nickname: z.string().max(NICKNAME_WIRE_MAX_CHARS).nullable(),
});
export const SetHostPreference = z.strictObject({ type: z.literal('SetHostPreference'), nodeId: NodeId, preferred: z.boolean() });
export const DissolveCluster = z.strictObject({ type: z.literal('DissolveCluster') });

export const PlaceInstance = z.strictObject({ type: z.literal('PlaceInstance'), instance: InstanceSpec });
/**
 * Ends an instance; with a successor it is a re-placement, decided as one step so the model is never
 * left without an instance by a crash between the two.
 */
export const EndInstance = z.strictObject({
  type: z.literal('EndInstance'),
  instanceId: InstanceId,
  reason: InstanceEndReason,
  message: z.string().max(INSTANCE_TEXT_MAX_CHARS),
  successor: InstanceSpec.nullable(),
});

/**
 * A replicated instance loses the replica on `nodeId` (its node was lost) while the others keep
 * serving untouched; refused for the last replica (that one is re-placed instead).
 */
export const DropReplica = z.strictObject({
  type: z.literal('DropReplica'),
  instanceId: InstanceId,
  nodeId: NodeId,
  message: z.string().max(INSTANCE_TEXT_MAX_CHARS),
});
/** A replicated instance below its replica count gains one on a node that holds none of it. */
export const AddReplica = z.strictObject({ type: z.literal('AddReplica'), instanceId: InstanceId, placement: InstancePlacement });

/**
 * A full part moved onto another engine of its own node (the in-process engine onto llama-server
 * once the node has it), reported by that node after the move: the part keeps serving throughout,
 * so this only records where it runs now. Only the node holding the part may say so.
 */
export const MovePart = z.strictObject({ type: z.literal('MovePart'), instanceId: InstanceId, nodeId: NodeId, backend: InstancePlacement.shape.backend });

/** Changes the settings it names (settings.ts); the master applies it to the settings it holds. */
export const SetSettings = z.strictObject({ type: z.literal('SetSettings'), patch: SettingsPatch });

/** An operator's yes to the downloads an instance waits for (its `awaitingApproval`); idempotent. */
export const ApproveDownloads = z.strictObject({ type: z.literal('ApproveDownloads'), instanceId: InstanceId });

export const Command = z.discriminatedUnion('type', [
  FoundCluster,
  AdmitMember,
  RemoveMember,
  LeaveCluster,
  SetNickname,
  SetHostPreference,
  DissolveCluster,
  PlaceInstance,
  EndInstance,
  DropReplica,
  AddReplica,
  MovePart,
  SetSettings,
  ApproveDownloads,
]);
export type Command = z.infer<typeof Command>;
export type CommandType = Command['type'];

/** A command as it travels to the master and as the log remembers where a record came from. */
export const Origin = z.strictObject({ commandId: CommandId, from: NodeId, command: Command });
export type Origin = z.infer<typeof Origin>;

/**
 * Codes a command can be answered with. The first group are decisions (recorded in the log as
 * CommandRejected, so they are final); the second are answers given without a decision (nothing logged;
 * the command may or may not take effect later).
 */
export const COMMAND_ERROR_CODES = [
  'NOT_A_MEMBER',
  'CLUSTER_EXISTS',
  'CLUSTER_DISSOLVED',
  'CLUSTER_FULL',
  'MEMBER_NOT_FOUND',
  'INVALID_NICKNAME',
  'FORBIDDEN',
  'INSTANCE_EXISTS',
  'INSTANCE_NOT_FOUND',
  /** A placement names a node that is not an active member. */
  'NODE_UNAVAILABLE',
  'TOO_MANY_INSTANCES',
  /** DropReplica on the only replica left, or AddReplica on an instance that has all its replicas. */
  'REPLICA_REFUSED',
  // Not decisions:
  'NO_CLUSTER',
  'TIMEOUT',
  /** This node could not persist what the command needed (its disk is full): nothing was decided here. */
  'DISK_FULL',
] as const;
export type CommandErrorCode = (typeof COMMAND_ERROR_CODES)[number];

/** `idx` on a rejection is present only when the rejection was decided and logged (CommandRejected). */
export const CommandResult = z.discriminatedUnion('ok', [
  z.strictObject({ ok: z.literal(true), idx: z.number().int().min(1) }),
  z.strictObject({
    ok: z.literal(false),
    code: ResultCode,
    message: z.string().max(REJECTION_MESSAGE_MAX_CHARS),
    idx: z.number().int().min(1).optional(),
  }),
]);
export type CommandResult = z.infer<typeof CommandResult>;
