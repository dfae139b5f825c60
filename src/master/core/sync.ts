import type { CommandId, NodeId } from '../../common/ids.js';
import { stateHash } from '../state/hash.js';
import type { LogRecord, Snapshot } from '../state/record.js';
import { memberOf } from '../state/state.js';
import { resultOfEntry, resultOfRecord, type CoreContext, type SyncInFlight } from './context.js';
import {
  jsonBytes,
  MAX_SYNC_MESSAGE_BYTES,
  MAX_SYNC_REQUEST_TERM_RANGES,
  MESSAGE_ENVELOPE_RESERVE_BYTES,
  type SyncPageMessage,
  type SyncRequestMessage,
} from './messages.js';
import { commonPrefix, tailTerms } from './term-ranges.js';

/**
 * How records reach this node's log outside the master's own decisions: live records from its master
 * (follower apply), pages of another member's log (catch-up, reconciliation, serving others), snapshots
 * (install, join, checkpoints).
 */
export class Sync {
  private nextRequestId = 1;

  constructor(private readonly ctx: CoreContext) {}

  /** Live records from our master: strictly in order; a gap or a mismatch asks for a sync instead. */
  acceptRecords(records: readonly LogRecord[]): void {
    const ctx = this.ctx;
    const fresh: LogRecord[] = [];
    for (const record of records) {
      if (record.idx <= ctx.log.lastIdx) {
        const mine = ctx.log.hashAt(record.idx);
        if (mine !== undefined && mine !== record.hash) {
          ctx.needSync = true;
          break;
        }
        continue;
      }
      if (record.idx > ctx.log.lastIdx + 1) {
        ctx.needSync = true;
        break;
      }
      const { taken, error } = ctx.log.appendChecked([record]);
      if (error !== null) {
        // Our last record is not the master's: the sync works out where the logs part.
        ctx.needSync = true;
        break;
      }
      fresh.push(...taken);
    }
    if (fresh.length > 0) {
      ctx.emit({ type: 'append', records: fresh });
      this.afterAppend(fresh);
    }
  }

  /** Reactions to records entering the log (on every role). */
  afterAppend(records: readonly LogRecord[]): void {
    const ctx = this.ctx;
    ctx.changed();
    let leaving = false;
    for (const record of records) {
      if (record.origin !== null) {
        const pending = ctx.pending.get(record.origin.commandId);
        if (pending !== undefined) {
          ctx.pending.delete(record.origin.commandId);
          ctx.ack(record.origin.commandId, resultOfRecord(record));
        }
      }
      const event = record.event;
      if (event.type === 'MemberAdmitted') {
        const peer = ctx.peer(event.member.nodeId);
        // A new member gets a full prune window from its admission, whatever this node's uptime.
        peer.lastHeardMs = Math.max(peer.lastHeardMs, ctx.now());
      }
      if ((event.type === 'MemberRemoved' && event.nodeId === ctx.self.nodeId) || event.type === 'ClusterDissolved') leaving = true;
    }
    if (leaving) ctx.links.leaveCluster();
    else this.maybeCheckpoint();
  }

  maybeRequestSync(): void {
    const ctx = this.ctx;
    if (!ctx.needSync || ctx.sync !== null || ctx.role !== 'follower' || ctx.masterId === null) return;
    if (ctx.reproposals.size > 0) return;
    ctx.needSync = false;
    this.sendSyncRequest(ctx.masterId, 'follow');
  }

  sendSyncRequest(to: NodeId, purpose: SyncInFlight['purpose']): void {
    const ctx = this.ctx;
    const requestId = this.nextRequestId++;
    ctx.send(to, {
      type: 'sync-request',
      clusterId: ctx.clusterId,
      requestId,
      term: ctx.term,
      lastIdx: ctx.log.lastIdx,
      lastHash: ctx.log.lastHash,
      baseIdx: ctx.log.baseIdx,
      terms: tailTerms(ctx.log.terms, MAX_SYNC_REQUEST_TERM_RANGES),
    });
    ctx.sync = { requestId, to, sentMs: ctx.now(), purpose };
  }

  /** Any member's log serves any member: followers catching up and new masters reconciling alike. */
  serveSync(from: NodeId, request: SyncRequestMessage): void {
    const ctx = this.ctx;
    ctx.links.observeTerm(request.term, from, false);
    if (!ctx.isMember(from) || ctx.log.lastIdx === 0) return;
    let common = commonPrefix({ terms: request.terms, lastIdx: request.lastIdx }, ctx.log.shape());
    if (common !== null && common === request.lastIdx) {
      const mine = ctx.log.hashAt(common);
      // Term runs agree but hashes do not: only a term-slot collision does that. Start the requester over.
      if (mine !== undefined && mine !== request.lastHash) common = null;
    }
    const useSnapshot =
      common === null ||
      common < ctx.log.baseIdx ||
      common < request.baseIdx ||
      ctx.log.lastIdx - common > ctx.cfg.syncSnapshotLagRecords;
    let snapshot: Snapshot | null = null;
    let records: LogRecord[] = [];
    let more = false;
    if (useSnapshot) {
      snapshot = this.fitSnapshot(ctx.log.transfer());
    } else {
      ({ records, more } = ctx.log.recordsAfter(common!, ctx.cfg.syncPageRecords, MAX_SYNC_MESSAGE_BYTES - MESSAGE_ENVELOPE_RESERVE_BYTES));
    }
    ctx.send(from, {
      type: 'sync-page',
      clusterId: ctx.clusterId,
      requestId: request.requestId,
      term: ctx.term,
      masterId: ctx.role === 'master' ? ctx.self.nodeId : ctx.masterId,
      commonIdx: common,
      snapshot,
      records,
      serverLastIdx: ctx.log.lastIdx,
      more,
    });
  }

  /**
   * Keeps a transfer snapshot under the sync limit: first the oldest remembered commands lose their origins
   * (they stay recognisable as decided), then the oldest are forgotten.
   */
  fitSnapshot(snapshot: Snapshot): Snapshot {
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

  onSyncPage(from: NodeId, page: SyncPageMessage): void {
    const ctx = this.ctx;
    ctx.links.observeTerm(page.term, from, page.masterId === from);
    const inFlight = ctx.sync;
    if (inFlight === null || page.requestId !== inFlight.requestId || from !== inFlight.to) return;
    ctx.sync = null;
    if (page.snapshot !== null && stateHash(page.snapshot.state) !== page.snapshot.stateHash) {
      ctx.counters.invalid++;
      ctx.needSync = true;
      if (inFlight.purpose === 'reconcile') ctx.links.nextReconcileSource(from);
      return;
    }
    if (inFlight.purpose === 'reconcile') ctx.links.reconcilePage(from, page);
    else this.followPage(from, page);
  }

  /** A sync request that got no page in time: ask again (or, reconciling, try the next source). */
  expireRequest(now: number): void {
    const ctx = this.ctx;
    if (ctx.sync === null || now - ctx.sync.sentMs < ctx.cfg.syncRequestTimeoutMs) return;
    const timedOut = ctx.sync;
    ctx.sync = null;
    if (timedOut.purpose === 'reconcile') ctx.links.nextReconcileSource(timedOut.to);
    else ctx.needSync = true;
  }

  /**
   * Catch-up from our master. Where the logs part, our records after the common point are discarded, but
   * only once the master has decided every command they came from: until then this node holds the only
   * copy of those commands (possibly acknowledged ones), so it keeps them and re-proposes.
   */
  private followPage(from: NodeId, page: SyncPageMessage): void {
    const ctx = this.ctx;
    if (ctx.role !== 'follower' || from !== ctx.masterId || page.term !== ctx.term) return;
    // Records of the current term come from the current master, which never cuts its own log: they agree.
    const common = ctx.log.lastTerm === ctx.term ? ctx.log.lastIdx : Math.min(page.commonIdx ?? 0, ctx.log.lastIdx);
    if (common < ctx.log.lastIdx) {
      const decidedThere = new Set<CommandId>();
      for (const record of page.records) if (record.origin !== null) decidedThere.add(record.origin.commandId);
      for (const entry of page.snapshot?.commands ?? []) decidedThere.add(entry.commandId);
      const undecided = ctx.log
        .originsAfter(common)
        .filter((origin) => !ctx.reproposalDecided.has(origin.commandId) && !decidedThere.has(origin.commandId));
      if (undecided.length > 0) {
        for (const origin of undecided) {
          if (!ctx.reproposals.has(origin.commandId)) {
            ctx.reproposals.set(origin.commandId, { origin, sentMs: null, sentTo: null });
            ctx.counters.reproposed++;
          }
        }
        ctx.links.flushOutbound();
        ctx.changed();
        return;
      }
      if (page.snapshot === null) {
        if (common < ctx.log.baseIdx) {
          // Our checkpoint is past the fork; the next request (carrying baseIdx) gets a snapshot.
          ctx.needSync = true;
          this.maybeRequestSync();
          return;
        }
        ctx.log.truncateAfter(common);
        ctx.emit({ type: 'truncate', afterIdx: common });
        ctx.counters.truncations++;
        ctx.changed();
      }
    }
    if (page.snapshot !== null && (common < ctx.log.lastIdx || page.snapshot.idx > ctx.log.lastIdx)) {
      if (common < ctx.log.lastIdx) ctx.counters.truncations++;
      this.installSnapshot(page.snapshot);
      if (ctx.isStandalone()) return;
    }
    ctx.reproposalDecided.clear();
    this.acceptRecords(page.records);
    if (ctx.isStandalone()) return;
    if (page.more || ctx.log.lastIdx < page.serverLastIdx) ctx.needSync = true;
    this.maybeRequestSync();
  }

  installSnapshot(snapshot: Snapshot): void {
    const ctx = this.ctx;
    ctx.log.install(snapshot);
    ctx.emit({ type: 'installSnapshot', snapshot });
    ctx.changed();
    for (const [commandId] of ctx.pending) {
      const entry = ctx.log.command(commandId);
      if (entry !== undefined) {
        ctx.pending.delete(commandId);
        ctx.ack(commandId, resultOfEntry(entry));
      }
    }
    for (const member of Object.values(snapshot.state.members)) {
      const peer = ctx.peer(member.nodeId);
      peer.lastHeardMs = Math.max(peer.lastHeardMs, ctx.now());
    }
    if (!ctx.isMember(ctx.self.nodeId)) ctx.links.leaveCluster();
  }

  /** A standalone node takes the first snapshot that names it a member (the shell only lets its approved cluster reach it). */
  maybeJoin(from: NodeId, page: SyncPageMessage): void {
    const ctx = this.ctx;
    const snapshot = page.snapshot;
    if (snapshot === null || page.masterId === null || page.term < 1) return;
    if (snapshot.state.clusterId !== page.clusterId || snapshot.state.dissolved) return;
    if (memberOf(snapshot.state, ctx.self.nodeId) === undefined) return;
    if (stateHash(snapshot.state) !== snapshot.stateHash) {
      ctx.counters.invalid++;
      return;
    }
    if (page.term > ctx.term) ctx.persistTerm(page.term);
    ctx.role = 'follower';
    this.installSnapshot(snapshot);
    if (ctx.role !== 'follower') return;
    ctx.links.follow(page.masterId === from ? from : page.masterId);
    ctx.links.publishHeartbeat();
  }

  maybeCheckpoint(): void {
    const ctx = this.ctx;
    if (ctx.reproposals.size > 0) return;
    const { snapshotEveryRecords, retainRecords } = ctx.cfg;
    if (ctx.log.lastIdx - ctx.log.baseIdx < snapshotEveryRecords + retainRecords) return;
    const snapshot = ctx.log.checkpoint(ctx.log.lastIdx - retainRecords);
    ctx.emit({ type: 'snapshot', snapshot });
  }
}
