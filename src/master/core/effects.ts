import type { CommandResult } from '../state/commands.js';
import type { CommandId, NodeId } from '../../common/ids.js';
import type { LogRecord, Snapshot } from '../state/record.js';
import type { ControlMessage, SyncMessage, TelemetryMessage } from './messages.js';

/**
 * What the core asks its shell to do. The shell runs a call's effects in array order, and the durable ones
 * (persistTerm, append, truncate, snapshot, installSnapshot, reset) must be on disk before any later
 * effect runs, including effects of later calls. That ordering is the whole durability contract: the core
 * acts (publishes, acks) as if each durable effect had completed.
 */
export type Effect =
  /** Durably record the current term (it only grows, except through reset). */
  | { type: 'persistTerm'; term: number }
  /** Durably append (fsync) records that continue the log. */
  | { type: 'append'; records: LogRecord[] }
  /** Durably drop every record after `afterIdx` (never below the current snapshot). */
  | { type: 'truncate'; afterIdx: number }
  /** A checkpoint: durably store it; records up to snapshot.idx may then be dropped, later ones stay. */
  | { type: 'snapshot'; snapshot: Snapshot }
  /** Durably replace the whole log with this snapshot (no records remain). */
  | { type: 'installSnapshot'; snapshot: Snapshot }
  /** The node left the cluster: durably drop snapshot and records and set the term to 0. */
  | { type: 'reset' }
  | { type: 'publish'; plane: 'control'; message: ControlMessage }
  | { type: 'publish'; plane: 'telemetry'; message: TelemetryMessage }
  /** Deliver over a direct stream (SYNC_PROTOCOL) to one node; lost or failed sends need no report. */
  | { type: 'send'; to: NodeId; message: SyncMessage }
  /** The outcome of a command this node's client submitted. Exactly one per submitted commandId. */
  | { type: 'ack'; commandId: CommandId; result: CommandResult }
  /** Something view() shows changed. */
  | { type: 'stateChanged' };

export type EffectType = Effect['type'];
