import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { StatusView } from '../api/control/control.js';
import { ShoalError, isShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { readLogTail, type RotatingLogFile } from '../common/log-file.js';
import type { MetricsDataPlane } from '../metrics/cluster.js';
import { resolveNode, type ResolvedNode } from '../metrics/nodes.js';
import { parseBody } from '../api/validation.js';
import { entryOfFileLine, LOG_HISTORY_MAX_LINES, LOG_PAGE_MAX_BYTES, LOG_PAGE_MAX_LINES, LogEntry, LogPage, type LogRing } from './log-ring.js';
import type { SseHub } from './sse.js';

/**
 * `/shoal/logs/1`: a member asks another for its log lines after a sequence number (a page of at most
 * LOG_PAGE_MAX_LINES). `GET /logs` reads one page of any member's lines; `GET /logs/stream` follows them.
 * `/shoal/logs-history/1` and `GET /logs?history=n` read further back, from the member's log file.
 */

export const LOGS_PROTOCOL = '/shoal/logs/1';
/** A page is at most LOG_PAGE_MAX_BYTES of lines; msgpack framing adds little. */
export const LOGS_MAX_MESSAGE_BYTES = 1024 * 1024;
export const LOGS_REQUEST_TIMEOUT_MS = 5000;
/** How often `/logs/stream` looks for new lines. */
export const LOG_FOLLOW_INTERVAL_MS = 500;
/** Lines `/logs/stream` sends first when no `since` is given. */
export const LOG_FOLLOW_TAIL_LINES = 100;

export const LogsRequest = z.strictObject({
  /** Lines after this one; null for the newest `limit` lines. */
  since: z.number().int().nonnegative().nullable(),
  limit: z.number().int().min(1).max(LOG_PAGE_MAX_LINES),
});
export type LogsRequest = z.infer<typeof LogsRequest>;

export const LogsAnswer = z.strictObject({ nodeId: z.string().min(1).max(128), page: LogPage });
export type LogsAnswer = z.infer<typeof LogsAnswer>;

export const LOGS_HISTORY_PROTOCOL = '/shoal/logs-history/1';

export const LogsHistoryRequest = z.strictObject({ lines: z.number().int().min(1).max(LOG_HISTORY_MAX_LINES) });
export type LogsHistoryRequest = z.infer<typeof LogsHistoryRequest>;

/** A line from the file: the ring's `seq` numbers only the lines of one start. */
export const HistoryEntry = LogEntry.omit({ seq: true });
export type HistoryEntry = z.infer<typeof HistoryEntry>;

export const LogHistory = z.strictObject({
  /** The newest lines of the log file, across restarts and rotations, oldest first. */
  entries: z.array(HistoryEntry).max(LOG_HISTORY_MAX_LINES),
  /** The ring's newest line at the instant the file was read: `/logs/stream?since=lastSeq` goes on without a gap or a repeat. */
  lastSeq: z.number().int().nonnegative(),
});
export type LogHistory = z.infer<typeof LogHistory>;

export const LogsHistoryAnswer = z.strictObject({ nodeId: z.string().min(1).max(128), history: LogHistory });

export interface NodeLogsOptions {
  selfId: string;
  ring: LogRing;
  /** The node's log file (createLogger's `file`); null: history is what the ring holds. */
  file: RotatingLogFile | null;
  dataPlane: MetricsDataPlane | null;
  log: Logger;
}

/** This node's lines, and other members' over the data plane. */
export class NodeLogs {
  constructor(private readonly options: NodeLogsOptions) {}

  async start(): Promise<void> {
    await this.options.dataPlane?.handle<LogsRequest, LogsAnswer>(LOGS_PROTOCOL, (request) => ({ nodeId: this.options.selfId, page: this.options.ring.page(request) }), {
      schema: LogsRequest,
      maxMessageBytes: LOGS_MAX_MESSAGE_BYTES,
      maxInboundStreams: 8,
    });
    await this.options.dataPlane?.handle<LogsHistoryRequest, z.infer<typeof LogsHistoryAnswer>>(
      LOGS_HISTORY_PROTOCOL,
      async (request) => ({ nodeId: this.options.selfId, history: await this.ownHistory(request.lines) }),
      { schema: LogsHistoryRequest, maxMessageBytes: LOGS_MAX_MESSAGE_BYTES, maxInboundStreams: 2 },
    );
  }

  async stop(): Promise<void> {
    await this.options.dataPlane?.unhandle(LOGS_PROTOCOL).catch(() => undefined);
    await this.options.dataPlane?.unhandle(LOGS_HISTORY_PROTOCOL).catch(() => undefined);
  }

  async history(node: ResolvedNode, lines: number, signal?: AbortSignal): Promise<LogHistory> {
    if (node.isSelf) return this.ownHistory(lines);
    const { dataPlane } = this.options;
    if (dataPlane === null) throw new ShoalError('NOT_FOUND', 'this node has no cluster plane to reach other nodes');
    try {
      const answer = await dataPlane.request<z.infer<typeof LogsHistoryAnswer>>(node.nodeId, LOGS_HISTORY_PROTOCOL, { lines }, {
        schema: LogsHistoryAnswer,
        maxMessageBytes: LOGS_MAX_MESSAGE_BYTES,
        timeoutMs: LOGS_REQUEST_TIMEOUT_MS,
        ...(signal ? { signal } : {}),
      });
      return answer.history;
    } catch (error) {
      throw new ShoalError('INSTANCE_LOST', `${node.name} (${node.nodeId}) did not send its log history: ${isShoalError(error) ? error.message : String(error)}`, { cause: error });
    }
  }

  /** The newest `lines` of this node's log file, or of its ring when it keeps no file. */
  private async ownHistory(lines: number): Promise<LogHistory> {
    const { file, ring } = this.options;
    if (file === null) {
      const page = ring.page({ since: null, limit: Math.min(lines, LOG_PAGE_MAX_LINES) });
      return { entries: page.entries.map(({ seq: _seq, ...entry }) => entry), lastSeq: page.lastSeq };
    }
    const { endBytes, value: lastSeq } = await file.flushed(() => ring.lastSeq);
    const raw = await readLogTail(file.dir, { maxLines: lines, maxBytes: LOG_PAGE_MAX_BYTES, maxFiles: file.limits.maxFiles, endBytes });
    return { entries: raw.map((line) => entryOfFileLine(line)), lastSeq };
  }

  async page(node: ResolvedNode, request: LogsRequest, signal?: AbortSignal): Promise<LogPage> {
    if (node.isSelf) return this.options.ring.page(request);
    const { dataPlane } = this.options;
    if (dataPlane === null) throw new ShoalError('NOT_FOUND', 'this node has no cluster plane to reach other nodes');
    try {
      const answer = await dataPlane.request<LogsAnswer>(node.nodeId, LOGS_PROTOCOL, request, {
        schema: LogsAnswer,
        maxMessageBytes: LOGS_MAX_MESSAGE_BYTES,
        timeoutMs: LOGS_REQUEST_TIMEOUT_MS,
        ...(signal ? { signal } : {}),
      });
      return answer.page;
    } catch (error) {
      throw new ShoalError('INSTANCE_LOST', `${node.name} (${node.nodeId}) did not send its logs: ${isShoalError(error) ? error.message : String(error)}`, { cause: error });
    }
  }
}

const LogsQuery = z.strictObject({
  node: z.string().min(1).max(200).optional(),
  since: z.coerce.number().int().nonnegative().optional(),
  limit: z.coerce.number().int().min(1).max(LOG_PAGE_MAX_LINES).optional(),
  history: z.coerce.number().int().min(1).max(LOG_HISTORY_MAX_LINES).optional(),
});
const StreamQuery = z.strictObject({
  node: z.string().min(1).max(200).optional(),
  since: z.coerce.number().int().nonnegative().optional(),
});

export interface LogsRoutesOptions {
  logs: NodeLogs;
  hub: SseHub;
  status: () => StatusView;
  log: Logger;
}

/** `GET /logs` and `GET /logs/stream`; the caller registers them behind the admin check. */
export function logsRoutes(app: FastifyInstance, options: LogsRoutesOptions): void {
  const { logs, hub } = options;

  app.get('/logs', async (request) => {
    const query = parseBody(LogsQuery, request.query ?? {});
    const node = resolveNode(options.status(), query.node);
    if (query.history !== undefined) {
      if (query.since !== undefined || query.limit !== undefined) throw new ShoalError('BAD_REQUEST', 'history reads the newest lines of the log file: pass it without since and limit');
      return { node: { nodeId: node.nodeId, name: node.name }, ...(await logs.history(node, query.history)) };
    }
    const page = await logs.page(node, { since: query.since ?? null, limit: query.limit ?? LOG_PAGE_MAX_LINES });
    return { node: { nodeId: node.nodeId, name: node.name }, ...page };
  });

  app.get('/logs/stream', async (request, reply) => {
    const query = parseBody(StreamQuery, request.query ?? {});
    const node = resolveNode(options.status(), query.node);
    const client = hub.open(request, reply);
    if (client === null) return reply;
    client.send('node', { nodeId: node.nodeId, name: node.name });
    const stop = new AbortController();
    client.onClose(() => stop.abort());
    void follow(logs, node, query.since ?? null, client, stop.signal, options.log);
    return reply;
  });
}

/** Sends pages of new lines as `event: log` (one line each) until the client goes; `event: gap` says how many were missed. */
async function follow(logs: NodeLogs, node: ResolvedNode, since: number | null, client: { send(event: string, data: unknown): boolean }, signal: AbortSignal, log: Logger): Promise<void> {
  let cursor = since;
  let failing = false;
  while (!signal.aborted) {
    try {
      const page = await logs.page(node, cursor === null ? { since: null, limit: LOG_FOLLOW_TAIL_LINES } : { since: cursor, limit: LOG_PAGE_MAX_LINES }, signal);
      // The node restarted (its numbering began again): start from its oldest line.
      if (cursor !== null && page.lastSeq < cursor) {
        cursor = 0;
        continue;
      }
      if (failing) client.send('status', { ok: true, error: null });
      failing = false;
      if (page.dropped > 0) client.send('gap', { dropped: page.dropped });
      for (const entry of page.entries) if (!client.send('log', entry)) return;
      cursor = page.entries.at(-1)?.seq ?? cursor ?? page.lastSeq;
      // A full page means more is waiting: read on without pausing.
      if (page.entries.length === LOG_PAGE_MAX_LINES) continue;
    } catch (error) {
      if (signal.aborted) return;
      if (!failing) client.send('status', { ok: false, error: isShoalError(error) ? error.message : String(error) });
      failing = true;
      log.debug({ err: error, nodeId: node.nodeId }, 'log follow: page failed');
    }
    await sleep(LOG_FOLLOW_INTERVAL_MS, signal);
  }
}

/** Resolves after `ms`, or at once when the signal aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
