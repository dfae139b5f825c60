import type { CommandId, NodeId } from '../../common/ids.js';
import type { Origin } from '../state/commands.js';
import type { CoreContext, Outbound } from './context.js';
import type { AckMessage } from './messages.js';

/**
 * This node's side of a command's trip: its clients' commands until they are answered (decided here when
 * it is master, relayed to the master otherwise, answered TIMEOUT when nobody decides), and the custody of
 * re-proposals, which only the current master's ack ends.
 */
export class Commands {
  constructor(private readonly ctx: CoreContext) {}

  submit(origin: Origin): void {
    const ctx = this.ctx;
    if (ctx.role === 'standalone') {
      if (origin.command.type === 'FoundCluster') ctx.links.found(origin);
      else ctx.ack(origin.commandId, { ok: false, code: 'NO_CLUSTER', message: 'this node is not in a cluster: found one or join one first' });
      return;
    }
    ctx.pending.set(origin.commandId, { origin, submittedMs: ctx.now(), sentMs: null, sentTo: null });
    if (ctx.role === 'master' && ctx.departing === null) ctx.links.decideOrigins([{ origin, relayer: ctx.self.nodeId }]);
    else this.flushOutbound();
  }

  onAck(from: NodeId, message: AckMessage): void {
    const ctx = this.ctx;
    ctx.links.observeTerm(message.term, from, false);
    const pending = ctx.pending.get(message.commandId);
    if (pending !== undefined) {
      ctx.pending.delete(message.commandId);
      ctx.ack(message.commandId, message.result);
    }
    // Only the current master's word moves custody of a re-proposed command: an old ack from some other
    // (possibly since-cut) log must not let this node drop the last copy.
    if (ctx.reproposals.has(message.commandId) && ctx.role === 'follower' && from === ctx.masterId && message.term === ctx.term) {
      ctx.reproposals.delete(message.commandId);
      ctx.reproposalDecided.add(message.commandId);
      if (ctx.reproposals.size === 0) {
        ctx.needSync = true;
        ctx.links.maybeRequestSync();
      }
    }
  }

  /** Local commands nobody decided within commandTimeoutMs of `now` are answered TIMEOUT. */
  expire(now: number): void {
    const ctx = this.ctx;
    for (const [commandId, item] of ctx.pending) {
      if (now - item.submittedMs >= ctx.cfg.commandTimeoutMs) {
        ctx.pending.delete(commandId);
        ctx.ack(commandId, {
          ok: false,
          code: 'TIMEOUT',
          message: `no master decided the command within ${ctx.cfg.commandTimeoutMs} ms; it may still take effect`,
        });
      }
    }
  }

  /** Sends (or re-sends) commands and re-proposals to the master we follow. */
  flushOutbound(): void {
    const ctx = this.ctx;
    if (ctx.role !== 'follower' || ctx.masterId === null) return;
    const now = ctx.now();
    const to = ctx.masterId;
    const sendAll = (items: Map<CommandId, Outbound>, reproposal: boolean): void => {
      for (const item of items.values()) {
        if (item.sentMs !== null && item.sentTo === to && now - item.sentMs < ctx.cfg.commandRetryMs) continue;
        item.sentMs = now;
        item.sentTo = to;
        ctx.publish({ type: 'command', clusterId: ctx.clusterId, term: ctx.term, to, origin: item.origin, reproposal });
      }
    };
    sendAll(ctx.pending, false);
    sendAll(ctx.reproposals, true);
  }
}
