// `/shoal/diagnostics/1` (issue #18): a member asks every other member for its NodeDiagnostics, all at
// once with a deadline, and estimates each one's clock from the round trip, so `GET /diagnostics/cluster`
// and the merged timeline work from any node. Members only: the router's admission refuses the
// protocol to anyone outside the roster.

import { z } from 'zod';
import { toShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import type { Router } from '../router/index.js';
import { NodeDiagnostics, type ClusterDiagnostics, type MemberDiagnostics, type Timeline } from '../wire/diagnostics.js';
import { buildTimeline, estimateClock, versionMismatch, type TimelineQuery } from './timeline.js';

export const DIAGNOSTICS_PROTOCOL = '/shoal/diagnostics/1';
/**
 * Largest answer. A node with a few runners answers well under 1 MiB (1024 moments and 256 entries per
 * runner of at most 500 characters each); the bound leaves room for a dozen busy runners with their
 * stderr tails. A member whose answer is larger is listed as not read, with the reason.
 */
export const DIAGNOSTICS_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
/** How long one member may take to answer before it is listed as not read (the others are not held up). */
export const DIAGNOSTICS_REQUEST_TIMEOUT_MS = 3000;
/** Concurrent diagnostics asks a member serves per connection: a viewer asks once per member. */
const DIAGNOSTICS_INBOUND_STREAMS = 4;

/** The ask carries nothing: what a member answers is all it has (the viewer filters). */
export const DiagnosticsRequest = z.strictObject({});
export type DiagnosticsRequest = z.infer<typeof DiagnosticsRequest>;

/** The part of the router this needs. */
export type DiagnosticsDataPlane = Pick<Router, 'handle' | 'unhandle' | 'request'>;

export interface ClusterDiagnosticsOptions {
  selfId: string;
  net: DiagnosticsDataPlane;
  /** This node's own diagnostics (node-diagnostics.ts). */
  local: () => NodeDiagnostics;
  /** Every member in the roster, this node included (pruned ones too: they show as not read). */
  members: () => { nodeId: string; name: string }[];
  /** The viewer's wall clock: the offsets are relative to it. */
  nowMs: () => number;
  log: Logger;
  requestTimeoutMs?: number;
}

export class ClusterDiagnosticsService {
  constructor(private readonly options: ClusterDiagnosticsOptions) {}

  async start(): Promise<void> {
    await this.options.net.handle<DiagnosticsRequest, NodeDiagnostics>(DIAGNOSTICS_PROTOCOL, () => this.options.local(), {
      schema: DiagnosticsRequest,
      maxMessageBytes: DIAGNOSTICS_MAX_MESSAGE_BYTES,
      maxInboundStreams: DIAGNOSTICS_INBOUND_STREAMS,
    });
  }

  async stop(): Promise<void> {
    await this.options.net.unhandle(DIAGNOSTICS_PROTOCOL).catch(() => undefined);
  }

  /** Every member's diagnostics, asked in parallel; the ones that did not answer say why. */
  async cluster(): Promise<ClusterDiagnostics> {
    const members = await Promise.all(this.options.members().map((member) => this.ask(member)));
    return { viewerNodeId: this.options.selfId, members, versionMismatch: versionMismatch(members) };
  }

  async timeline(query: TimelineQuery): Promise<Timeline> {
    const { members } = await this.cluster();
    return buildTimeline(this.options.selfId, members, query);
  }

  private async ask(member: { nodeId: string; name: string }): Promise<MemberDiagnostics> {
    if (member.nodeId === this.options.selfId) {
      return { ...member, reachable: true, error: null, offsetMs: 0, rttMs: 0, diagnostics: this.options.local() };
    }
    const timeoutMs = this.options.requestTimeoutMs ?? DIAGNOSTICS_REQUEST_TIMEOUT_MS;
    const t0 = this.options.nowMs();
    try {
      const diagnostics = await this.options.net.request<NodeDiagnostics>(member.nodeId, DIAGNOSTICS_PROTOCOL, {} satisfies DiagnosticsRequest, {
        schema: NodeDiagnostics,
        maxMessageBytes: DIAGNOSTICS_MAX_MESSAGE_BYTES,
        timeoutMs,
      });
      const t1 = this.options.nowMs();
      if (diagnostics.nodeId !== member.nodeId) throw new Error(`it answered as ${diagnostics.nodeId}`);
      const clock = estimateClock(t0, t1, diagnostics.nowMs);
      return { ...member, reachable: true, error: null, offsetMs: clock.offsetMs, rttMs: clock.rttMs, diagnostics };
    } catch (error) {
      // A deadline's abort says only "aborted": name the deadline instead.
      const reason = this.options.nowMs() - t0 >= timeoutMs ? `no answer within ${timeoutMs} ms` : toShoalError(error).message;
      this.options.log.debug({ err: error, nodeId: member.nodeId }, 'could not read the diagnostics of a member');
      return { ...member, reachable: false, error: reason, offsetMs: null, rttMs: null, diagnostics: null };
    }
  }
}

/**
 * Whom `cluster()` asks: every member of the roster (pruned ones too, so they show as not read), by
 * nickname where one is set; this node alone while it is in no cluster.
 */
export function diagnosticsMembers(state: { dissolved: boolean; members: Record<string, { nodeId: string; name: string; nickname: string | null }> }, selfId: string, selfName: string): { nodeId: string; name: string }[] {
  const members = state.dissolved ? [] : Object.values(state.members).map((m) => ({ nodeId: m.nodeId, name: m.nickname ?? m.name }));
  return members.some((m) => m.nodeId === selfId) ? members : [{ nodeId: selfId, name: selfName }, ...members];
}
