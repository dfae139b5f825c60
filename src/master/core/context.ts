import assert from 'node:assert/strict';
import type { Position, ReconcilePage, Role } from '../../election/bully.js';
import type { CommandResult, Origin } from '../state/commands.js';
import type { MemberInfo } from '../state/events.js';
import type { CommandId, NodeId } from '../../common/ids.js';
import type { CommandEntry, LogRecord, Snapshot } from '../state/record.js';
import { memberOf, type MemberState } from '../state/state.js';
import type { CoreConfig } from './config.js';
import type { Effect } from './effects.js';
import type { ReplicatedLog } from './log.js';
import type { ControlMessage, HeartbeatMessage, SyncPageMessage, SyncRequestMessage } from './messages.js';

export interface CoreCounters {
  /** Messages refused because they came from an older term. */
  fenced: number;
  /** Records or snapshots that failed their hash check. */
  invalid: number;
  /** Times this node found its log conflicting with its master's and cut it back. */
  truncations: number;
  /** Origins re-sent to a master after a heal discarded their records. */
  reproposed: number;
  /** Terms this node claimed. */
  claims: number;
  /** Times this node, as master, met a higher-term master with a shorter log and claimed above it. */
  outbids: number;
  /** Times this process woke from a stop long enough to have looked dead to itself. */
  stalls: number;
}

export interface Peer {
  connected: boolean;
  lastHeardMs: number;
  lastHeartbeatMs: number | null;
  heartbeat: HeartbeatMessage | null;
}

export interface SyncInFlight {
  requestId: number;
  to: NodeId;
  sentMs: number;
  purpose: 'follow' | 'reconcile';
}

export interface Outbound {
  origin: Origin;
  sentMs: number | null;
  sentTo: NodeId | null;
}

export interface Pending extends Outbound {
  submittedMs: number;
}

/**
 * The calls that cross from one part of a core to another (each named after the method it reaches);
 * NodeCore wires them once at construction, so the parts know the context and not each other.
 */
export interface CoreLinks {
  // NodeCore
  /** Terms only grow, and a higher term always wins. */
  observeTerm(term: number, from: NodeId, masterClaim: boolean): void;
  follow(masterId: NodeId): void;
  leaveCluster(): void;
  // Sync
  afterAppend(records: readonly LogRecord[]): void;
  maybeRequestSync(): void;
  fitSnapshot(snapshot: Snapshot): Snapshot;
  // MasterDuties
  found(origin: Origin): void;
  decideOrigins(items: readonly { origin: Origin; relayer: NodeId }[]): void;
  publishHeartbeat(): void;
  // Commands
  flushOutbound(): void;
  // the election: a page fetched while reconciling, or a source that gave out
  reconcilePage(from: NodeId, page: ReconcilePage): void;
  nextReconcileSource(failed: NodeId): void;
}

/** The effects of one call, in order; `stateChanged` goes last, once. */
export class Outbox {
  readonly list: Effect[] = [];
  changed = false;
  push(effect: Effect): void {
    this.list.push(effect);
  }
  done(): Effect[] {
    if (this.changed) this.list.push({ type: 'stateChanged' });
    return this.list;
  }
}

export function resultOfRecord(record: LogRecord): CommandResult {
  if (record.event.type === 'CommandRejected') return { ok: false, code: record.event.code, message: record.event.message, idx: record.idx };
  return { ok: true, idx: record.idx };
}

export function resultOfEntry(entry: Pick<CommandEntry, 'idx' | 'rejection'>): CommandResult {
  if (entry.rejection !== null) return { ok: false, code: entry.rejection.code, message: entry.rejection.message, idx: entry.idx };
  return { ok: true, idx: entry.idx };
}

/**
 * What every part of a core reads and writes: the log and the node's place in the cluster (role, term,
 * master), the injected clock and randomness, the peers it hears, the commands in flight and the outbox of
 * the current call. Pure like the rest: effects go to the outbox, never out.
 */
export class CoreContext {
  readonly startedMs: number;
  /** Durable: the highest term this node has claimed or followed. */
  term: number;
  /** Volatile: the highest term seen in any message; a claim goes above it. */
  maxSeenTerm: number;
  role: Role = 'standalone';
  masterId: NodeId | null = null;
  lastHeardMasterMs: number;
  readonly peers = new Map<NodeId, Peer>();
  sync: SyncInFlight | null = null;
  needSync = false;
  /** Commands this node's clients submitted that have no answer yet. */
  readonly pending = new Map<CommandId, Pending>();
  /** Origins of records a heal will discard, re-sent to the master; the cut waits until each is decided. */
  readonly reproposals = new Map<CommandId, Outbound>();
  /** Re-proposals the current master (of the current term) has decided. */
  readonly reproposalDecided = new Set<CommandId>();
  departing: { idx: number; untilMs: number } | null = null;
  readonly counters: CoreCounters = { fenced: 0, invalid: 0, truncations: 0, reproposed: 0, claims: 0, outbids: 0, stalls: 0 };
  fx: Outbox | null = null;
  links!: CoreLinks;

  constructor(
    readonly self: MemberInfo,
    readonly clock: { nowMs(): number },
    readonly random: () => number,
    readonly cfg: CoreConfig,
    public log: ReplicatedLog,
    term: number,
  ) {
    this.startedMs = clock.nowMs();
    this.lastHeardMasterMs = this.startedMs;
    this.term = term;
    this.maxSeenTerm = term;
  }

  emit(effect: Effect): void {
    assert.ok(this.fx !== null, 'effects outside a call');
    this.fx.push(effect);
  }

  changed(): void {
    if (this.fx !== null) this.fx.changed = true;
  }

  now(): number {
    return this.clock.nowMs();
  }

  // Methods change the role under the caller's feet; these reads defeat TypeScript's narrowing.
  isStandalone(): boolean {
    return this.role === 'standalone';
  }
  isFollower(): boolean {
    return this.role === 'follower';
  }

  get clusterId() {
    const id = this.log.state.clusterId;
    assert.ok(id !== null, 'no cluster');
    return id;
  }

  member(nodeId: NodeId): MemberState | undefined {
    return memberOf(this.log.state, nodeId);
  }

  isMember(nodeId: NodeId): boolean {
    return !this.log.state.dissolved && this.member(nodeId) !== undefined;
  }

  peer(nodeId: NodeId): Peer {
    let peer = this.peers.get(nodeId);
    if (peer === undefined) {
      peer = { connected: false, lastHeardMs: this.startedMs, lastHeartbeatMs: null, heartbeat: null };
      this.peers.set(nodeId, peer);
    }
    return peer;
  }

  /** Whether a bully round should expect an answer from it. Over-including only costs one answer timeout. */
  isLive(nodeId: NodeId): boolean {
    const peer = this.peers.get(nodeId);
    if (peer === undefined) return false;
    return peer.connected || this.now() - peer.lastHeardMs < this.cfg.suspectAfterMs;
  }

  liveOthers(): NodeId[] {
    return Object.keys(this.log.state.members)
      .map((id) => id as NodeId)
      .filter((id) => id !== this.self.nodeId && this.isLive(id));
  }

  position(): Position {
    return { lastTerm: this.log.lastTerm, lastIdx: this.log.lastIdx };
  }

  publish(message: ControlMessage): void {
    this.emit({ type: 'publish', plane: 'control', message });
  }

  send(to: NodeId, message: SyncRequestMessage | SyncPageMessage): void {
    this.emit({ type: 'send', to, message });
  }

  ack(commandId: CommandId, result: CommandResult): void {
    this.emit({ type: 'ack', commandId, result });
  }

  persistTerm(term: number): void {
    assert.ok(term > this.term, `term ${term} does not advance ${this.term}`);
    this.emit({ type: 'persistTerm', term });
    this.term = term;
    if (term > this.maxSeenTerm) this.maxSeenTerm = term;
    this.changed();
  }
}
