import assert from 'node:assert/strict';
import { BullyElection, type Role } from '../../election/bully.js';
import type { Command } from '../state/commands.js';
import type { MemberInfo } from '../state/events.js';
import { stateHash } from '../state/hash.js';
import { commandIdFrom, type CommandId, type NodeId } from '../../common/ids.js';
import type { LogRecord, Snapshot } from '../state/record.js';
import type { ClusterState } from '../state/state.js';
import { Commands } from './commands.js';
import { DEFAULT_CORE_CONFIG, type CoreConfig } from './config.js';
import { CoreContext, Outbox, type CoreCounters } from './context.js';
import type { Effect } from './effects.js';
import { electionHost } from './election-host.js';
import { healthOf, type NodeHealth } from './health.js';
import { ReplicatedLog } from './log.js';
import { MasterDuties } from './master-duties.js';
import { MAX_STATUS_TERM_RANGES, type CoordinatorMessage, type CoreMessage, type EventMessage, type HeartbeatMessage } from './messages.js';
import { Sync } from './sync.js';
import { tailTerms } from './term-ranges.js';

export type { Role } from '../../election/bully.js';
export type { CoreCounters } from './context.js';
export type { HealthReason, NodeHealth } from './health.js';

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

/**
 * One node's whole control plane as a pure state machine: replicated log, master duties, bully election,
 * catch-up, liveness. No I/O: time and randomness come in, everything the node must do goes out as effects.
 * docs/CONSISTENCY.md describes the guarantees; the comments here say why each rule exists.
 *
 * This class is the facade and the inbound router; the parts share one CoreContext: `Sync` (follower
 * apply, catch-up, snapshots), `MasterDuties` (decide/append/publish, term start, pruning, joiners,
 * heartbeats), `Commands` (client commands, relay, re-proposal custody) and the election
 * (`src/election/bully.ts`, through the port in `election-host.ts`).
 */
export class NodeCore {
  readonly self: MemberInfo;
  private readonly ctx: CoreContext;
  private readonly sync: Sync;
  private readonly master: MasterDuties;
  private readonly commands: Commands;
  private readonly election: BullyElection;
  private startupEffects: Effect[] = [];
  private hashCache: { state: ClusterState; hash: string } | null = null;
  /** When the last tick ran; a long gap before the next input means this process was stopped. */
  private lastTickMs: number | null = null;

  constructor(options: CoreOptions) {
    this.self = options.self;
    const cfg = { ...DEFAULT_CORE_CONFIG, ...options.config };
    const log = new ReplicatedLog(options.persisted.snapshot, options.persisted.records);
    let term = options.persisted.term;
    if (log.lastTerm > term) {
      // A record's term is always persisted before the record; repair a shell that lost that order.
      term = log.lastTerm;
      this.startupEffects.push({ type: 'persistTerm', term });
    }
    const ctx = new CoreContext(options.self, options.clock, options.random, cfg, log, term);
    this.ctx = ctx;
    if (ctx.log.lastIdx === 0) {
      ctx.role = 'standalone';
    } else if (ctx.isMember(this.self.nodeId)) {
      ctx.role = 'follower';
    } else {
      // Removed or dissolved before the reset reached the disk: finish leaving.
      ctx.role = 'standalone';
      ctx.log = new ReplicatedLog(null, []);
      ctx.term = 0;
      ctx.maxSeenTerm = 0;
      this.startupEffects.push({ type: 'reset' });
    }
    this.sync = new Sync(ctx);
    this.master = new MasterDuties(ctx);
    this.commands = new Commands(ctx);
    this.election = new BullyElection(electionHost(ctx, this.master, this.sync));
    ctx.links = {
      observeTerm: (term, from, masterClaim) => this.observeTerm(term, from, masterClaim),
      follow: (masterId) => this.follow(masterId),
      leaveCluster: () => this.leaveCluster(),
      afterAppend: (records) => this.sync.afterAppend(records),
      maybeRequestSync: () => this.sync.maybeRequestSync(),
      fitSnapshot: (snapshot) => this.sync.fitSnapshot(snapshot),
      found: (origin) => this.master.found(origin),
      decideOrigins: (items) => this.master.decideOrigins(items),
      publishHeartbeat: () => this.master.publishHeartbeat(),
      flushOutbound: () => this.commands.flushOutbound(),
      reconcilePage: (from, page) => this.election.onPage(from, page),
      nextReconcileSource: (failed) => this.election.nextSource(failed),
    };
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
    const commandId = commandIdFrom(this.ctx.random);
    const effects = this.run(() => this.commands.submit({ commandId, from: this.self.nodeId, command }));
    return { commandId, effects };
  }

  /** The transport connected to `nodeId`. */
  peerUp(nodeId: NodeId): Effect[] {
    return this.run(() => {
      const ctx = this.ctx;
      ctx.peer(nodeId).connected = true;
      // A node that just (re)connected learns who leads without waiting for the next heartbeat.
      if (ctx.role === 'master' && ctx.now() - this.master.lastHeartbeatSentMs > ctx.cfg.heartbeatIntervalMs / 10) this.master.publishHeartbeat();
    });
  }

  /** The transport lost its connection to `nodeId`. */
  peerDown(nodeId: NodeId): Effect[] {
    return this.run(() => {
      this.ctx.peer(nodeId).connected = false;
      // A closed connection is the fastest failure signal there is; the bully round still asks before claiming.
      if (this.ctx.role === 'follower' && nodeId === this.ctx.masterId) this.election.start();
    });
  }

  /** Records up to this idx are covered by the last checkpoint; the shell may drop them. */
  compactable(): number {
    return this.ctx.log.baseIdx;
  }

  view(): CoreView {
    const ctx = this.ctx;
    const state = ctx.log.state;
    if (this.hashCache === null || this.hashCache.state !== state) this.hashCache = { state, hash: stateHash(state) };
    const health: Record<NodeId, NodeHealth> = {};
    if (ctx.role !== 'standalone') {
      for (const member of Object.values(state.members)) {
        if (member.nodeId === this.self.nodeId) continue;
        health[member.nodeId] = healthOf(member, ctx.peer(member.nodeId), ctx.now(), ctx.cfg, ctx.role);
      }
    }
    return {
      role: ctx.role,
      term: ctx.term,
      masterId: ctx.masterId,
      state,
      stateHash: this.hashCache.hash,
      lastIdx: ctx.log.lastIdx,
      lastHash: ctx.log.lastHash,
      compactableIdx: ctx.log.baseIdx,
      health,
      syncing: ctx.sync !== null || ctx.reproposals.size > 0 || ctx.needSync,
      pendingCommands: ctx.pending.size,
      counters: { ...ctx.counters },
    };
  }

  /** The cheap part of view(), for callers that poll. */
  status(): { role: Role; term: number; masterId: NodeId | null; lastIdx: number; lastHash: string } {
    const ctx = this.ctx;
    return { role: ctx.role, term: ctx.term, masterId: ctx.masterId, lastIdx: ctx.log.lastIdx, lastHash: ctx.log.lastHash };
  }

  /** The records this node holds after its checkpoint (tests and diagnostics). */
  records(): readonly LogRecord[] {
    return this.ctx.log.records;
  }

  // ------------------------------------------------------------------ plumbing

  private run(body: () => void): Effect[] {
    assert.equal(this.ctx.fx, null, 'NodeCore is not re-entrant');
    const fx = new Outbox();
    this.ctx.fx = fx;
    try {
      this.noticeStall();
      if (this.startupEffects.length > 0) {
        for (const effect of this.startupEffects) fx.push(effect);
        this.startupEffects = [];
      }
      body();
    } finally {
      this.ctx.fx = null;
    }
    return fx.done();
  }

  // ------------------------------------------------------------------ inbound

  private dispatch(from: NodeId, message: CoreMessage): void {
    const ctx = this.ctx;
    if (from === this.self.nodeId) return;
    if (ctx.role === 'standalone') {
      if (message.type === 'sync-page') this.sync.maybeJoin(from, message);
      return;
    }
    if (message.clusterId !== ctx.log.state.clusterId) return;
    this.heard(from, message.type === 'heartbeat');
    if (ctx.isStandalone()) return;
    switch (message.type) {
      case 'heartbeat':
        return this.onHeartbeat(from, message);
      case 'resources':
      case 'runners':
      case 'artifacts':
      case 'downloads':
      case 'health':
        // Readings for placement, routing and `/state` (the shell keeps them); to the core they only prove liveness.
        return;
      case 'event':
        return this.onEvent(from, message);
      case 'command':
        return this.master.onCommand(from, message);
      case 'ack':
        return this.commands.onAck(from, message);
      case 'election':
        this.observeTerm(message.term, from, false);
        return this.election.onElection(from, message);
      case 'alive':
        this.observeTerm(message.term, from, false);
        return this.election.onAlive(message.to);
      case 'coordinator':
        return this.onCoordinator(from, message);
      case 'status-request':
        this.observeTerm(message.term, from, false);
        ctx.publish({
          type: 'status',
          clusterId: ctx.clusterId,
          term: ctx.term,
          to: from,
          lastTerm: ctx.log.lastTerm,
          lastIdx: ctx.log.lastIdx,
          lastHash: ctx.log.lastHash,
          terms: tailTerms(ctx.log.terms, MAX_STATUS_TERM_RANGES),
        });
        return;
      case 'status':
        this.observeTerm(message.term, from, false);
        return this.election.onStatus(from, message);
      case 'sync-request':
        return this.sync.serveSync(from, message);
      case 'sync-page':
        return this.sync.onSyncPage(from, message);
    }
  }

  /** Receiver-side liveness: our own clock, stamped on anything from the node. */
  private heard(from: NodeId, heartbeat: boolean): void {
    const ctx = this.ctx;
    const peer = ctx.peer(from);
    const now = ctx.now();
    peer.lastHeardMs = now;
    if (heartbeat) peer.lastHeartbeatMs = now;
    if (ctx.role === 'master' && ctx.departing === null && ctx.member(from)?.status === 'pruned') {
      this.master.appendSystem([{ type: 'NodeReturned', nodeId: from }]);
    }
  }

  /**
   * Terms only grow, and a higher term always wins: the node follows it (its claimer if the message is a
   * master's claim, else nobody until the claimer shows up). Rank is honoured afterwards, once logs agree,
   * by the takeover rule; deciding by rank here, on states that may differ, could have two nodes outbid
   * each other forever.
   */
  private observeTerm(term: number, from: NodeId, masterClaim: boolean, claimLastIdx?: number): void {
    const ctx = this.ctx;
    if (term > ctx.maxSeenTerm) ctx.maxSeenTerm = term;
    if (term <= ctx.term || ctx.departing !== null) return;
    if (masterClaim && ctx.role === 'master' && claimLastIdx !== undefined && claimLastIdx < ctx.log.lastIdx) {
      // Two masters after a heal, and ours holds the longer log: it stays the cluster's (see `precedes`).
      ctx.counters.outbids++;
      this.election.outbid();
      return;
    }
    ctx.persistTerm(term);
    ctx.role = 'follower';
    ctx.masterId = null;
    this.election.reset();
    ctx.sync = null;
    ctx.lastHeardMasterMs = ctx.now();
    ctx.reproposalDecided.clear();
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
    const ctx = this.ctx;
    const now = ctx.now();
    const gap = now - this.lastTickMs;
    if (gap < ctx.cfg.stallThresholdMs) return;
    this.lastTickMs = now;
    for (const peer of ctx.peers.values()) {
      peer.lastHeardMs = Math.min(now, peer.lastHeardMs + gap);
      if (peer.lastHeartbeatMs !== null) peer.lastHeartbeatMs = Math.min(now, peer.lastHeartbeatMs + gap);
    }
    ctx.lastHeardMasterMs = Math.min(now, ctx.lastHeardMasterMs + gap);
    this.election.holdUntil(now + ctx.cfg.masterTimeoutMs);
    ctx.counters.stalls++;
  }

  /** `from` proved it is the master of our current term (heartbeat, coordinator or event). */
  private onMasterSignal(from: NodeId, lastIdx: number, lastHash: string): void {
    const ctx = this.ctx;
    if (ctx.role === 'master' || ctx.role === 'standalone') return;
    if (ctx.masterId !== from || ctx.role !== 'follower') {
      if (this.election.reconciling()) return;
      this.follow(from);
    }
    ctx.lastHeardMasterMs = ctx.now();
    const mine = ctx.log.hashAt(lastIdx);
    if (lastIdx > ctx.log.lastIdx || (mine !== undefined && mine !== lastHash)) ctx.needSync = true;
    this.sync.maybeRequestSync();
    if (lastIdx <= ctx.log.lastIdx && mine === lastHash) this.election.maybeTakeover(from);
  }

  private follow(masterId: NodeId): void {
    const ctx = this.ctx;
    ctx.role = 'follower';
    ctx.masterId = masterId;
    this.election.reset();
    ctx.lastHeardMasterMs = ctx.now();
    ctx.changed();
    // Whatever was sent to someone else goes to the new master now.
    for (const item of ctx.pending.values()) item.sentMs = null;
    for (const item of ctx.reproposals.values()) item.sentMs = null;
    this.commands.flushOutbound();
    ctx.needSync = true;
    this.sync.maybeRequestSync();
  }

  private onHeartbeat(from: NodeId, message: HeartbeatMessage): void {
    if (message.nodeId !== from) return;
    this.ctx.peer(from).heartbeat = message;
    const claim = message.masterId === from;
    this.observeTerm(message.term, from, claim, message.lastIdx);
    if (claim && message.term === this.ctx.term) this.onMasterSignal(from, message.lastIdx, message.lastHash);
  }

  private onCoordinator(from: NodeId, message: CoordinatorMessage): void {
    const claim = message.masterId === from;
    this.observeTerm(message.term, from, claim, message.lastIdx);
    if (claim && message.term === this.ctx.term) this.onMasterSignal(from, message.lastIdx, message.lastHash);
  }

  private onEvent(from: NodeId, message: EventMessage): void {
    const ctx = this.ctx;
    this.observeTerm(message.term, from, message.masterId === from, message.records.at(-1)?.idx);
    if (message.term < ctx.term) {
      ctx.counters.fenced++;
      return;
    }
    if (message.masterId !== from || message.term !== ctx.term) return;
    if (ctx.role === 'master') return;
    if (ctx.masterId !== from || ctx.role !== 'follower') {
      if (this.election.reconciling()) return;
      this.follow(from);
    }
    ctx.lastHeardMasterMs = ctx.now();
    // While re-proposals are outstanding the log is about to be cut; new records wait for the sync after.
    if (ctx.reproposals.size > 0) {
      ctx.needSync = true;
      return;
    }
    this.sync.acceptRecords(message.records);
    this.sync.maybeRequestSync();
  }

  // ------------------------------------------------------------------ leaving

  private leaveCluster(): void {
    const ctx = this.ctx;
    if (ctx.role === 'master') {
      // Stay long enough for the others to get the record that says so; then go.
      ctx.departing ??= { idx: ctx.log.lastIdx, untilMs: ctx.now() + ctx.cfg.departGraceMs };
      return;
    }
    this.resetToStandalone();
  }

  private resetToStandalone(): void {
    const ctx = this.ctx;
    ctx.emit({ type: 'reset' });
    for (const [commandId] of ctx.pending) {
      ctx.ack(commandId, { ok: false, code: 'NOT_A_MEMBER', message: 'this node left the cluster before the command was decided' });
    }
    ctx.pending.clear();
    ctx.reproposals.clear();
    ctx.reproposalDecided.clear();
    this.master.forgetJoiners();
    ctx.log = new ReplicatedLog(null, []);
    ctx.term = 0;
    ctx.maxSeenTerm = 0;
    ctx.role = 'standalone';
    ctx.masterId = null;
    this.election.reset();
    ctx.sync = null;
    ctx.needSync = false;
    ctx.departing = null;
    ctx.changed();
  }

  private departDone(): boolean {
    const ctx = this.ctx;
    const departing = ctx.departing!;
    if (ctx.now() >= departing.untilMs) return true;
    return Object.values(ctx.log.state.members).every((member) => {
      if (member.nodeId === this.self.nodeId || !ctx.isLive(member.nodeId)) return true;
      const heartbeat = ctx.peer(member.nodeId).heartbeat;
      return heartbeat !== null && heartbeat.lastIdx >= departing.idx;
    });
  }

  // ------------------------------------------------------------------ time

  private onTick(): void {
    const ctx = this.ctx;
    this.lastTickMs = ctx.now();
    if (ctx.role === 'standalone') return;
    const now = ctx.now();
    if (ctx.departing !== null) {
      if (this.departDone()) {
        this.resetToStandalone();
        return;
      }
      if (now - this.master.lastHeartbeatSentMs >= ctx.cfg.heartbeatIntervalMs) this.master.publishHeartbeat();
      return;
    }
    if (now - this.master.lastHeartbeatSentMs >= ctx.cfg.heartbeatIntervalMs) this.master.publishHeartbeat();
    switch (ctx.role) {
      case 'follower':
        if (now - ctx.lastHeardMasterMs >= ctx.cfg.masterTimeoutMs) this.election.start();
        break;
      case 'candidate':
        this.election.tick(now);
        break;
      case 'master':
        this.master.pruneSilentMembers();
        this.master.pushJoiners();
        break;
    }
    if (ctx.isStandalone()) return;
    this.sync.expireRequest(now);
    this.sync.maybeRequestSync();
    this.commands.expire(now);
    this.commands.flushOutbound();
    if (ctx.reproposals.size === 0) this.sync.maybeCheckpoint();
  }
}
