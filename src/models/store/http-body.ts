// The bulk bytes of a hub download: one HTTP/1.1 GET per connection over node:net / node:tls, read
// with the socket's `onread` straight into the writer's block (a Content-Length body) or into one
// reused buffer (heads, chunked bodies). Measured on loopback against `curl -o` (issue #6): undici's
// fetch hands each chunk through a WHATWG stream read (a promise per chunk), and node:http allocates a
// fresh 64 KiB buffer per socket read, whose garbage collection took over a quarter of the download's
// CPU time. Reading into memory that is reused allocates nothing per read. The hub's metadata calls
// keep using fetch (through @huggingface/hub); only the GET of a file's bytes comes here.
//
// What is spoken is the part of HTTP/1.1 a file download needs: a GET with `Connection: close`,
// redirects, 1xx answers skipped, and bodies framed by Content-Length, chunked transfer coding or the
// end of the connection. `Accept-Encoding: identity` keeps the bytes the hub hashed.

import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';
import { ModelsError } from '../hub/errors.js';

/** Redirects followed per GET (the hub's resolve answers one, to its CDN); more is a bad answer. */
export const HTTP_BODY_MAX_REDIRECTS = 5;
/**
 * No byte (headers or body) for this long ends the GET as a network failure, which the transfer
 * retries from the part file's end. undici's fetch has the same 300 s header and body timeouts.
 */
export const HTTP_BODY_IDLE_TIMEOUT_MS = 300_000;
/** The one buffer a GET's socket reads into: bigger reads mean fewer callbacks (measured: 1 MiB). */
export const HTTP_BODY_READ_BUFFER_BYTES = 1024 * 1024;
/** Status line and headers of one answer; a longer head is a bad answer. */
export const HTTP_BODY_MAX_HEAD_BYTES = 64 * 1024;
/** A chunk-size line or trailer line of a chunked body; a longer one is a bad answer. */
const MAX_LINE_BYTES = 4096;

/**
 * A failure of the connection (refused, reset, TLS, timed out, closed before the body ended): a
 * TypeError with the socket's error as `cause`, as undici's fetch reports them, so isNetworkError
 * and hubError classify both paths alike (retryable; HUB_UNREACHABLE when the retries run out).
 */
export class HttpTransportError extends TypeError {
  override name = 'HttpTransportError';
}

/** Request headers dropped when a redirect leaves the origin they were meant for (as fetch does). */
const ORIGIN_BOUND_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie']);
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

export interface HttpGetOptions {
  headers?: Record<string, string>;
  signal: AbortSignal;
  maxRedirects?: number;
  idleTimeoutMs?: number;
  readBufferBytes?: number;
  /** TLS options beyond the defaults (a test's own CA); the system's CAs and checks apply otherwise. */
  tls?: Pick<ConnectionOptions, 'ca'>;
}

/** Where a body goes: `push` sees bytes that are valid only during the call (it copies them). */
export interface ChunkSink {
  /** Takes `bytes`; false: hold the next ones until `ready()`. May throw to end the GET. */
  push(bytes: Uint8Array): boolean;
  ready(): Promise<void>;
  /**
   * Optional, to skip the copy: memory (at most `max` bytes, not empty) the next read may land in
   * directly, or null. The sink must leave it alone until `commit`; a region never committed (the
   * GET ended first) is simply not used.
   */
  region?(max: number): Uint8Array | null;
  /** `n` bytes landed at the start of the last region; returns as `push` does. */
  commit?(n: number): boolean;
}

/** The answer to a GET after its redirects: status and headers, the body not read yet. */
export interface HttpBodyResponse {
  readonly status: number;
  /** The URL that answered (after redirects). */
  readonly url: string;
  /** A header's value, or null; a repeated header's values joined with ", " as fetch joins them. */
  header(name: string): string | null;
  /**
   * Reads the body to its end into `sink`. Rejects with the sink's error, with the signal's reason
   * once it aborts, and with an HttpTransportError when the connection fails or ends before the body
   * does. Call once.
   */
  pump(sink: ChunkSink): Promise<void>;
  /** Closes the connection without reading the body. */
  discard(): void;
}

/**
 * GETs `url`, following up to `maxRedirects` redirects: a redirect to another origin drops the
 * Authorization, Proxy-Authorization and Cookie headers. Resolves with the first answer that is not a
 * redirect, whatever its status; the caller pumps or discards its body. Rejects with `signal.reason`
 * once the signal aborts, with an HttpTransportError when the connection fails, and with a
 * HUB_BAD_RESPONSE ModelsError for an answer that is not HTTP/1.1 or too many or unusable redirects.
 */
export async function httpGet(url: string, opts: HttpGetOptions): Promise<HttpBodyResponse> {
  const maxRedirects = opts.maxRedirects ?? HTTP_BODY_MAX_REDIRECTS;
  let headers = { ...opts.headers };
  let current = new URL(url);
  for (let redirects = 0; ; redirects += 1) {
    if (current.protocol !== 'http:' && current.protocol !== 'https:') {
      throw new ModelsError('HUB_BAD_RESPONSE', `cannot GET ${current.href}: only http and https are spoken`);
    }
    const res = await Exchange.open(current, headers, opts);
    const location = res.header('location');
    if (!REDIRECT_STATUSES.has(res.status) || location === null) return res;
    res.discard();
    if (redirects >= maxRedirects) {
      throw new ModelsError('HUB_BAD_RESPONSE', `GET ${url} was redirected more than ${maxRedirects} times (last to ${location})`);
    }
    let next: URL;
    try {
      next = new URL(location, current);
    } catch {
      throw new ModelsError('HUB_BAD_RESPONSE', `${current.href} redirected to "${location}", which is not a URL`);
    }
    if (next.origin !== current.origin) {
      headers = Object.fromEntries(Object.entries(headers).filter(([name]) => !ORIGIN_BOUND_HEADERS.has(name.toLowerCase())));
    }
    current = next;
  }
}

function badAnswer(url: URL, what: string): ModelsError {
  return new ModelsError('HUB_BAD_RESPONSE', `${url.origin} sent ${what} for ${url.href}`);
}

type Framing = { kind: 'length'; left: number } | { kind: 'chunked' } | { kind: 'close' };
type ChunkedPhase = 'size' | 'data' | 'data-end' | 'trailer';
type Settle<T> = { resolve: (value: T) => void; reject: (error: unknown) => void };

/**
 * One GET on its own connection. Phases: `head` (collecting the status line and headers), `waiting`
 * (the head is in; the socket is paused until `pump` gives the body a sink), `body`, `done`.
 */
class Exchange implements HttpBodyResponse {
  status = 0;
  private readonly headers = new Map<string, string>();
  private readonly socket: Socket;
  private phase: 'head' | 'waiting' | 'body' | 'done' = 'head';
  private head: Buffer = Buffer.alloc(0);
  private framing: Framing = { kind: 'close' };
  private chunked: ChunkedPhase = 'size';
  private chunkLeft = 0;
  private line = '';
  /** Body bytes (still framed) that came with the head, before `pump`. */
  private early: Buffer | null = null;
  /** The connection ended (`error` null: cleanly) while the body waited for `pump`, which judges it. */
  private ended: { error: unknown } | null = null;
  private sink: ChunkSink | null = null;
  /** The sink's memory the socket reads into next, if it does. */
  private region: Uint8Array | null = null;
  private failure: { error: unknown } | null = null;
  private bodyBytes = 0;
  private readonly onAbort: () => void;
  private headSettled: Settle<Exchange> | null;
  private bodySettled: Settle<void> | null = null;

  static open(url: URL, headers: Record<string, string>, opts: HttpGetOptions): Promise<Exchange> {
    return new Promise((resolve, reject) => {
      if (opts.signal.aborted) return reject(opts.signal.reason);
      try {
        new Exchange(url, headers, opts, { resolve, reject });
      } catch (error) {
        reject(error);
      }
    });
  }

  private constructor(
    readonly target: URL,
    headers: Record<string, string>,
    private readonly opts: HttpGetOptions,
    settled: Settle<Exchange>,
  ) {
    this.headSettled = settled;
    const request = requestHead(target, headers);
    const readBuffer = Buffer.allocUnsafeSlow(opts.readBufferBytes ?? HTTP_BODY_READ_BUFFER_BYTES);
    // Called for the first read and again after each: the sink's own memory when it offers some for
    // a body of known length (no copy), else the read buffer.
    const nextBuffer = (): Uint8Array => {
      this.region = null;
      if (this.phase !== 'body' || this.framing.kind !== 'length' || !this.sink?.region) return readBuffer;
      this.region = this.sink.region(this.framing.left);
      return this.region ?? readBuffer;
    };
    const onread = {
      buffer: nextBuffer,
      callback: (n: number, buf: Uint8Array): boolean => (buf === this.region ? this.onDirectRead(n) : this.onRead(buf.subarray(0, n))),
    };
    const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
    const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
    this.socket =
      target.protocol === 'https:'
        ? tlsConnect({ host, port, servername: /^[\d.]+$|:/.test(host) ? undefined : host, ALPNProtocols: ['http/1.1'], onread, ...opts.tls } as ConnectionOptions)
        : netConnect({ host, port, onread });
    this.onAbort = (): void => this.fail(opts.signal.reason);
    opts.signal.addEventListener('abort', this.onAbort, { once: true });
    const idleMs = opts.idleTimeoutMs ?? HTTP_BODY_IDLE_TIMEOUT_MS;
    this.socket.setTimeout(idleMs, () => {
      const cause = Object.assign(new Error(`no byte for ${idleMs} ms`), { code: 'ETIMEDOUT' });
      this.connectionEnded(new HttpTransportError(`GET ${target.href} stalled`, { cause }));
      this.socket.destroy();
    });
    this.socket.once(target.protocol === 'https:' ? 'secureConnect' : 'connect', () => this.socket.write(request));
    this.socket.on('error', (error) => this.connectionEnded(new HttpTransportError(`GET ${target.href} failed`, { cause: error })));
    // 'end' needs the stream flowing; the bytes themselves all go through `onread`.
    this.socket.on('end', () => this.connectionEnded(null));
    this.socket.on('close', () => this.connectionEnded(null));
    this.socket.resume();
  }

  get url(): string {
    return this.target.href;
  }

  header(name: string): string | null {
    return this.headers.get(name.toLowerCase()) ?? null;
  }

  pump(sink: ChunkSink): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (this.sink || this.phase === 'head') return reject(new Error('pump() is called once, after the head'));
      this.sink = sink;
      this.bodySettled = { resolve, reject };
      if (this.phase === 'done') return this.settle();
      this.phase = 'body';
      const early = this.early;
      this.early = null;
      let more = true;
      try {
        if (early) more = this.body(early);
      } catch (error) {
        return this.fail(error);
      }
      if (this.phase !== 'body') return;
      if (this.ended) return this.connectionEnded(this.ended.error);
      this.continueWhen(more);
    });
  }

  discard(): void {
    this.fail(new Error('the body was discarded'));
  }

  /** Resumes the socket now, or once the sink is ready. */
  private continueWhen(more: boolean): void {
    if (more) {
      this.socket.resume();
      return;
    }
    (this.sink as ChunkSink).ready().then(
      () => {
        if (this.phase === 'body') this.socket.resume();
      },
      (error: unknown) => this.fail(error),
    );
  }

  /** A read that landed in the sink's region: body bytes of a Content-Length body, nothing to frame. */
  private onDirectRead(n: number): boolean {
    this.region = null;
    try {
      const framing = this.framing as { kind: 'length'; left: number };
      framing.left -= n;
      this.bodyBytes += n;
      const more = (this.sink as Required<ChunkSink>).commit(n);
      if (framing.left === 0) this.finish();
      if (this.phase !== 'body') return false;
      if (!more) this.continueWhen(false);
      return more;
    } catch (error) {
      this.fail(error);
      return false;
    }
  }

  /** One read into the read buffer; false stops reading (the socket resumes in `continueWhen`). */
  private onRead(data: Uint8Array): boolean {
    try {
      switch (this.phase) {
        case 'head': {
          const rest = this.takeHead(data);
          // Still collecting; or the head is in and the body waits for `pump` (or `discard`).
          if (this.phase === 'head') return true;
          if (this.phase === 'waiting' && rest.length > 0) this.early = Buffer.from(rest);
          return false;
        }
        case 'waiting':
          this.early = this.early ? Buffer.concat([this.early, data]) : Buffer.from(data);
          return false;
        case 'body': {
          const more = this.body(data);
          if (this.phase !== 'body') return false;
          if (!more) this.continueWhen(false);
          return more;
        }
        case 'done':
          return false;
      }
    } catch (error) {
      this.fail(error);
      return false;
    }
  }

  /** Collects the head; returns what follows it once it is complete. */
  private takeHead(data: Uint8Array): Uint8Array {
    let from = Math.max(0, this.head.length - 3);
    this.head = this.head.length === 0 ? Buffer.from(data) : Buffer.concat([this.head, data]);
    for (;;) {
      const end = this.head.indexOf('\r\n\r\n', from, 'latin1');
      if (end < 0) {
        if (this.head.length > HTTP_BODY_MAX_HEAD_BYTES) throw badAnswer(this.target, `a head longer than ${HTTP_BODY_MAX_HEAD_BYTES} bytes`);
        return new Uint8Array(0);
      }
      const lines = this.head.toString('latin1', 0, end).split('\r\n');
      const rest = this.head.subarray(end + 4);
      const status = /^HTTP\/1\.[01] (\d{3})(?: .*)?$/.exec(lines[0] ?? '');
      if (!status) throw badAnswer(this.target, `an answer that is not HTTP/1.1 ("${(lines[0] ?? '').slice(0, 80)}")`);
      const code = Number(status[1]);
      if (code < 200) {
        // 100 Continue, 103 Early Hints: the final answer follows.
        this.head = Buffer.from(rest);
        from = 0;
        continue;
      }
      this.status = code;
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(':');
        if (colon <= 0) throw badAnswer(this.target, `a malformed header line ("${line.slice(0, 80)}")`);
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        const before = this.headers.get(name);
        this.headers.set(name, before === undefined ? value : `${before}, ${value}`);
      }
      this.head = Buffer.alloc(0);
      this.frame();
      this.settle();
      return rest;
    }
  }

  /** How the body ends (RFC 9112 section 6.3). */
  private frame(): void {
    const encoding = this.header('content-encoding');
    if (encoding !== null && encoding.toLowerCase() !== 'identity') {
      throw badAnswer(this.target, `a body with Content-Encoding ${encoding} (asked for identity)`);
    }
    const te = this.header('transfer-encoding');
    const length = this.header('content-length');
    this.phase = 'waiting';
    if (this.status === 204 || this.status === 304) {
      this.finish();
    } else if (te !== null) {
      this.framing = /(^|,)\s*chunked\s*$/i.test(te) ? { kind: 'chunked' } : { kind: 'close' };
    } else if (length !== null) {
      const values = [...new Set(length.split(',').map((v) => v.trim()))];
      if (values.length !== 1 || !/^\d{1,15}$/.test(values[0] as string)) throw badAnswer(this.target, `Content-Length "${length}"`);
      this.framing = { kind: 'length', left: Number(values[0]) };
      if (this.framing.left === 0) this.finish();
    }
  }

  /** Frames `data` into the sink; returns what the sink said of the last bytes it took. */
  private body(data: Uint8Array): boolean {
    const sink = this.sink as ChunkSink;
    const framing = this.framing;
    if (framing.kind === 'close') return this.deliver(sink, data);
    if (framing.kind === 'length') {
      const take = data.length <= framing.left ? data : data.subarray(0, framing.left);
      framing.left -= take.length;
      const more = this.deliver(sink, take);
      if (framing.left === 0) this.finish();
      return more;
    }
    let more = true;
    let at = 0;
    while (at < data.length && this.phase === 'body') {
      if (this.chunked === 'data') {
        const n = Math.min(this.chunkLeft, data.length - at);
        more = this.deliver(sink, data.subarray(at, at + n));
        at += n;
        this.chunkLeft -= n;
        if (this.chunkLeft === 0) this.chunked = 'data-end';
        continue;
      }
      const nl = data.indexOf(0x0a, at);
      const stop = nl < 0 ? data.length : nl;
      this.line += Buffer.from(data.buffer, data.byteOffset + at, stop - at).toString('latin1');
      if (this.line.length > MAX_LINE_BYTES) throw badAnswer(this.target, 'a chunked body with a line too long');
      if (nl < 0) break;
      at = nl + 1;
      const line = this.line.replace(/\r$/, '');
      this.line = '';
      if (this.chunked === 'data-end') {
        if (line !== '') throw badAnswer(this.target, 'a chunk longer than its size says');
        this.chunked = 'size';
      } else if (this.chunked === 'size') {
        const size = /^([0-9a-fA-F]{1,12})[ \t]*(;.*)?$/.exec(line);
        if (!size) throw badAnswer(this.target, `a chunk size "${line.slice(0, 40)}"`);
        this.chunkLeft = parseInt(size[1] as string, 16);
        this.chunked = this.chunkLeft === 0 ? 'trailer' : 'data';
      } else if (line === '') {
        this.finish();
      }
    }
    return more;
  }

  private deliver(sink: ChunkSink, bytes: Uint8Array): boolean {
    if (bytes.length === 0) return true;
    this.bodyBytes += bytes.length;
    return sink.push(bytes);
  }

  /** The socket failed (`error`) or ended (null). */
  private connectionEnded(error: unknown): void {
    if (this.phase === 'done') return;
    if (this.phase === 'waiting') {
      this.ended ??= { error };
      return;
    }
    if (this.phase === 'body' && this.framing.kind === 'close' && error === null) return this.finish();
    if (error !== null) return this.fail(error);
    const where = this.phase === 'head' ? 'before its answer was complete' : `after ${this.bodyBytes} bytes of the body`;
    const cause = Object.assign(new Error('connection closed'), { code: 'ECONNRESET' });
    this.fail(new HttpTransportError(`the connection to ${this.target.origin} closed ${where}`, { cause }));
  }

  private finish(): void {
    if (this.phase === 'done') return;
    this.phase = 'done';
    this.opts.signal.removeEventListener('abort', this.onAbort);
    this.socket.destroy();
    this.settle();
  }

  /** Ends the GET with `error` (or, once the signal aborted, with its reason). */
  private fail(error: unknown): void {
    if (this.phase === 'done') return;
    this.failure = { error: this.opts.signal.aborted ? this.opts.signal.reason : error };
    this.finish();
  }

  /** Settles the promise waiting: the head's, or once the body is done, the body's. */
  private settle(): void {
    if (this.headSettled) {
      const { resolve, reject } = this.headSettled;
      this.headSettled = null;
      if (this.failure) reject(this.failure.error);
      else resolve(this);
      return;
    }
    if (!this.bodySettled || this.phase !== 'done') return;
    const { resolve, reject } = this.bodySettled;
    this.bodySettled = null;
    if (this.failure) reject(this.failure.error);
    else resolve();
  }
}

function requestHead(url: URL, headers: Record<string, string>): string {
  const lines = [`GET ${url.pathname}${url.search} HTTP/1.1`, `Host: ${url.host}`, 'Accept: */*', 'Accept-Encoding: identity', 'User-Agent: shoal', 'Connection: close'];
  for (const [name, value] of Object.entries(headers)) {
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) || /[\r\n\0]/.test(value)) throw new Error(`the request header ${JSON.stringify(name)} cannot be sent as it is`);
    lines.push(`${name}: ${value}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}
