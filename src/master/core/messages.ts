import { z } from 'zod';
import { CommandResult, Origin } from '../state/commands.js';
import { ClusterId, CommandId, NodeId } from '../../common/ids.js';
import { LogRecord, RecordHash, Snapshot, TermRange } from '../state/record.js';
import { ArtifactsMessage, DownloadsMessage, HealthMessage, ResourcesMessage, RunnersMessage } from '../../wire/telemetry.js';

/** Byte limits per plane, checked on the encoded message before parsing. */
export const MAX_CONTROL_MESSAGE_BYTES = 64 * 1024;
export const MAX_TELEMETRY_MESSAGE_BYTES = 4 * 1024;
export const MAX_SYNC_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Room left in a message for everything but its records when the core fills one. */
export const MESSAGE_ENVELOPE_RESERVE_BYTES = 2 * 1024;
/** Term runs carried by a status reply (enough to tell whether a log extends another). */
export const MAX_STATUS_TERM_RANGES = 64;
/** Term runs carried by a sync request; a history with more falls back to a full snapshot transfer. */
export const MAX_SYNC_REQUEST_TERM_RANGES = 1024;
export const MAX_RECORDS_PER_MESSAGE = 4096;

/** Direct-stream protocol that carries SyncMessage. */
export const SYNC_PROTOCOL = '/shoal/sync/1';
export function controlTopic(clusterId: string): string {
  return `shoal/${clusterId}/control/v1`;
}
export function telemetryTopic(clusterId: string): string {
  return `shoal/${clusterId}/telemetry/v1`;
}

const Term = z.number().int().min(0);
const Idx = z.number().int().min(0);

// ---- control plane (gossip): ordered decisions and the election ----

/** New records from the master of `term`, in idx order. */
export const EventMessage = z.strictObject({
  type: z.literal('event'),
  clusterId: ClusterId,
  term: Term,
  masterId: NodeId,
  records: z.array(LogRecord).min(1).max(MAX_RECORDS_PER_MESSAGE),
});
/** A command for the master `to`; `reproposal` when a node re-sends the origin of a record a heal discarded. */
export const CommandMessage = z.strictObject({
  type: z.literal('command'),
  clusterId: ClusterId,
  term: Term,
  to: NodeId,
  origin: Origin,
  reproposal: z.boolean(),
});
/** The master's answer to a command: whoever has `commandId` outstanding takes it. */
export const AckMessage = z.strictObject({
  type: z.literal('ack'),
  clusterId: ClusterId,
  term: Term,
  commandId: CommandId,
  result: CommandResult,
});
/**
 * "I see no master; my log ends here." Every node that precedes the sender (a more up-to-date log, or an
 * equal one and a higher rank) answers `alive`; the sender claims only if nobody does.
 */
export const ElectionMessage = z.strictObject({
  type: z.literal('election'),
  clusterId: ClusterId,
  term: Term,
  lastTerm: Term,
  lastIdx: Idx,
});
/** "I precede you and I am here": the receiver waits for a coordinator instead of claiming. */
export const AliveMessage = z.strictObject({ type: z.literal('alive'), clusterId: ClusterId, term: Term, to: NodeId });
export const CoordinatorMessage = z.strictObject({
  type: z.literal('coordinator'),
  clusterId: ClusterId,
  term: Term,
  masterId: NodeId,
  lastIdx: Idx,
  lastHash: RecordHash,
});
/** A node that claimed `term` asks everyone where their logs stand before it starts the term. */
export const StatusRequestMessage = z.strictObject({ type: z.literal('status-request'), clusterId: ClusterId, term: Term });
export const StatusMessage = z.strictObject({
  type: z.literal('status'),
  clusterId: ClusterId,
  term: Term,
  to: NodeId,
  lastTerm: Term,
  lastIdx: Idx,
  lastHash: RecordHash,
  terms: z.array(TermRange).max(MAX_STATUS_TERM_RANGES),
});
export const ControlMessage = z.discriminatedUnion('type', [
  EventMessage,
  CommandMessage,
  AckMessage,
  ElectionMessage,
  AliveMessage,
  CoordinatorMessage,
  StatusRequestMessage,
  StatusMessage,
]);
export type EventMessage = z.infer<typeof EventMessage>;
export type CommandMessage = z.infer<typeof CommandMessage>;
export type AckMessage = z.infer<typeof AckMessage>;
export type ElectionMessage = z.infer<typeof ElectionMessage>;
export type AliveMessage = z.infer<typeof AliveMessage>;
export type CoordinatorMessage = z.infer<typeof CoordinatorMessage>;
export type StatusRequestMessage = z.infer<typeof StatusRequestMessage>;
export type StatusMessage = z.infer<typeof StatusMessage>;
export type ControlMessage = z.infer<typeof ControlMessage>;

// ---- telemetry plane (gossip, last write wins per sender); the readings are in src/wire/telemetry.ts ----

/** `masterId` is the sender's view; when it names the sender, the heartbeat is also the master's claim of `term`. */
export const HeartbeatMessage = z.strictObject({
  type: z.literal('heartbeat'),
  clusterId: ClusterId,
  nodeId: NodeId,
  seq: z.number().int().min(0),
  term: Term,
  masterId: NodeId.nullable(),
  lastIdx: Idx,
  lastHash: RecordHash,
  uptimeMs: z.number().int().min(0),
});
export const TelemetryMessage = z.discriminatedUnion('type', [HeartbeatMessage, ResourcesMessage, RunnersMessage, ArtifactsMessage, DownloadsMessage, HealthMessage]);
export type HeartbeatMessage = z.infer<typeof HeartbeatMessage>;
export type TelemetryMessage = z.infer<typeof TelemetryMessage>;

// ---- sync (direct stream /shoal/sync/1) ----

/** "Here is where my log stands; send what I lack." The server works out where the two logs part. */
export const SyncRequestMessage = z.strictObject({
  type: z.literal('sync-request'),
  clusterId: ClusterId,
  requestId: z.number().int().min(1),
  term: Term,
  lastIdx: Idx,
  lastHash: RecordHash,
  /** Below this idx the requester keeps no records (its snapshot): it cannot cut back further. */
  baseIdx: Idx,
  terms: z.array(TermRange).max(MAX_SYNC_REQUEST_TERM_RANGES),
});
/**
 * `commonIdx`: the last idx the two logs share (null: could not tell). Either `records` continue from
 * commonIdx + 1, or `snapshot` replaces the requester's log. requestId 0 is the master pushing a joiner its first state.
 */
export const SyncPageMessage = z.strictObject({
  type: z.literal('sync-page'),
  clusterId: ClusterId,
  requestId: z.number().int().min(0),
  term: Term,
  masterId: NodeId.nullable(),
  commonIdx: Idx.nullable(),
  snapshot: Snapshot.nullable(),
  records: z.array(LogRecord).max(MAX_RECORDS_PER_MESSAGE),
  serverLastIdx: Idx,
  more: z.boolean(),
});
export const SyncMessage = z.discriminatedUnion('type', [SyncRequestMessage, SyncPageMessage]);
export type SyncRequestMessage = z.infer<typeof SyncRequestMessage>;
export type SyncPageMessage = z.infer<typeof SyncPageMessage>;
export type SyncMessage = z.infer<typeof SyncMessage>;

export type CoreMessage = ControlMessage | TelemetryMessage | SyncMessage;
export type Plane = 'control' | 'telemetry' | 'sync';

export const PLANE_OF_MESSAGE: Record<CoreMessage['type'], Plane> = {
  event: 'control',
  command: 'control',
  ack: 'control',
  election: 'control',
  alive: 'control',
  coordinator: 'control',
  'status-request': 'control',
  status: 'control',
  heartbeat: 'telemetry',
  resources: 'telemetry',
  runners: 'telemetry',
  artifacts: 'telemetry',
  downloads: 'telemetry',
  health: 'telemetry',
  'sync-request': 'sync',
  'sync-page': 'sync',
};

export const MAX_MESSAGE_BYTES: Record<Plane, number> = {
  control: MAX_CONTROL_MESSAGE_BYTES,
  telemetry: MAX_TELEMETRY_MESSAGE_BYTES,
  sync: MAX_SYNC_MESSAGE_BYTES,
};

export const MESSAGE_SCHEMA: Record<Plane, z.ZodType<CoreMessage>> = {
  control: ControlMessage,
  telemetry: TelemetryMessage,
  sync: SyncMessage,
};

/**
 * Size of a message as JSON. The router's encoding (msgpack) is never larger for these shapes, so a message
 * the core keeps under a limit by this measure fits on the wire too.
 */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), 'utf8');
}
