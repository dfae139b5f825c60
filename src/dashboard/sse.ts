import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ShoalError } from '../common/errors.js';
import { SSE_HEADERS } from '../api/stream.js';
import { controlErrorBody } from '../api/control/errors.js';

/**
 * The node's Server-Sent Event connections (`/events`, `/logs/stream`): a fixed number of them, each
 * with a bounded write buffer. A client that reads slower than the node writes is disconnected
 * instead of buffered without end; browsers' EventSource reconnects by itself (after `retry` ms).
 */

/** SSE connections per node, all routes together; one more gets 503. */
export const MAX_SSE_CLIENTS = 32;
/** Bytes written to a client and not yet taken by its socket; over it, the client is dropped. */
export const SSE_MAX_BUFFERED_BYTES = 1024 * 1024;
/** A comment line this often keeps proxies and idle timeouts from closing a quiet stream. */
export const SSE_HEARTBEAT_MS = 15_000;
/** What EventSource waits before reconnecting. */
export const SSE_RETRY_MS = 2000;

export class SseClient {
  private closed = false;
  private readonly closeListeners = new Set<() => void>();

  constructor(
    private readonly res: ServerResponse,
    private readonly maxBufferedBytes: number,
  ) {}

  get isClosed(): boolean {
    return this.closed || this.res.destroyed;
  }

  /**
   * Sends one event. JSON.stringify escapes CR and LF, so no payload can forge an event line; a
   * string payload must be one line. False when the client is gone (or was dropped just now).
   */
  send(event: string, data: unknown): boolean {
    const payload = typeof data === 'string' ? data : JSON.stringify(data);
    if (/[\r\n]/.test(event) || /[\r\n]/.test(payload)) throw new ShoalError('INTERNAL', 'an SSE event name or payload holds a line break');
    return this.write(`event: ${event}\ndata: ${payload}\n\n`);
  }

  comment(text: string): boolean {
    return this.write(`: ${text.replace(/[\r\n]/g, ' ')}\n\n`);
  }

  /** The raw write, with the buffer check before and after. */
  write(text: string): boolean {
    if (this.isClosed) return false;
    if (this.res.writableLength > this.maxBufferedBytes) {
      this.drop();
      return false;
    }
    this.res.write(text);
    if (this.res.writableLength > this.maxBufferedBytes) {
      this.drop();
      return false;
    }
    return true;
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.closeListeners.add(listener);
  }

  /** Ends the stream cleanly. */
  close(): void {
    if (this.closed) return;
    if (!this.res.destroyed) this.res.end();
    this.markClosed();
  }

  /** Cuts a client that cannot keep up: its buffered bytes are discarded with the socket. */
  private drop(): void {
    this.res.destroy();
    this.markClosed();
  }

  markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    for (const listener of this.closeListeners) listener();
    this.closeListeners.clear();
  }
}

export interface SseHubOptions {
  maxClients?: number;
  maxBufferedBytes?: number;
  heartbeatMs?: number;
}

export class SseHub {
  private readonly clients = new Set<SseClient>();
  private readonly maxClients: number;
  private readonly maxBufferedBytes: number;
  private heartbeat: NodeJS.Timeout | null = null;
  private closing = false;

  constructor(private readonly options: SseHubOptions = {}) {
    this.maxClients = options.maxClients ?? MAX_SSE_CLIENTS;
    this.maxBufferedBytes = options.maxBufferedBytes ?? SSE_MAX_BUFFERED_BYTES;
  }

  get size(): number {
    return this.clients.size;
  }

  /**
   * Takes over the reply and opens the stream; null when the node has MAX_SSE_CLIENTS already or is
   * stopping, after answering 503 (control error shape, `Retry-After`).
   */
  open(_request: FastifyRequest, reply: FastifyReply): SseClient | null {
    if (this.closing || this.clients.size >= this.maxClients) {
      const error = this.closing
        ? new ShoalError('RUNNER_STOPPED', 'the node is stopping')
        : new ShoalError('QUEUE_FULL', `this node already serves ${this.maxClients} live streams (dashboards, log followers): close one and retry`);
      void reply.code(503).header('retry-after', String(Math.ceil(SSE_RETRY_MS / 1000))).send(controlErrorBody(error));
      return null;
    }
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { ...SSE_HEADERS });
    res.flushHeaders();
    const client = new SseClient(res, this.maxBufferedBytes);
    this.clients.add(client);
    const gone = (): void => {
      this.clients.delete(client);
      client.markClosed();
    };
    client.onClose(() => this.clients.delete(client));
    // The response's close is the connection's (a request's close can come as soon as its body is read).
    res.once('close', gone);
    client.write(`retry: ${SSE_RETRY_MS}\n\n`);
    this.ensureHeartbeat();
    return client;
  }

  /** Every open client. */
  all(): SseClient[] {
    return [...this.clients];
  }

  /** Ends every stream (the node is stopping: an open stream would hold the HTTP server's close). */
  closeAll(): void {
    this.closing = true;
    for (const client of this.clients) client.close();
    this.clients.clear();
    if (this.heartbeat !== null) clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  private ensureHeartbeat(): void {
    if (this.heartbeat !== null) return;
    this.heartbeat = setInterval(() => {
      for (const client of this.clients) client.comment('heartbeat');
      if (this.clients.size === 0 && this.heartbeat !== null) {
        clearInterval(this.heartbeat);
        this.heartbeat = null;
      }
    }, this.options.heartbeatMs ?? SSE_HEARTBEAT_MS);
    this.heartbeat.unref();
  }
}
