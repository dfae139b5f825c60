import { nextTerm } from '../../election/election.js';
import type { CommandId, NodeId } from '../../common/ids.js';
import type { CommandResult, Origin } from '../state/commands.js';
import { decide } from '../state/decide.js';
import type { Event } from '../state/events.js';
import type { LogRecord, Snapshot } from '../state/record.js';
import { resultOfEntry, resultOfRecord, type CoreContext } from './context.js';
import { jsonBytes, MAX_CONTROL_MESSAGE_BYTES, MESSAGE_ENVELOPE_RESERVE_BYTES, type CommandMessage } from './messages.js';

/**
 * What only the master does: decide commands, append and publish their records, answer the relayers;
 * start a term; prune silent members and push new members their first state. Heartbeats (every node
 * sends them) live here too, because the master's is also its claim of the term.
 */
export class MasterDuties {
  private readonly joiners = new Map<NodeId, { untilMs: number; nextMs: number }>();
  private heartbeatSeq = 0;
  lastHeartbeatSentMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly ctx: CoreContext) {}

  /** A standalone node founds a cluster: the first term, with itself as master. */
  found(origin: Origin): void {
    const ctx = this.ctx;
    const decision = decide(ctx.log.state, origin);
    if ('error' in decision) {
      ctx.ack(origin.commandId, { ok: false, code: decision.error.code, message: decision.error.message });
      return;
    }
    const term = nextTerm(ctx.term, 0);
    ctx.persistTerm(term);
    ctx.role = 'master';
    ctx.masterId = ctx.self.nodeId;
    const records = [ctx.log.appendNew(term, decision.events[0]!, origin)];
    for (const event of decision.events.slice(1)) records.push(ctx.log.appendNew(term, event, null));
    records.push(ctx.log.appendNew(term, { type: 'TermStarted', term, masterId: ctx.self.nodeId }, null));
    ctx.emit({ type: 'append', records });
    ctx.changed();
    ctx.ack(origin.commandId, resultOfRecord(records[0]!));
    this.lastHeartbeatSentMs = Number.NEGATIVE_INFINITY;
  }

  /** The claimed term starts: its first record, then the announcements, then the commands waiting here. */
  becomeMaster(): void {
    const ctx = this.ctx;
    ctx.role = 'master';
    ctx.masterId = ctx.self.nodeId;
    ctx.sync = null;
    ctx.needSync = false;
    ctx.reproposals.clear();
    ctx.reproposalDecided.clear();
    this.joiners.clear();
    ctx.changed();
    const record = ctx.log.appendNew(ctx.term, { type: 'TermStarted', term: ctx.term, masterId: ctx.self.nodeId }, null);
    ctx.emit({ type: 'append', records: [record] });
    this.publishRecords([record]);
    this.publishCoordinator();
    this.publishHeartbeat();
    ctx.links.afterAppend([record]);
    if (ctx.role !== 'master') return;
    const mine = [...ctx.pending.values()].map((item) => ({ origin: item.origin, relayer: ctx.self.nodeId }));
    if (mine.length > 0) this.decideOrigins(mine);
  }

  onCommand(from: NodeId, message: CommandMessage): void {
    const ctx = this.ctx;
    ctx.links.observeTerm(message.term, from, false);
    if (message.to !== ctx.self.nodeId || ctx.role !== 'master' || ctx.departing !== null) return;
    this.decideOrigins([{ origin: message.origin, relayer: from }]);
  }

  /**
   * Decide, append (durable), publish, acknowledge: in that order, so nothing is announced or acknowledged
   * that a crash could take back. A command already decided is answered from memory, never decided twice.
   */
  decideOrigins(items: readonly { origin: Origin; relayer: NodeId }[]): void {
    const ctx = this.ctx;
    const appended: LogRecord[] = [];
    const answers: { commandId: CommandId; result: CommandResult; relayer: NodeId }[] = [];
    for (const { origin, relayer } of items) {
      const known = ctx.log.command(origin.commandId);
      if (known !== undefined) {
        answers.push({ commandId: origin.commandId, result: resultOfEntry(known), relayer });
        continue;
      }
      const before = ctx.log.state;
      const decision = decide(before, origin);
      const events: Event[] =
        'events' in decision
          ? decision.events
          : [{ type: 'CommandRejected', commandId: origin.commandId, code: decision.error.code, message: decision.error.message }];
      const first = ctx.log.appendNew(ctx.term, events[0]!, origin);
      appended.push(first);
      for (const event of events.slice(1)) appended.push(ctx.log.appendNew(ctx.term, event, null));
      answers.push({ commandId: origin.commandId, result: resultOfRecord(first), relayer });
      let stop = false;
      for (const event of events) {
        // A member admitted again joined with a fresh code: it lost its log (moved aside after damage)
        // and keeps its identity, so it is pushed the state like any new member.
        if (event.type === 'MemberAdmitted' && event.member.nodeId !== ctx.self.nodeId) {
          ctx.peer(event.member.nodeId).heartbeat = null;
          this.joiners.set(event.member.nodeId, { untilMs: ctx.now() + ctx.cfg.joinPushTimeoutMs, nextMs: ctx.now() });
        }
        if ((event.type === 'MemberRemoved' && event.nodeId === ctx.self.nodeId) || event.type === 'ClusterDissolved') stop = true;
      }
      // After removing itself (or dissolving) this node may not decide anything else: the rest retry elsewhere.
      if (stop) break;
    }
    if (appended.length > 0) {
      ctx.emit({ type: 'append', records: appended });
      this.publishRecords(appended);
    }
    for (const answer of answers) {
      if (answer.relayer !== ctx.self.nodeId) {
        ctx.publish({ type: 'ack', clusterId: ctx.clusterId, term: ctx.term, commandId: answer.commandId, result: answer.result });
      } else if (!appended.some((record) => record.origin?.commandId === answer.commandId) && ctx.pending.delete(answer.commandId)) {
        ctx.ack(answer.commandId, answer.result);
      }
    }
    if (appended.length > 0) ctx.links.afterAppend(appended);
    this.pushJoiners();
  }

  /** The master's own events (no command behind them). */
  appendSystem(events: readonly Event[]): void {
    const ctx = this.ctx;
    const records = events.map((event) => ctx.log.appendNew(ctx.term, event, null));
    ctx.emit({ type: 'append', records });
    this.publishRecords(records);
    ctx.links.afterAppend(records);
  }

  private publishRecords(records: readonly LogRecord[]): void {
    const ctx = this.ctx;
    const limit = MAX_CONTROL_MESSAGE_BYTES - MESSAGE_ENVELOPE_RESERVE_BYTES;
    let batch: LogRecord[] = [];
    let bytes = 0;
    const flush = (): void => {
      if (batch.length === 0) return;
      ctx.publish({ type: 'event', clusterId: ctx.clusterId, term: ctx.term, masterId: ctx.self.nodeId, records: batch });
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

  publishCoordinator(): void {
    const ctx = this.ctx;
    ctx.publish({
      type: 'coordinator',
      clusterId: ctx.clusterId,
      term: ctx.term,
      masterId: ctx.self.nodeId,
      lastIdx: ctx.log.lastIdx,
      lastHash: ctx.log.lastHash,
    });
  }

  publishHeartbeat(): void {
    const ctx = this.ctx;
    const now = ctx.now();
    this.lastHeartbeatSentMs = now;
    ctx.emit({
      type: 'publish',
      plane: 'telemetry',
      message: {
        type: 'heartbeat',
        clusterId: ctx.clusterId,
        nodeId: ctx.self.nodeId,
        seq: this.heartbeatSeq++,
        term: ctx.term,
        masterId: ctx.role === 'master' ? ctx.self.nodeId : ctx.masterId,
        lastIdx: ctx.log.lastIdx,
        lastHash: ctx.log.lastHash,
        uptimeMs: Math.max(0, Math.round(now - ctx.startedMs)),
      },
    });
  }

  pruneSilentMembers(): void {
    const ctx = this.ctx;
    const now = ctx.now();
    const events: Event[] = [];
    for (const member of Object.values(ctx.log.state.members)) {
      if (member.nodeId === ctx.self.nodeId || member.status !== 'active') continue;
      const peer = ctx.peer(member.nodeId);
      const lastSeenAgeMs = now - peer.lastHeardMs;
      if (lastSeenAgeMs < ctx.cfg.pruneAfterMs) continue;
      const heartbeatAgeMs = now - (peer.lastHeartbeatMs ?? Math.min(ctx.startedMs, peer.lastHeardMs));
      events.push({
        type: 'NodeTimedOut',
        nodeId: member.nodeId,
        heartbeatAgeMs: Math.max(0, Math.round(heartbeatAgeMs)),
        lastSeenAgeMs: Math.max(0, Math.round(lastSeenAgeMs)),
      });
    }
    if (events.length > 0) this.appendSystem(events);
  }

  pushJoiners(): void {
    const ctx = this.ctx;
    if (ctx.role !== 'master' || this.joiners.size === 0) return;
    const now = ctx.now();
    let snapshot: Snapshot | null = null;
    for (const [nodeId, joiner] of this.joiners) {
      if (!ctx.isMember(nodeId) || now >= joiner.untilMs || ctx.peer(nodeId).heartbeat !== null) {
        this.joiners.delete(nodeId);
        continue;
      }
      if (now < joiner.nextMs) continue;
      joiner.nextMs = now + ctx.cfg.joinPushIntervalMs;
      snapshot ??= ctx.links.fitSnapshot(ctx.log.transfer());
      ctx.send(nodeId, {
        type: 'sync-page',
        clusterId: ctx.clusterId,
        requestId: 0,
        term: ctx.term,
        masterId: ctx.self.nodeId,
        commonIdx: null,
        snapshot,
        records: [],
        serverLastIdx: ctx.log.lastIdx,
        more: false,
      });
    }
  }

  /** The node left: nobody is joining through it any more. */
  forgetJoiners(): void {
    this.joiners.clear();
  }
}
