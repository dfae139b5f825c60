import type { NodeId } from '../common/ids.js';
import type { LogRecord, Snapshot, TermRange } from '../master/state/record.js';
import { nextTerm } from './election.js';
import { outranks, type Rankable } from './rank.js';

export type Role = 'standalone' | 'follower' | 'candidate' | 'master';

/** Where a log ends: its last record's term and idx. */
export interface Position {
  lastTerm: number;
  lastIdx: number;
}

/** A node in the election order: where its log ends and its roster entry (undefined: not a member). */
export interface Contender {
  position: Position;
  member: Rankable | undefined;
}

/**
 * The election order: the longer log first, then the later last term, rank among equals. Every side of
 * a partition acknowledges writes, so after a heal the longer history is the one that leaves the least
 * to re-propose (and nothing beyond the master's memory of command ids to lose); a lone node that
 * elected itself while cut off, with a later term but a short log, must not win over it. A log that is
 * a prefix of another (a node back from a crash) is shorter, so it never discards newer history.
 * Equal positions mean identical logs (one record names its whole history; terms are unique per
 * node), hence identical states and the same view of rank on both sides: the order is total and every
 * node computes it alike, which a bare rank order over states that may differ after a partition is
 * not (nodes could each defer to another in a cycle). Rank is restored by the takeover rule once logs
 * are equal.
 */
export function precedes(a: Contender, b: Contender): boolean {
  if (a.position.lastIdx !== b.position.lastIdx) return a.position.lastIdx > b.position.lastIdx;
  if (a.position.lastTerm !== b.position.lastTerm) return a.position.lastTerm > b.position.lastTerm;
  return a.member !== undefined && b.member !== undefined && outranks(a.member, b.member);
}

/** A member's answer to a status request: where its log stands. */
export interface StatusReply extends Position {
  to: NodeId;
  term: number;
  terms: readonly TermRange[];
}

/** A page fetched from another member's log while reconciling. */
export interface ReconcilePage {
  /** The last idx both logs share (null: could not tell). */
  commonIdx: number | null;
  snapshot: Snapshot | null;
  records: readonly LogRecord[];
  more: boolean;
}

/** The timings of CoreConfig the election reads (see there). */
export interface ElectionTimings {
  masterTimeoutMs: number;
  electionAnswerTimeoutMs: number;
  coordinatorTimeoutMs: number;
  reconcileWindowMs: number;
  reconcileTimeoutMs: number;
  takeoverBackoffMs: number;
}

/**
 * What the election reads of its node and asks it to do. The node keeps role, master and log; the election
 * only moves between its phases and tells the node when to claim, ask, fetch or lead.
 */
export interface ElectionHost {
  readonly selfId: NodeId;
  readonly timings: ElectionTimings;
  now(): number;
  role: Role;
  masterId: NodeId | null;
  lastHeardMasterMs: number;
  readonly term: number;
  readonly maxSeenTerm: number;
  /** A master that removed itself is serving out its grace period: no elections meanwhile. */
  leaving(): boolean;
  /** Catching up with its master or waiting for re-proposals: its log is not the master's yet. */
  catchingUp(): boolean;
  /** The roster entry of `nodeId` (undefined: not a member). */
  member(nodeId: NodeId): (Rankable & { termSlot: number }) | undefined;
  dissolved(): boolean;
  /** Members other than this node that a bully round should expect an answer from. */
  liveOthers(): NodeId[];
  position(): Position;
  /** Whether `reply`'s log holds all of this node's log (or cannot tell from its term runs). */
  extendsMine(reply: StatusReply): boolean;
  changed(): void;
  /** Durably takes `term` and drops catch-up and re-proposals: this log is about to be the master's. */
  claimTerm(term: number): void;
  announceElection(position: Position): void;
  answerAlive(to: NodeId): void;
  requestStatus(term: number): void;
  /** A master answering an election: its coordinator message and a heartbeat. */
  announceMaster(): void;
  fetchFrom(nodeId: NodeId): void;
  installSnapshot(snapshot: Snapshot): void;
  acceptRecords(records: readonly LogRecord[]): void;
  /** Start the claimed term as its master. */
  becomeMaster(): void;
}

type ElectionPhase =
  | { phase: 'awaitAlive'; sinceMs: number }
  | { phase: 'awaitCoordinator'; sinceMs: number }
  | {
      phase: 'reconcile';
      term: number;
      sinceMs: number;
      replies: Map<NodeId, StatusReply>;
      fetchStarted: boolean;
      tried: Set<NodeId>;
    };

/**
 * The bully election over the election order (see `precedes`): ask; claim a term in this node's slot only
 * if nobody who precedes it answers; reconcile with the most advanced log that extends this one; then lead,
 * or defer to someone who still precedes it. Pure: time comes from the host, everything else goes to it.
 */
export class BullyElection {
  private phase: ElectionPhase | null = null;
  private lastElectionMs = Number.NEGATIVE_INFINITY;
  private holdUntilMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly host: ElectionHost) {}

  /** Forget the round in progress (the node follows someone, or left). */
  reset(): void {
    this.phase = null;
  }

  /** Between claiming a term and starting it; a master signal must not interrupt that. */
  reconciling(): boolean {
    return this.phase?.phase === 'reconcile';
  }

  /** Just woken from a stall: no election until `untilMs`, so the master gets a fair chance to be heard. */
  holdUntil(untilMs: number): void {
    this.holdUntilMs = untilMs;
  }

  private contender(nodeId: NodeId, position: Position): Contender {
    return { position, member: this.host.member(nodeId) };
  }

  /** Bully over the election order: ask; claim only if nobody who precedes us answers. */
  start(): void {
    const host = this.host;
    if (host.role === 'standalone' || host.role === 'master' || host.leaving()) return;
    // Just woken from a stall: the master gets a fair chance to be heard before anyone replaces it.
    if (host.now() < this.holdUntilMs) return;
    const me = host.member(host.selfId);
    if (me === undefined || host.dissolved()) return;
    this.lastElectionMs = host.now();
    host.masterId = null;
    host.changed();
    if (host.liveOthers().length === 0) {
      this.claim();
      return;
    }
    // Everyone hears it (gossip); each node decides itself whether it precedes us, on exact positions.
    host.role = 'candidate';
    this.phase = { phase: 'awaitAlive', sinceMs: host.now() };
    host.announceElection(host.position());
  }

  /** Someone asked: answer if we precede it, and make sure a master shows up. */
  onElection(from: NodeId, position: Position): void {
    const host = this.host;
    if (!precedes(this.contender(host.selfId, host.position()), this.contender(from, position))) return;
    host.answerAlive(from);
    if (host.role === 'master') {
      host.announceMaster();
    } else if (host.role === 'follower' && host.masterId !== null && host.now() - host.lastHeardMasterMs < host.timings.masterTimeoutMs) {
      // Our master is alive; the asker will hear it too (gossip reaches everyone we reach).
    } else if (this.phase === null) {
      this.start();
    }
  }

  /** An `alive` for `to`: someone precedes us, so wait for its coordinator instead of claiming. */
  onAlive(to: NodeId): void {
    if (to === this.host.selfId && this.phase?.phase === 'awaitAlive') {
      this.phase = { phase: 'awaitCoordinator', sinceMs: this.host.now() };
    }
  }

  onStatus(from: NodeId, reply: StatusReply): void {
    if (this.phase?.phase === 'reconcile' && reply.to === this.host.selfId && reply.term === this.phase.term) {
      this.phase.replies.set(from, reply);
      this.advanceReconcile();
    }
  }

  /** Timeouts of a candidate; call on every tick while the node is one, with the tick's time. */
  tick(now: number): void {
    const host = this.host;
    const election = this.phase;
    if (election?.phase === 'awaitAlive' && now - election.sinceMs >= host.timings.electionAnswerTimeoutMs) this.claim();
    else if (election?.phase === 'awaitCoordinator' && now - election.sinceMs >= host.timings.coordinatorTimeoutMs) {
      this.phase = null;
      host.role = 'follower';
      this.start();
    } else if (election?.phase === 'reconcile') {
      if (now - election.sinceMs >= host.timings.reconcileTimeoutMs) this.finishReconcile();
      else this.advanceReconcile();
    } else if (election === null) {
      host.role = 'follower';
      host.changed();
    }
  }

  /** A follower in step with its master that outranks it takes over (the bully rule, applied on equal logs). */
  maybeTakeover(masterId: NodeId): void {
    const host = this.host;
    if (host.role !== 'follower' || host.catchingUp()) return;
    const me = host.member(host.selfId);
    const master = host.member(masterId);
    if (me === undefined || master === undefined || !outranks(me, master)) return;
    if (host.now() - this.lastElectionMs < host.timings.takeoverBackoffMs) return;
    this.start();
  }

  /**
   * A master that meets the claim of a higher term from a master whose log is shorter (a healed
   * partition): instead of following it, take a term above it and start again, so the longer history
   * stays the cluster's and the other side re-proposes what it decided alone.
   */
  outbid(): void {
    const host = this.host;
    if (host.role !== 'master' || host.leaving() || host.dissolved()) return;
    this.lastElectionMs = host.now();
    this.claim();
  }

  /** Take a new term (durably, before anything of it is said), then reconcile before starting it. */
  private claim(): void {
    const host = this.host;
    const me = host.member(host.selfId);
    if (me === undefined) return;
    const term = nextTerm(Math.max(host.maxSeenTerm, host.term), me.termSlot);
    host.claimTerm(term);
    host.role = 'candidate';
    host.masterId = null;
    this.phase = { phase: 'reconcile', term, sinceMs: host.now(), replies: new Map(), fetchStarted: false, tried: new Set() };
    host.requestStatus(term);
    this.advanceReconcile();
  }

  private advanceReconcile(): void {
    const election = this.phase;
    if (election?.phase !== 'reconcile' || election.fetchStarted) return;
    const everyoneAnswered = this.host.liveOthers().every((id) => election.replies.has(id));
    if (everyoneAnswered || this.host.now() - election.sinceMs >= this.host.timings.reconcileWindowMs) {
      election.fetchStarted = true;
      this.nextSource(null);
    }
  }

  /**
   * Fetch from the most advanced log that extends ours, so records the old master replicated to someone
   * survive the change. Logs that fork from ours are left alone: their owners re-propose after the heal.
   * `failed`: the source just tried, which has nothing more to give (or failed).
   */
  nextSource(failed: NodeId | null): void {
    const election = this.phase;
    if (election?.phase !== 'reconcile') return;
    if (failed !== null) election.tried.add(failed);
    const lastIdx = this.host.position().lastIdx;
    const candidates = [...election.replies.entries()]
      .filter(([id, reply]) => !election.tried.has(id) && reply.lastIdx > lastIdx)
      .filter(([, reply]) => this.host.extendsMine(reply))
      .sort((a, b) => b[1].lastIdx - a[1].lastIdx);
    const best = candidates[0];
    if (best === undefined) {
      this.finishReconcile();
      return;
    }
    election.tried.add(best[0]);
    this.host.fetchFrom(best[0]);
  }

  /** A page from the source being fetched; it continues ours or the source is skipped. */
  onPage(from: NodeId, page: ReconcilePage): void {
    const host = this.host;
    const election = this.phase;
    if (election?.phase !== 'reconcile' || host.term !== election.term) return;
    if (page.commonIdx === null || page.commonIdx < host.position().lastIdx) {
      this.nextSource(from);
      return;
    }
    if (page.snapshot !== null && page.snapshot.idx > host.position().lastIdx) {
      host.installSnapshot(page.snapshot);
      if (host.role === 'standalone') return;
    }
    host.acceptRecords(page.records);
    if (host.role === 'standalone' || this.phase !== election) return;
    if (page.more) host.fetchFrom(from);
    else this.nextSource(from);
  }

  private finishReconcile(): void {
    const host = this.host;
    const election = this.phase;
    if (election?.phase !== 'reconcile') return;
    if (host.member(host.selfId) === undefined) return;
    // Someone who answered precedes us even after we fetched what we could: let it lead.
    for (const [id, reply] of election.replies) {
      if (precedes(this.contender(id, reply), this.contender(host.selfId, host.position()))) {
        this.phase = null;
        host.role = 'follower';
        host.masterId = null;
        host.lastHeardMasterMs = host.now();
        this.start();
        return;
      }
    }
    this.phase = null;
    host.becomeMaster();
  }
}
