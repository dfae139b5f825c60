// The HTTP client for an engine this node runs on loopback (the managed llama-server): `node:http`
// with a keep-alive agent, because `fetch` (undici's web streams) costs several times more main-thread
// CPU per streamed chunk, and the node relays every token of every stream through here.

import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { errorMessage } from '../../common/errors.js';

export interface LoopbackHttpOptions {
  /**
   * Connections open at once, idle or busy; more requests wait here for one. At most the server's
   * HTTP threads: cpp-httplib holds a thread per kept-alive connection, and a connection beyond its
   * threads was seen reset unanswered under a burst (8 streams on 8 slots).
   */
  maxSockets: number;
  /**
   * Idle connections kept for reuse: one per slot plus a few for the calls around generations
   * (tokenize, count, embeddings).
   */
  maxIdleSockets: number;
  /** Sent with every request (the engine's API key). */
  headers: Record<string, string>;
}

/** A whole (non-streamed) answer: its status and its body as JSON, or as text when it is not JSON. */
export interface LoopbackAnswer {
  status: number;
  body: unknown;
}

/** Socket errors that mean a kept-alive connection was closed by the server before it read the request. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE']);

export class LoopbackHttp {
  private readonly agent: Agent;

  constructor(private readonly options: LoopbackHttpOptions) {
    // Node keeps an idle socket for the server's Keep-Alive hint less a second (llama-server's
    // cpp-httplib says 5 s), so the server rarely closes one under a request; when it does, the
    // request is sent again (see `send`).
    this.agent = new Agent({ keepAlive: true, maxSockets: options.maxSockets, maxFreeSockets: options.maxIdleSockets, scheduling: 'lifo' });
  }

  /**
   * POSTs JSON and resolves with the response once its headers arrive; the caller reads (or
   * destroys) the body. Aborting `signal` destroys the connection, which is how llama-server learns
   * to free a slot; the promise then rejects with the signal's reason.
   */
  post(port: number, path: string, body: unknown, signal: AbortSignal): Promise<IncomingMessage> {
    return this.send('POST', port, path, JSON.stringify(body), signal, this.options.maxSockets);
  }

  get(port: number, path: string, signal: AbortSignal): Promise<IncomingMessage> {
    return this.send('GET', port, path, null, signal, this.options.maxSockets);
  }

  /** POSTs JSON and reads the whole answer. */
  async postJson(port: number, path: string, body: unknown, signal: AbortSignal): Promise<LoopbackAnswer> {
    const response = await this.post(port, path, body, signal);
    return { status: response.statusCode ?? 0, body: await readJson(response, signal) };
  }

  async getJson(port: number, path: string, signal: AbortSignal): Promise<LoopbackAnswer> {
    const response = await this.get(port, path, signal);
    return { status: response.statusCode ?? 0, body: await readJson(response, signal) };
  }

  /** Closes every connection, idle or not. */
  close(): void {
    this.agent.destroy();
  }

  private send(method: string, port: number, path: string, body: string | null, signal: AbortSignal, retries: number): Promise<IncomingMessage> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<IncomingMessage>((resolve, reject) => {
      const headers: Record<string, string | number> = { ...this.options.headers };
      if (body !== null) {
        headers['content-type'] = 'application/json';
        headers['content-length'] = Buffer.byteLength(body);
      }
      const request = httpRequest({ host: '127.0.0.1', port, path, method, headers, agent: this.agent, signal });
      let answered = false;
      request.once('response', (response) => {
        answered = true;
        resolve(response);
      });
      request.on('error', (error: NodeJS.ErrnoException) => {
        if (signal.aborted) return reject(signal.reason as Error);
        // The server closed an idle kept-alive connection as the request went out: it never saw the
        // request (it closes only idle connections), so sending it again is safe. It may have closed
        // several idle ones at once (seen under a burst: the retry drew a second stale one), so retry
        // while the pool hands out reused sockets: each failed one leaves it, and a fresh socket's
        // failure is final.
        if (!answered && retries > 0 && request.reusedSocket && error.code !== undefined && STALE_SOCKET_CODES.has(error.code)) {
          this.send(method, port, path, body, signal, retries - 1).then(resolve, reject);
          return;
        }
        reject(error);
      });
      request.end(body ?? undefined);
    });
  }
}

/**
 * Reads a response body to the end and hands each chunk to `onData`, in order, synchronously as it
 * arrives. Resolves when the body ended; rejects when the connection broke first, when `onData`
 * throws (the connection is then destroyed) or when `signal` aborts (with its reason).
 */
export function readBody(response: IncomingMessage, signal: AbortSignal, onData: (chunk: Buffer) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (error: unknown): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (error === null) resolve();
      else reject(signal.aborted ? (signal.reason as Error) : error);
    };
    const onAbort = (): void => {
      response.destroy();
      settle(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    response.on('data', (chunk: Buffer) => {
      if (settled) return;
      try {
        onData(chunk);
      } catch (error) {
        settle(error);
        response.destroy();
      }
    });
    response.once('end', () => settle(null));
    response.on('error', (error) => settle(error));
    // 'close' without 'end': the connection went away mid-body.
    response.once('close', () => settle(response.complete ? null : connectionClosed()));
    if (signal.aborted) onAbort();
  });
}

/** The whole body as JSON, or as text when it does not parse (kept for the error message). */
export async function readJson(response: IncomingMessage, signal: AbortSignal): Promise<unknown> {
  const chunks: Buffer[] = [];
  await readBody(response, signal, (chunk) => chunks.push(chunk));
  const text = Buffer.concat(chunks).toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

function connectionClosed(): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException = new Error('the connection closed before the response ended');
  error.code = 'ECONNRESET';
  return error;
}

/** What a socket error says, with its code (ECONNREFUSED, ECONNRESET) when it has one. */
export function describeSocketError(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  const message = errorMessage(error);
  return code !== undefined && !message.includes(code) ? `${message}: ${code}` : message;
}
