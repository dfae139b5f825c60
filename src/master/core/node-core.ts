import assert from 'node:assert/strict';
import { nextTerm } from '../../election/election.js';
import { outranks } from '../../election/rank.js';
import type { Command, CommandResult, Origin } from '../state/commands.js';
import { decide } from '../state/decide.js';
import type { Event, MemberInfo } from '../state/events.js';
import { stateHash } from '../state/hash.js';
import { commandIdFrom, type CommandId, type NodeId } from '../../common/ids.js';
import type { CommandEntry, LogRecord, Snapshot } from '../state/record.js';
import { memberOf, type ClusterState, type MemberState } from '../state/state.js';
import { DEFAULT_CORE_CONFIG, type CoreConfig } from './config.js';
import type { Effect } from './effects.js';
import { ReplicatedLog } from './log.js';
import {
  jsonBytes,
  MAX_CONTROL_MESSAGE_BYTES,
  MAX_STATUS_TERM_RANGES,
  MAX_SYNC_MESSAGE_BYTES,
  MAX_SYNC_REQUEST_TERM_RANGES,
  MESSAGE_ENVELOPE_RESERVE_BYTES,
  type AckMessage,
  type CommandMessage,
  type ControlMessage,
  type CoordinatorMessage,
  type CoreMessage,
  type ElectionMessage,
  type EventMessage,
  type HeartbeatMessage,
  type StatusMessage,
  type SyncPageMessage,
  type SyncRequestMessage,
} from './messages.js';
import { commonPrefix, tailTerms } from './term-ranges.js';

export type Role = 'standalone' | 'follower' | 'candidate' | 'master';

/** What the shell found on disk at start. */
export interface PersistedLog {
  term: number;
  snapshot: Snapshot | null;
  records: LogRecord[];
}

export interface CoreOptions {
  self: MemberInfo;
  /** Monotonic milliseconds of this process (never a wall clock, never another node's). */
  clock: { nowMs(): number };
  /** Uniform in [0, 1): command ids. Seeded in simulations. */
  random: () => number;
  config?: Partial<CoreConfig>;
  persisted: PersistedLog;
}

export interface HealthReason {
  text: string;
  remediation: string;
}

export interface NodeHealth {
  level: 'ok' | 'suspect' | 'pruned';
  reasons: HealthReason[];
  /** Since this node last received a heartbeat from it; null if none since this node started. */
  heartbeatAgeMs: number | null;
  /** Since this node last received anything from it (or since it started listening). */
  lastSeenAgeMs: number;
  connected: boolean;
}

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
  /** Times this process woke from a stop long enough to have looked dead to itself. */
  stalls: number;
}

export interface CoreView {
  role: Role;
  term: number;
  masterId: NodeId | null;
  state: ClusterState;
  stateHash: string;
  lastIdx: number;
  lastHash: string;
  /** Records up to here are in the last checkpoint; the shell may drop them. */
  compactableIdx: number;
  /** Per member other than this node; this node is always ok. */
  health: Record<NodeId, NodeHealth>;
  /** Catching up or waiting for re-proposals before it can follow its master's log. */
  syncing: boolean;
  pendingCommands: number;
  counters: CoreCounters;
}

interface Peer {
  connected: boolean;
  lastHeardMs: number;
  lastHeartbeatMs: number | null;
  heartbeat: HeartbeatMessage | null;
}

type ElectionPhase =
  | { phase: 'awaitAlive'; sinceMs: number }
  | { phase: 'awaitCoordinator'; sinceMs: number }
  | {
      phase: 'reconcile';
      term: number;
      sinceMs: number;
      replies: Map<NodeId, StatusMessage>;
      fetchStarted: boolean;
      tried: Set<NodeId>;
    };

interface Position {
  lastTerm: number;
  lastIdx: number;
}

interface SyncInFlight {
  requestId: number;
  to: NodeId;
  sentMs: number;
  purpose: 'follow' | 'reconcile';
}

interface Outbound {
  origin: Origin;
  sentMs: number | null;
  sentTo: NodeId | null;
}

interface Pending extends Outbound {
  submittedMs: number;
}

class Effects {
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

function resultOfRecord(record: LogRecord): CommandResult {
  if (record.event.type === 'CommandRejected') return { ok: false, code: record.event.code, message: record.event.message, idx: record.idx };
  return { ok: true, idx: record.idx };
}

function resultOfEntry(entry: Pick<CommandEntry, 'idx' | 'rejection'>): CommandResult {
  if (entry.rejection !== null) return { ok: false, code: entry.rejection.code, message: entry.rejection.message, idx: entry.idx };
  return { ok: true, idx: entry.idx };
}

/**
 * One node's whole control plane as a pure state machine: replicated log, master duties, bully election,
 * catch-up, liveness. No I/O: time and randomness come in, everything the node must do goes out as effects.
 * docs/CONSISTENCY.md describes the guarantees; the comments here say why each rule exists.
 */
export class NodeCore {
  readonly self: MemberInfo;
  private readonly clock: { nowMs(): number };
  private readonly random: () => number;
  private readonly cfg: CoreConfig;

  private log: ReplicatedLog;
  /** Durable: the highest term this node has claimed or followed. */
  private term: number;
  /** Volatile: the highest term seen in any message; a claim goes above it. */
  private maxSeenTerm: number;
  private role: Role;
  private masterId: NodeId | null = null;
  private lastHeardMasterMs: number;
  private election: ElectionPhase | null = null;
  private readonly peers = new Map<NodeId, Peer>();
  private sync: SyncInFlight | null = null;
  private needSync = false;
  private nextRequestId = 1;
  /** Commands this node's clients submitted that have no answer yet. */
  private readonly pending = new Map<CommandId, Pending>();
  /** Origins of records a heal will discard, re-sent to the master; the cut waits until each is decided. */
  private readonly reproposals = new Map<CommandId, Outbound>();
  /** Re-proposals the current master (of the current term) has decided. */
  private readonly reproposalDecided = new Set<CommandId>();
  private readonly joiners = new Map<NodeId, { untilMs: number; nextMs: number }>();
  private departing: { idx: number; untilMs: number } | null = null;
  private heartbeatSeq = 0;
  private lastHeartbeatSentMs = Number.NEGATIVE_INFINITY;
  private readonly startedMs: number;
  private lastElectionMs = Number.NEGATIVE_INFINITY;
  private fx: Effects | null = null;
  private startupEffects: Effect[] = [];
  private hashCache: { state: ClusterState; hash: string } | null = null;
  /** When the last tick ran; a long gap before the next input means this process was stopped. */
  private lastTickMs: number | null = null;
  private electionHoldUntilMs = Number.NEGATIVE_INFINITY;
  private readonly counters: CoreCounters = { fenced: 0, invalid: 0, truncations: 0, reproposed: 0, claims: 0, stalls: 0 };

  constructor(options: CoreOptions) {
    this.self = options.self;
    this.clock = options.clock;
    this.random = options.random;
    this.cfg = { ...DEFAULT_CORE_CONFIG, ...options.config };
    this.startedMs = this.clock.nowMs();
    this.lastHeardMasterMs = this.startedMs;
    this.log = new ReplicatedLog(options.persisted.snapshot, options.persisted.records);
    this.term = options.persisted.term;
    if (this.log.lastTerm > this.term) {
      // A record's term is always persisted before the record; repair a shell that lost that order.
      this.term = this.log.lastTerm;
      this.startupEffects.push({ type: 'persistTerm', term: this.term });
    }
    this.maxSeenTerm = this.term;
    if (this.log.lastIdx === 0) {
      this.role = 'standalone';
    } else if (this.isMember(this.self.nodeId)) {
      this.role = 'follower';
    } else {
      // Removed or dissolved before the reset reached the disk: finish leaving.
      this.role = 'standalone';
      this.log = new ReplicatedLog(null, []);
      this.term = 0;
      this.maxSeenTerm = 0;
      this.startupEffects.push({ type: 'reset' });
    }
  }

  // ------------------------------------------------------------------ public API

  receive(from: NodeId, message: CoreMessage): Effect[] {
    return this.run(() => this.dispatch(from, message));
  }

  /** Call every ~100 ms of clock time. */
  tick(): Effect[] {
    return this.run(() => this.onTick());
  }

  /** A local client's command; its answer arrives later (or in these effects) as an `ack` effect. */
  submit(command: Command): { commandId: CommandId; effects: Effect[] } {
    const commandId = commandIdFrom(this.random);
    const effects = this.run(() => this.onSubmit({ commandId, from: this.self.nodeId, command }));
    return { commandId, effects };
  }

  /** The transport connected to `nodeId`. */
  peerUp(nodeId: NodeId): Effect[] {
    return this.run(() => {
      this.peer(nodeId).connected = true;
      // A node that just (re)connected learns who leads without waiting for the next heartbeat.
      if (this.role === 'master' && this.now() - this.lastHeartbeatSentMs > this.cfg.heartbeatIntervalMs / 10) this.publishHeartbeat();
    });
  }

  /** The transport lost its connection to `nodeId`. */
  peerDown(nodeId: NodeId): Effect[] {
    return this.run(() => {
      this.peer(nodeId).connected = false;
      // A closed connection is the fastest failure signal there is; the bully round still asks before claiming.
      if (this.role === 'follower' && nodeId === this.masterId) this.startElection();
    });
  }

  /** Records up to this idx are covered by the last checkpoint; the shell may drop them. */
  compactable(): number {
    return this.log.baseIdx;
  }

  view(): CoreView {
    const state = this.log.state;
    if (this.hashCache === null || this.hashCache.state !== state) this.hashCache = { state, hash: stateHash(state) };
    const health: Record<NodeId, NodeHealth> = {};
    if (this.role !== 'standalone') {
      for (const member of Object.values(state.members)) {
        if (member.nodeId === this.self.nodeId) continue;
        health[member.nodeId] = this.healthOf(member);
      }
    }
    return {
      role: this.role,
      term: this.term,
      masterId: this.masterId,
      state,
      stateHash: this.hashCache.hash,
      lastIdx: this.log.lastIdx,
      lastHash: this.log.lastHash,
      compactableIdx: this.log.baseIdx,
      health,
      syncing: this.sync !== null || this.reproposals.size > 0 || this.needSync,
      pendingCommands: this.pending.size,
      counters: { ...this.counters },
    };
  }

  /** The cheap part of view(), for callers that poll. */
  status(): { role: Role; term: number; masterId: NodeId | null; lastIdx: number; lastHash: string } {
    return { role: this.role, term: this.term, masterId: this.masterId, lastIdx: this.log.lastIdx, lastHash: this.log.lastHash };
  }

  /** The records this node holds after its checkpoint (tests and diagnostics). */
  records(): readonly LogRecord[] {
    return this.log.records;
  }

  // ------------------------------------------------------------------ plumbing

  private run(body: () => void): Effect[] {
    assert.equal(this.fx, null, 'NodeCore is not re-entrant');
    const fx = new Effects();
    this.fx = fx;
    try {
      this.noticeStall();
      if (this.startupEffects.length > 0) {
        for (const effect of this.startupEffects) fx.push(effect);
        this.startupEffects = [];
      }
      body();
    } finally {
      this.fx = null;
    }
    return fx.done();
  }

  private emit(effect: Effect): void {
    assert.ok(this.fx !== null, 'effects outside a call');
    this.fx.push(effect);
  }

  private changed(): void {
    if (this.fx !== null) this.fx.changed = true;
  }

  private now(): number {
    return this.clock.nowMs();
  }

  // Methods below change the role under the caller's feet; these reads defeat TypeScript's narrowing.
  private isStandalone(): boolean {
    return this.role === 'standalone';
  }
  private isFollower(): boolean {
    return this.role === 'follower';
  }

  private get clusterId() {
    const id = this.log.state.clusterId;
    assert.ok(id !== null, 'no cluster');
    return id;
  }

  private member(nodeId: NodeId): MemberState | undefined {
    return memberOf(this.log.state, nodeId);
  }

  private isMember(nodeId: NodeId): boolean {
    return !this.log.state.dissolved && this.member(nodeId) !== undefined;
  }

  private peer(nodeId: NodeId): Peer {
    let peer = this.peers.get(nodeId);
    if (peer === undefined) {
      peer = { connected: false, lastHeardMs: this.startedMs, lastHeartbeatMs: null, heartbeat: null };
      this.peers.set(nodeId, peer);
    }
    return peer;
  }

  /** Whether a bully round should expect an answer from it. Over-including only costs one answer timeout. */
  private isLive(nodeId: NodeId): boolean {
    const peer = this.peers.get(nodeId);
    if (peer === undefined) return false;
    return peer.connected || this.now() - peer.lastHeardMs < this.cfg.suspectAfterMs;
  }

  private publish(message: ControlMessage): void {
    this.emit({ type: 'publish', plane: 'control', message });
  }

  private send(to: NodeId, message: SyncRequestMessage | SyncPageMessage): void {
    this.emit({ type: 'send', to, message });
  }

  private ack(commandId: CommandId, result: CommandResult): void {
    this.emit({ type: 'ack', commandId, result });
  }

  private persistTerm(term: number): void {
    assert.ok(term > this.term, `term ${term} does not advance ${this.term}`);
    this.emit({ type: 'persistTerm', term });
    this.term = term;
    if (term > this.maxSeenTerm) this.maxSeenTerm = term;
    this.changed();
  }

  // ------------------------------------------------------------------ inbound

  private dispatch(from: NodeId, message: CoreMessage): void {
    if (from === this.self.nodeId) return;
    if (this.role === 'standalone') {
      if (message.type === 'sync-page') this.maybeJoin(from, message);
      return;
    }
    if (message.clusterId !== this.log.state.clusterId) return;
    this.heard(from, message.type === 'heartbeat');
    if (this.isStandalone()) return;
    switch (message.type) {
      case 'heartbeat':
        return this.onHeartbeat(from, message);
      case 'resources':
      case 'runners':
      case 'artifacts':
        // Readings for placement and routing (the shell keeps them); to the core they only prove liveness.
        return;
      case 'event':
        return this.onEvent(from, message);
      case 'command':
        return this.onCommand(from, message);
      case 'ack':
        return this.onAck(from, message);
      case 'election':
        return this.onElection(from, message);
      case 'alive':
        this.observeTerm(message.term, from, false);
        if (message.to === this.self.nodeId && this.election?.phase === 'awaitAlive') {
          this.election = { phase: 'awaitCoordinator', sinceMs: this.now() };
        }
        return;
      case 'coordinator':
        return this.onCoordinator(from, message);
      case 'status-request':
        this.observeTerm(message.term, from, false);
        this.publish({
          type: 'status',
          clusterId: this.clusterId,
          term: this.term,
          to: from,
          lastTerm: this.log.lastTerm,
          lastIdx: this.log.lastIdx,
          lastHash: this.log.lastHash,
          terms: tailTerms(this.log.terms, MAX_STATUS_TERM_RANGES),
        });
        return;
      case 'status':
        this.observeTerm(message.term, from, false);
        if (this.election?.phase === 'reconcile' && message.to === this.self.nodeId && message.term === this.election.term) {
          this.election.replies.set(from, message);
          this.advanceReconcile();
        }
        return;
      case 'sync-request':
        return this.serveSync(from, message);
      case 'sync-page':
        return this.onSyncPage(from, message);
    }
  }

  /** Receiver-side liveness: our own clock, stamped on anything from the node. */
  private heard(from: NodeId, heartbeat: boolean): void {
    const peer = this.peer(from);
    const now = this.now();
    peer.lastHeardMs = now;
    if (heartbeat) peer.lastHeartbeatMs = now;
    if (this.role === 'master' && this.departing === null && this.member(from)?.status === 'pruned') {
      this.appendSystem([{ type: 'NodeReturned', nodeId: from }]);
    }
  }

  /**
   * Terms only grow, and a higher term always wins: the node follows it (its claimer if the message is a
   * master's claim, else nobody until the claimer shows up). Rank is honoured afterwards, once logs agree,
   * by the takeover rule; deciding by rank here, on states that may differ, could have two nodes outbid
   * each other forever.
   */
  private observeTerm(term: number, from: NodeId, masterClaim: boolean): void {
    if (term > this.maxSeenTerm) this.maxSeenTerm = term;
    if (term <= this.term || this.departing !== null) return;
    this.persistTerm(term);
    this.role = 'follower';
    this.masterId = null;
    this.election = null;
    this.sync = null;
    this.lastHeardMasterMs = this.now();
    this.reproposalDecided.clear();
    if (masterClaim) this.follow(from);
  }

  /**
   * Runs before every input: if this process was stopped (no tick for stallThresholdMs), every peer and
   * the master went unheard because of us, not them. Their clocks of silence are moved forward by the
   * gap, and elections wait one master timeout, so a node waking from SIGSTOP or sleep follows the
   * cluster again instead of leading it with a stale log.
   */
  private noticeStall(): void {
    if (this.lastTickMs === null) return;
    const now = this.now();
    const gap = now - this.lastTickMs;
    if (gap < this.cfg.stallThresholdMs) return;
    this.lastTickMs = now;
    for (const peer of this.peers.values()) {
      peer.lastHeardMs = Math.min(now, peer.lastHeardMs + gap);
      if (peer.lastHeartbeatMs !== null) peer.lastHeartbeatMs = Math.min(now, peer.lastHeartbeatMs + gap);
    }
    this.lastHeardMasterMs = Math.min(now, this.lastHeardMasterMs + gap);
    this.electionHoldUntilMs = now + this.cfg.masterTimeoutMs;
    this.counters.stalls++;
  }

  /** `from` proved it is the master of our current term (heartbeat, coordinator or event). */
  private onMasterSignal(from: NodeId, lastIdx: number, lastHash: string): void {
    if (this.role === 'master' || this.role === 'standalone') return;
    if (this.masterId !== from || this.role !== 'follower') {
      if (this.election?.phase === 'reconcile') return;
      this.follow(from);
    }
    this.lastHeardMasterMs = this.now();
    const mine = this.log.hashAt(lastIdx);
    if (lastIdx > this.log.lastIdx || (mine !== undefined && mine !== lastHash)) this.needSync = true;
    this.maybeRequestSync();
    if (lastIdx <= this.log.lastIdx && mine === lastHash) this.maybeTakeover(from);
  }

  private follow(masterId: NodeId): void {
    this.role = 'follower';
    this.masterId = masterId;
    this.election = null;
    this.lastHeardMasterMs = this.now();
    this.changed();
    // Whatever was sent to someone else goes to the new master now.
    for (const item of this.pending.values()) item.sentMs = null;
    for (const item of this.reproposals.values()) item.sentMs = null;
    this.flushOutbound();
    this.needSync = true;
    this.maybeRequestSync();
  }

  private onHeartbeat(from: NodeId, message: HeartbeatMessage): void {
    if (message.nodeId !== from) return;
    this.peer(from).heartbeat = message;
    const claim = message.masterId === from;
    this.observeTerm(message.term, from, claim);
    if (claim && message.term === this.term) this.onMasterSignal(from, message.lastIdx, message.lastHash);
  }

  private onCoordinator(from: NodeId, message: CoordinatorMessage): void {
    const claim = message.masterId === from;
    this.observeTerm(message.term, from, claim);
    if (claim && message.term === this.term) this.onMasterSignal(from, message.lastIdx, message.lastHash);
  }

  private onEvent(from: NodeId, message: EventMessage): void {
    this.observeTerm(message.term, from, message.masterId === from);
    if (message.term < this.term) {
      this.counters.fenced++;
      return;
    }
    if (message.masterId !== from || message.term !== this.term) return;
    if (this.role === 'master') return;
    if (this.masterId !== from || this.role !== 'follower') {
      if (this.election?.phase === 'reconcile') return;
      this.follow(from);
    }
    this.lastHeardMasterMs = this.now();
    // While re-proposals are outstanding the log is about to be cut; new records wait for the sync after.
    if (this.reproposals.size > 0) {
      this.needSync = true;
      return;
    }
    this.acceptRecords(message.records);
    this.maybeRequestSync();
  }

  /** Live records from our master: strictly in order; a gap or a mismatch asks for a sync instead. */
  private acceptRecords(records: readonly LogRecord[]): void {
    const fresh: LogRecord[] = [];
    for (const record of records) {
      if (record.idx <= this.log.lastIdx) {
        const mine = this.log.hashAt(record.idx);
        if (mine !== undefined && mine !== record.hash) {
          this.needSync = true;
          break;
        }
        continue;
      }
      if (record.idx > this.log.lastIdx + 1) {
        this.needSync = true;
        break;
      }
      const { taken, error } = this.log.appendChecked([record]);
      if (error !== null) {
        // Our last record is not the master's: the sync works out where the logs part.
        this.needSync = true;
        break;
      }
      fresh.push(...taken);
    }
    if (fresh.length > 0) {
      this.emit({ type: 'append', records: fresh });
      this.afterAppend(fresh);
    }
  }

  /** Reactions to records entering the log (on every role). */
  private afterAppend(records: readonly LogRecord[]): void {
    this.changed();
    let leaving = false;
    for (const record of records) {
      if (record.origin !== null) {
        const pending = this.pending.get(record.origin.commandId);
        if (pending !== undefined) {
          this.pending.delete(record.origin.commandId);
          this.ack(record.origin.commandId, resultOfRecord(record));
        }
      }
      const event = record.event;
      if (event.type === 'MemberAdmitted') {
        const peer = this.peer(event.member.nodeId);
        // A new member gets a full prune window from its admission, whatever this node's uptime.
        peer.lastHeardMs = Math.max(peer.lastHeardMs, this.now());
      }
      if ((event.type === 'MemberRemoved' && event.nodeId === this.self.nodeId) || event.type === 'ClusterDissolved') leaving = true;
    }
    if (leaving) this.leaveCluster();
    else this.maybeCheckpoint();
  }

  private onCommand(from: NodeId, message: CommandMessage): void {
    this.observeTerm(message.term, from, false);
    if (message.to !== this.self.nodeId || this.role !== 'master' || this.departing !== null) return;
    this.decideOrigins([{ origin: message.origin, relayer: from }]);
  }

  private onAck(from: NodeId, message: AckMessage): void {
    this.observeTerm(message.term, from, false);
    const pending = this.pending.get(message.commandId);
    if (pending !== undefined) {
      this.pending.delete(message.commandId);
      this.ack(message.commandId, message.result);
    }
    // Only the current master's word moves custody of a re-proposed command: an old ack from some other
    // (possibly since-cut) log must not let this node drop the last copy.
    if (this.reproposals.has(message.commandId) && this.role === 'follower' && from === this.masterId && message.term === this.term) {
      this.reproposals.delete(message.commandId);
      this.reproposalDecided.add(message.commandId);
      if (this.reproposals.size === 0) {
        this.needSync = true;
        this.maybeRequestSync();
      }
    }
  }

  private onElection(from: NodeId, message: ElectionMessage): void {
    this.observeTerm(message.term, from, false);
    if (!this.precedes(this.self.nodeId, this.position(), from, message)) return;
    this.publish({ type: 'alive', clusterId: this.clusterId, term: this.term, to: from });
    if (this.role === 'master') {
      this.publishCoordinator();
      this.publishHeartbeat();
    } else if (this.role === 'follower' && this.masterId !== null && this.now() - this.lastHeardMasterMs < this.cfg.masterTimeoutMs) {
      // Our master is alive; the asker will hear it too (gossip reaches everyone we reach).
    } else if (this.election === null) {
      this.startElection();
    }
  }

  // ------------------------------------------------------------------ sync

  private maybeRequestSync(): void {
    if (!this.needSync || this.sync !== null || this.role !== 'follower' || this.masterId === null) return;
    if (this.reproposals.size > 0) return;
    this.needSync = false;
    this.sendSyncRequest(this.masterId, 'follow');
  }

  private sendSyncRequest(to: NodeId, purpose: SyncInFlight['purpose']): void {
    const requestId = this.nextRequestId++;
    this.send(to, {
      type: 'sync-request',
      clusterId: this.clusterId,
      requestId,
      term: this.term,
      lastIdx: this.log.lastIdx,
      lastHash: this.log.lastHash,
      baseIdx: this.log.baseIdx,
      terms: tailTerms(this.log.terms, MAX_SYNC_REQUEST_TERM_RANGES),
    });
    this.sync = { requestId, to, sentMs: this.now(), purpose };
  }

  /** Any member's log serves any member: followers catching up and new masters reconciling alike. */
  private serveSync(from: NodeId, request: SyncRequestMessage): void {
    this.observeTerm(request.term, from, false);
    if (!this.isMember(from) || this.log.lastIdx === 0) return;
    let common = commonPrefix({ terms: request.terms, lastIdx: request.lastIdx }, this.log.shape());
    if (common !== null && common === request.lastIdx) {
      const mine = this.log.hashAt(common);
      // Term runs agree but hashes do not: only a term-slot collision does that. Start the requester over.
      if (mine !== undefined && mine !== request.lastHash) common = null;
    }
    const useSnapshot =
      common === null ||
      common < this.log.baseIdx ||
      common < request.baseIdx ||
      this.log.lastIdx - common > this.cfg.syncSnapshotLagRecords;
    let snapshot: Snapshot | null = null;
    let records: LogRecord[] = [];
    let more = false;
    if (useSnapshot) {
      snapshot = this.fitSnapshot(this.log.transfer());
    } else {
      ({ records, more } = this.log.recordsAfter(common!, this.cfg.syncPageRecords, MAX_SYNC_MESSAGE_BYTES - MESSAGE_ENVELOPE_RESERVE_BYTES));
    }
    this.send(from, {
      type: 'sync-page',
      clusterId: this.clusterId,
      requestId: request.requestId,
      term: this.term,
      masterId: this.role === 'master' ? this.self.nodeId : this.masterId,
      commonIdx: common,
      snapshot,
      records,
      serverLastIdx: this.log.lastIdx,
      more,
    });
  }

  /**
   * Keeps a transfer snapshot under the sync limit: first the oldest remembered commands lose their origins
   * (they stay recognisable as decided), then the oldest are forgotten.
   */
  private fitSnapshot(snapshot: Snapshot): Snapshot {
    const limit = MAX_SYNC_MESSAGE_BYTES - MESSAGE_ENVELOPE_RESERVE_BYTES;
    let size = jsonBytes(snapshot);
    if (size <= limit) return snapshot;
    const commands = [...snapshot.commands];
    for (let i = 0; i < commands.length && size > limit; i++) {
      const entry = commands[i]!;
      if (entry.origin === undefined) continue;
      size -= jsonBytes(entry.origin) + 10;
      commands[i] = { commandId: entry.commandId, idx: entry.idx, rejection: entry.rejection };
    }
    while (commands.length > 0 && size > limit) size -= jsonBytes(commands.shift()) + 1;
    return { ...snapshot, commands };
  }

  private onSyncPage(from: NodeId, page: SyncPageMessage): void {
    this.observeTerm(page.term, from, page.masterId === from);
    const inFlight = this.sync;
    if (inFlight === null || page.requestId !== inFlight.requestId || from !== inFlight.to) return;
    this.sync = null;
    if (page.snapshot !== null && stateHash(page.snapshot.state) !== page.snapshot.stateHash) {
      this.counters.invalid++;
      this.needSync = true;
      if (inFlight.purpose === 'reconcile') this.nextReconcileSource(from);
      return;
    }
    if (inFlight.purpose === 'reconcile') this.reconcilePage(from, page);
    else this.followPage(from, page);
  }

  /**
   * Catch-up from our master. Where the logs part, our records after the common point are discarded, but
   * only once the master has decided every command they came from: until then this node holds the only
   * copy of those commands (possibly acknowledged ones), so it keeps them and re-proposes.
   */
  private followPage(from: NodeId, page: SyncPageMessage): void {
    if (this.role !== 'follower' || from !== this.masterId || page.term !== this.term) return;
    // Records of the current term come from the current master, which never cuts its own log: they agree.
    const common = this.log.lastTerm === this.term ? this.log.lastIdx : Math.min(page.commonIdx ?? 0, this.log.lastIdx);
    if (common < this.log.lastIdx) {
      const decidedThere = new Set<CommandId>();
      for (const record of page.records) if (record.origin !== null) decidedThere.add(record.origin.commandId);
      for (const entry of page.snapshot?.commands ?? []) decidedThere.add(entry.commandId);
      const undecided = this.log
        .originsAfter(common)
        .filter((origin) => !this.reproposalDecided.has(origin.commandId) && !decidedThere.has(origin.commandId));
      if (undecided.length > 0) {
        for (const origin of undecided) {
          if (!this.reproposals.has(origin.commandId)) {
            this.reproposals.set(origin.commandId, { origin, sentMs: null, sentTo: null });
            this.counters.reproposed++;
          }
        }
        this.flushOutbound();
        this.changed();
        return;
      }
      if (page.snapshot === null) {
        if (common < this.log.baseIdx) {
          // Our checkpoint is past the fork; the next request (carrying baseIdx) gets a snapshot.
          this.needSync = true;
          this.maybeRequestSync();
          return;
        }
        this.log.truncateAfter(common);
        this.emit({ type: 'truncate', afterIdx: common });
        this.counters.truncations++;
        this.changed();
      }
    }
    if (page.snapshot !== null && (common < this.log.lastIdx || page.snapshot.idx > this.log.lastIdx)) {
      if (common < this.log.lastIdx) this.counters.truncations++;
      this.installSnapshot(page.snapshot);
      if (this.isStandalone()) return;
    }
    this.reproposalDecided.clear();
    this.acceptRecords(page.records);
    if (this.isStandalone()) return;
    if (page.more || this.log.lastIdx < page.serverLastIdx) this.needSync = true;
    this.maybeRequestSync();
  }

  private installSnapshot(snapshot: Snapshot): void {
    this.log.install(snapshot);
    this.emit({ type: 'installSnapshot', snapshot });
    this.changed();
    for (const [commandId] of this.pending) {
      const entry = this.log.command(commandId);
      if (entry !== undefined) {
        this.pending.delete(commandId);
        this.ack(commandId, resultOfEntry(entry));
      }
    }
    for (const member of Object.values(snapshot.state.members)) {
      const peer = this.peer(member.nodeId);
      peer.lastHeardMs = Math.max(peer.lastHeardMs, this.now());
    }
    if (!this.isMember(this.self.nodeId)) this.leaveCluster();
  }

  /** A standalone node takes the first snapshot that names it a member (the shell only lets its approved cluster reach it). */
  private maybeJoin(from: NodeId, page: SyncPageMessage): void {
    const snapshot = page.snapshot;
    if (snapshot === null || page.masterId === null || page.term < 1) return;
    if (snapshot.state.clusterId !== page.clusterId || snapshot.state.dissolved) return;
    if (memberOf(snapshot.state, this.self.nodeId) === undefined) return;
    if (stateHash(snapshot.state) !== snapshot.stateHash) {
      this.counters.invalid++;
      return;
    }
    if (page.term > this.term) this.persistTerm(page.term);
    this.role = 'follower';
    this.installSnapshot(snapshot);
    if (this.role !== 'follower') return;
    this.lastHeartbeatSentMs = Number.NEGATIVE_INFINITY;
    this.follow(page.masterId === from ? from : page.masterId);
    this.publishHeartbeat();
  }

  // ------------------------------------------------------------------ election

  private position(): Position {
    return { lastTerm: this.log.lastTerm, lastIdx: this.log.lastIdx };
  }

  /**
   * The election order: the more up-to-date log first (later last term, then longer), rank among equals.
   * Equal positions mean identical logs (one record names its whole history), hence identical states and
   * the same view of rank on both sides: the order is total and every node computes it alike, which a
   * bare rank order over states that may differ after a partition is not (nodes could each defer to
   * another in a cycle). It also keeps a node back from a crash with a stale log from discarding the
   * newer history of everyone else. Rank is restored by the takeover rule once logs are equal.
   */
  private precedes(a: NodeId, aPos: Position, b: NodeId, bPos: Position): boolean {
    if (aPos.lastTerm !== bPos.lastTerm) return aPos.lastTerm > bPos.lastTerm;
    if (aPos.lastIdx !== bPos.lastIdx) return aPos.lastIdx > bPos.lastIdx;
    const ma = this.member(a);
    const mb = this.member(b);
    return ma !== undefined && mb !== undefined && outranks(ma, mb);
  }

  /** Bully over the election order: ask; claim only if nobody who precedes us answers. */
  private startElection(): void {
    if (this.role === 'standalone' || this.role === 'master' || this.departing !== null) return;
    // Just woken from a stall: the master gets a fair chance to be heard before anyone replaces it.
    if (this.now() < this.electionHoldUntilMs) return;
    const me = this.member(this.self.nodeId);
    if (me === undefined || this.log.state.dissolved) return;
    this.lastElectionMs = this.now();
    this.masterId = null;
    this.changed();
    if (this.liveOthers().length === 0) {
      this.claim();
      return;
    }
    // Everyone hears it (gossip); each node decides itself whether it precedes us, on exact positions.
    this.role = 'candidate';
    this.election = { phase: 'awaitAlive', sinceMs: this.now() };
    this.publish({ type: 'election', clusterId: this.clusterId, term: this.term, ...this.position() });
  }

  /** Take a new term (durably, before anything of it is said), then reconcile before starting it. */
  private claim(): void {
    const me = this.member(this.self.nodeId);
    if (me === undefined) return;
    const term = nextTerm(Math.max(this.maxSeenTerm, this.term), me.termSlot);
    this.persistTerm(term);
    this.counters.claims++;
    this.role = 'candidate';
    this.masterId = null;
    this.sync = null;
    this.needSync = false;
    // Our log is about to be the master's: nothing of it will be cut, nothing needs re-proposing.
    this.reproposals.clear();
    this.reproposalDecided.clear();
    this.election = { phase: 'reconcile', term, sinceMs: this.now(), replies: new Map(), fetchStarted: false, tried: new Set() };
    this.publish({ type: 'status-request', clusterId: this.clusterId, term });
    this.advanceReconcile();
  }

  private liveOthers(): NodeId[] {
    return Object.keys(this.log.state.members)
      .map((id) => id as NodeId)
      .filter((id) => id !== this.self.nodeId && this.isLive(id));
  }

  private advanceReconcile(): void {
    const election = this.election;
    if (election?.phase !== 'reconcile' || election.fetchStarted) return;
    const everyoneAnswered = this.liveOthers().every((id) => election.replies.has(id));
    if (everyoneAnswered || this.now() - election.sinceMs >= this.cfg.reconcileWindowMs) {
      election.fetchStarted = true;
      this.nextReconcileSource(null);
    }
  }

  /**
   * Fetch from the most advanced log that extends ours, so records the old master replicated to someone
   * survive the change. Logs that fork from ours are left alone: their owners re-propose after the heal.
   */
  private nextReconcileSource(failed: NodeId | null): void {
    const election = this.election;
    if (election?.phase !== 'reconcile') return;
    if (failed !== null) election.tried.add(failed);
    const mine = this.log.shape();
    const candidates = [...election.replies.entries()]
      .filter(([id, reply]) => !election.tried.has(id) && reply.lastIdx > this.log.lastIdx)
      .filter(([, reply]) => {
        const common = commonPrefix(mine, { terms: reply.terms, lastIdx: reply.lastIdx });
        return common === null || common === this.log.lastIdx;
      })
      .sort((a, b) => b[1].lastIdx - a[1].lastIdx);
    const best = candidates[0];
    if (best === undefined) {
      this.finishReconcile();
      return;
    }
    election.tried.add(best[0]);
    this.sendSyncRequest(best[0], 'reconcile');
  }

  private reconcilePage(from: NodeId, page: SyncPageMessage): void {
    const election = this.election;
    if (election?.phase !== 'reconcile' || this.term !== election.term) return;
    if (page.commonIdx === null || page.commonIdx < this.log.lastIdx) {
      this.nextReconcileSource(from);
      return;
    }
    if (page.snapshot !== null && page.snapshot.idx > this.log.lastIdx) {
      this.installSnapshot(page.snapshot);
      if (this.role === 'standalone') return;
    }
    this.acceptRecords(page.records);
    if (this.role === 'standalone' || this.election !== election) return;
    if (page.more) this.sendSyncRequest(from, 'reconcile');
    else this.nextReconcileSource(from);
  }

  private finishReconcile(): void {
    const election = this.election;
    if (election?.phase !== 'reconcile') return;
    if (this.member(this.self.nodeId) === undefined) return;
    // Someone who answered precedes us even after we fetched what we could: let it lead.
    for (const [id, reply] of election.replies) {
      if (this.precedes(id, reply, this.self.nodeId, this.position())) {
        this.election = null;
        this.role = 'follower';
        this.masterId = null;
        this.lastHeardMasterMs = this.now();
        this.startElection();
        return;
      }
    }
    this.becomeMaster();
  }

  private becomeMaster(): void {
    this.role = 'master';
    this.masterId = this.self.nodeId;
    this.election = null;
    this.sync = null;
    this.needSync = false;
    this.reproposals.clear();
    this.reproposalDecided.clear();
    this.joiners.clear();
    this.changed();
    const record = this.log.appendNew(this.term, { type: 'TermStarted', term: this.term, masterId: this.self.nodeId }, null);
    this.emit({ type: 'append', records: [record] });
    this.publishRecords([record]);
    this.publishCoordinator();
    this.publishHeartbeat();
    this.afterAppend([record]);
    if (this.role !== 'master') return;
    const mine = [...this.pending.values()].map((item) => ({ origin: item.origin, relayer: this.self.nodeId }));
    if (mine.length > 0) this.decideOrigins(mine);
  }

  /** A follower in step with its master that outranks it takes over (the bully rule, applied on equal logs). */
  private maybeTakeover(masterId: NodeId): void {
    if (this.role !== 'follower' || this.sync !== null || this.reproposals.size > 0) return;
    const me = this.member(this.self.nodeId);
    const master = this.member(masterId);
    if (me === undefined || master === undefined || !outranks(me, master)) return;
    if (this.now() - this.lastElectionMs < this.cfg.takeoverBackoffMs) return;
    this.startElection();
  }

  // ------------------------------------------------------------------ master duties

  private onSubmit(origin: Origin): void {
    if (this.role === 'standalone') {
      if (origin.command.type === 'FoundCluster') this.found(origin);
      else this.ack(origin.commandId, { ok: false, code: 'NO_CLUSTER', message: 'this node is not in a cluster: found one or join one first' });
      return;
    }
    this.pending.set(origin.commandId, { origin, submittedMs: this.now(), sentMs: null, sentTo: null });
    if (this.role === 'master' && this.departing === null) this.decideOrigins([{ origin, relayer: this.self.nodeId }]);
    else this.flushOutbound();
  }

  private found(origin: Origin): void {
    const decision = decide(this.log.state, origin);
    if ('error' in decision) {
      this.ack(origin.commandId, { ok: false, code: decision.error.code, message: decision.error.message });
      return;
    }
    const term = nextTerm(this.term, 0);
    this.persistTerm(term);
    this.role = 'master';
    this.masterId = this.self.nodeId;
    const records = [this.log.appendNew(term, decision.events[0]!, origin)];
    for (const event of decision.events.slice(1)) records.push(this.log.appendNew(term, event, null));
    records.push(this.log.appendNew(term, { type: 'TermStarted', term, masterId: this.self.nodeId }, null));
    this.emit({ type: 'append', records });
    this.changed();
    this.ack(origin.commandId, resultOfRecord(records[0]!));
    this.lastHeartbeatSentMs = Number.NEGATIVE_INFINITY;
  }

  /**
   * Decide, append (durable), publish, acknowledge: in that order, so nothing is announced or acknowledged
   * that a crash could take back. A command already decided is answered from memory, never decided twice.
   */
  private decideOrigins(items: readonly { origin: Origin; relayer: NodeId }[]): void {
    const appended: LogRecord[] = [];
    const answers: { commandId: CommandId; result: CommandResult; relayer: NodeId }[] = [];
    for (const { origin, relayer } of items) {
      const known = this.log.command(origin.commandId);
      if (known !== undefined) {
        answers.push({ commandId: origin.commandId, result: resultOfEntry(known), relayer });
        continue;
      }
      const before = this.log.state;
      const decision = decide(before, origin);
      const events: Event[] =
        'events' in decision
          ? decision.events
          : [{ type: 'CommandRejected', commandId: origin.commandId, code: decision.error.code, message: decision.error.message }];
      const first = this.log.appendNew(this.term, events[0]!, origin);
      appended.push(first);
      for (const event of events.slice(1)) appended.push(this.log.appendNew(this.term, event, null));
      answers.push({ commandId: origin.commandId, result: resultOfRecord(first), relayer });
      let stop = false;
      for (const event of events) {
        if (event.type === 'MemberAdmitted' && memberOf(before, event.member.nodeId) === undefined && event.member.nodeId !== this.self.nodeId) {
          this.peer(event.member.nodeId).heartbeat = null;
          this.joiners.set(event.member.nodeId, { untilMs: this.now() + this.cfg.joinPushTimeoutMs, nextMs: this.now() });
        }
        if ((event.type === 'MemberRemoved' && event.nodeId === this.self.nodeId) || event.type === 'ClusterDissolved') stop = true;
      }
      // After removing itself (or dissolving) this node may not decide anything else: the rest retry elsewhere.
      if (stop) break;
    }
    if (appended.length > 0) {
      this.emit({ type: 'append', records: appended });
      this.publishRecords(appended);
    }
    for (const answer of answers) {
      if (answer.relayer !== this.self.nodeId) {
        this.publish({ type: 'ack', clusterId: this.clusterId, term: this.term, commandId: answer.commandId, result: answer.result });
      } else if (!appended.some((record) => record.origin?.commandId === answer.commandId) && this.pending.delete(answer.commandId)) {
        this.ack(answer.commandId, answer.result);
      }
    }
    if (appended.length > 0) this.afterAppend(appended);
    this.pushJoiners();
  }

  /** The master's own events (no command behind them). */
  private appendSystem(events: readonly Event[]): void {
    const records = events.map((event) => this.log.appendNew(this.term, event, null));
    this.emit({ type: 'append', records });
    this.publishRecords(records);
    this.afterAppend(records);
  }

  private publishRecords(records: readonly LogRecord[]): void {
    const limit = MAX_CONTROL_MESSAGE_BYTES - MESSAGE_ENVELOPE_RESERVE_BYTES;
    let batch: LogRecord[] = [];
    let bytes = 0;
    const flush = (): void => {
      if (batch.length === 0) return;
      this.publish({ type: 'event', clusterId: this.clusterId, term: this.term, masterId: this.self.nodeId, records: batch });
      batch = [];
      bytes = 0;
    };
    for (const record of records) {
      const size = jsonBytes(record);
      if (batch.length > 0 && bytes + size > limit) flush();
      batch.push(record);
      bytes += size;
    }
    flush();
  }

  private publishCoordinator(): void {
    this.publish({
      type: 'coordinator',
      clusterId: this.clusterId,
      term: this.term,
      masterId: this.self.nodeId,
      lastIdx: this.log.lastIdx,
      lastHash: this.log.lastHash,
    });
  }

  private publishHeartbeat(): void {
    const now = this.now();
    this.lastHeartbeatSentMs = now;
    this.emit({
      type: 'publish',
      plane: 'telemetry',
      message: {
        type: 'heartbeat',
        clusterId: this.clusterId,
        nodeId: this.self.nodeId,
        seq: this.heartbeatSeq++,
        term: this.term,
        masterId: this.role === 'master' ? this.self.nodeId : this.masterId,
        lastIdx: this.log.lastIdx,
        lastHash: this.log.lastHash,
        uptimeMs: Math.max(0, Math.round(now - this.startedMs)),
      },
    });
  }

  private pruneSilentMembers(): void {
    const now = this.now();
    const events: Event[] = [];
    for (const member of Object.values(this.log.state.members)) {
      if (member.nodeId === this.self.nodeId || member.status !== 'active') continue;
      const peer = this.peer(member.nodeId);
      const lastSeenAgeMs = now - peer.lastHeardMs;
      if (lastSeenAgeMs < this.cfg.pruneAfterMs) continue;
      const heartbeatAgeMs = now - (peer.lastHeartbeatMs ?? Math.min(this.startedMs, peer.lastHeardMs));
      events.push({
        type: 'NodeTimedOut',
        nodeId: member.nodeId,
        heartbeatAgeMs: Math.max(0, Math.round(heartbeatAgeMs)),
        lastSeenAgeMs: Math.max(0, Math.round(lastSeenAgeMs)),
      });
    }
    if (events.length > 0) this.appendSystem(events);
  }

  private pushJoiners(): void {
    if (this.role !== 'master' || this.joiners.size === 0) return;
    const now = this.now();
    let snapshot: Snapshot | null = null;
    for (const [nodeId, joiner] of this.joiners) {
      if (!this.isMember(nodeId) || now >= joiner.untilMs || this.peer(nodeId).heartbeat !== null) {
        this.joiners.delete(nodeId);
        continue;
      }
      if (now < joiner.nextMs) continue;
      joiner.nextMs = now + this.cfg.joinPushIntervalMs;
      snapshot ??= this.fitSnapshot(this.log.transfer());
      this.send(nodeId, {
        type: 'sync-page',
        clusterId: this.clusterId,
        requestId: 0,
        term: this.term,
        masterId: this.self.nodeId,
        commonIdx: null,
        snapshot,
        records: [],
        serverLastIdx: this.log.lastIdx,
        more: false,
      });
    }
  }

  // ------------------------------------------------------------------ leaving

  private leaveCluster(): void {
    if (this.role === 'master') {
      // Stay long enough for the others to get the record that says so; then go.
      this.departing ??= { idx: this.log.lastIdx, untilMs: this.now() + this.cfg.departGraceMs };
      return;
    }
    this.resetToStandalone();
  }

  private resetToStandalone(): void {
    this.emit({ type: 'reset' });
    for (const [commandId] of this.pending) {
      this.ack(commandId, { ok: false, code: 'NOT_A_MEMBER', message: 'this node left the cluster before the command was decided' });
    }
    this.pending.clear();
    this.reproposals.clear();
    this.reproposalDecided.clear();
    this.joiners.clear();
    this.log = new ReplicatedLog(null, []);
    this.term = 0;
    this.maxSeenTerm = 0;
    this.role = 'standalone';
    this.masterId = null;
    this.election = null;
    this.sync = null;
    this.needSync = false;
    this.departing = null;
    this.changed();
  }

  private departDone(): boolean {
    const departing = this.departing!;
    if (this.now() >= departing.untilMs) return true;
    return Object.values(this.log.state.members).every((member) => {
      if (member.nodeId === this.self.nodeId || !this.isLive(member.nodeId)) return true;
      const heartbeat = this.peer(member.nodeId).heartbeat;
      return heartbeat !== null && heartbeat.lastIdx >= departing.idx;
    });
  }

  // ------------------------------------------------------------------ time

  private onTick(): void {
    this.lastTickMs = this.now();
    if (this.role === 'standalone') return;
    const now = this.now();
    if (this.departing !== null) {
      if (this.departDone()) {
        this.resetToStandalone();
        return;
      }
      if (now - this.lastHeartbeatSentMs >= this.cfg.heartbeatIntervalMs) this.publishHeartbeat();
      return;
    }
    if (now - this.lastHeartbeatSentMs >= this.cfg.heartbeatIntervalMs) this.publishHeartbeat();
    const election = this.election;
    switch (this.role) {
      case 'follower':
        if (now - this.lastHeardMasterMs >= this.cfg.masterTimeoutMs) this.startElection();
        break;
      case 'candidate':
        if (election?.phase === 'awaitAlive' && now - election.sinceMs >= this.cfg.electionAnswerTimeoutMs) this.claim();
        else if (election?.phase === 'awaitCoordinator' && now - election.sinceMs >= this.cfg.coordinatorTimeoutMs) {
          this.election = null;
          this.role = 'follower';
          this.startElection();
        } else if (election?.phase === 'reconcile') {
          if (now - election.sinceMs >= this.cfg.reconcileTimeoutMs) this.finishReconcile();
          else this.advanceReconcile();
        } else if (election === null) {
          this.role = 'follower';
          this.changed();
        }
        break;
      case 'master':
        this.pruneSilentMembers();
        this.pushJoiners();
        break;
    }
    if (this.isStandalone()) return;
    if (this.sync !== null && now - this.sync.sentMs >= this.cfg.syncRequestTimeoutMs) {
      const timedOut = this.sync;
      this.sync = null;
      if (timedOut.purpose === 'reconcile') this.nextReconcileSource(timedOut.to);
      else this.needSync = true;
    }
    this.maybeRequestSync();
    for (const [commandId, item] of this.pending) {
      if (now - item.submittedMs >= this.cfg.commandTimeoutMs) {
        this.pending.delete(commandId);
        this.ack(commandId, {
          ok: false,
          code: 'TIMEOUT',
          message: `no master decided the command within ${this.cfg.commandTimeoutMs} ms; it may still take effect`,
        });
      }
    }
    this.flushOutbound();
    if (this.reproposals.size === 0) this.maybeCheckpoint();
  }

  /** Sends (or re-sends) commands and re-proposals to the master we follow. */
  private flushOutbound(): void {
    if (this.role !== 'follower' || this.masterId === null) return;
    const now = this.now();
    const to = this.masterId;
    const sendAll = (items: Map<CommandId, Outbound>, reproposal: boolean): void => {
      for (const item of items.values()) {
        if (item.sentMs !== null && item.sentTo === to && now - item.sentMs < this.cfg.commandRetryMs) continue;
        item.sentMs = now;
        item.sentTo = to;
        this.publish({ type: 'command', clusterId: this.clusterId, term: this.term, to, origin: item.origin, reproposal });
      }
    };
    sendAll(this.pending, false);
    sendAll(this.reproposals, true);
  }

  private maybeCheckpoint(): void {
    if (this.reproposals.size > 0) return;
    const { snapshotEveryRecords, retainRecords } = this.cfg;
    if (this.log.lastIdx - this.log.baseIdx < snapshotEveryRecords + retainRecords) return;
    const snapshot = this.log.checkpoint(this.log.lastIdx - retainRecords);
    this.emit({ type: 'snapshot', snapshot });
  }

  // ------------------------------------------------------------------ health

  private healthOf(member: MemberState): NodeHealth {
    const now = this.now();
    const peer = this.peer(member.nodeId);
    const lastSeenAgeMs = Math.max(0, Math.round(now - peer.lastHeardMs));
    const heartbeatAgeMs = peer.lastHeartbeatMs === null ? null : Math.max(0, Math.round(now - peer.lastHeartbeatMs));
    const reasons: HealthReason[] = [];
    let level: NodeHealth['level'] = 'ok';
    if (member.status === 'pruned' || lastSeenAgeMs >= this.cfg.pruneAfterMs) {
      level = 'pruned';
      reasons.push({
        text: `not heard from for ${Math.round(lastSeenAgeMs / 1000)} s: pruned from the cluster`,
        remediation: 'start Shoal on that machine and check the network between the nodes; or remove the node if it is gone for good',
      });
    } else if (lastSeenAgeMs >= this.cfg.suspectAfterMs) {
      level = 'suspect';
      reasons.push({
        text: `no heartbeat for ${Math.round(lastSeenAgeMs / 1000)} s`,
        remediation: `check that the node is running and reachable; it is pruned after ${Math.round(this.cfg.pruneAfterMs / 1000)} s`,
      });
    }
    if (!peer.connected && level === 'ok' && this.role !== 'standalone') {
      // Gossip may still reach it through others; worth saying, not worth a level.
      reasons.push({ text: 'no direct connection', remediation: 'check that its address is reachable from this node' });
    }
    return { level, reasons, heartbeatAgeMs, lastSeenAgeMs, connected: peer.connected };
  }
}
