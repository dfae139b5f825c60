import { decode, encode } from '@msgpack/msgpack';
import type { Stream, StreamCloseEvent } from '@libp2p/interface';
import type { z } from 'zod';
import { RouterError } from './errors.js';

/**
 * Data-plane framing: every frame is a 4-byte big-endian length followed by that many bytes of
 * msgpack. The length is checked against the receiver's limit as soon as the header arrives, so an
 * oversize frame is refused before its body is buffered or decoded.
 */
export const FRAME_HEADER_BYTES = 4;
export const DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024;
/** Frames a channel keeps decoded but unread before it pauses the remote (yamux flow control). */
const HIGH_WATER_FRAMES = 32;
const LOW_WATER_FRAMES = 8;
/** The host configures yamux with this receive window cap (its default, 16 MiB, outgrows libp2p's 4 MiB read buffer). */
export const YAMUX_MAX_WINDOW_BYTES = 4 * 1024 * 1024;

/** msgpack with `undefined` fields left out (a nil would break `.optional()` schemas on the other side). */
export function encodeValue(value: unknown): Uint8Array {
  return encode(value, { ignoreUndefined: true });
}

export function decodeValue(bytes: Uint8Array): unknown {
  return decode(bytes);
}

export function frameHeader(length: number): Uint8Array {
  const header = new Uint8Array(FRAME_HEADER_BYTES);
  new DataView(header.buffer).setUint32(0, length, false);
  return header;
}

/** Splits a byte stream into frames; throws a `frame_too_large` RouterError on a header over the limit. */
export class FrameDecoder {
  private chunks: Uint8Array[] = [];
  private offset = 0; // into chunks[0]
  private buffered = 0;
  private expected: number | null = null;

  constructor(private readonly maxFrameBytes: number) {}

  /** Bytes received but not yet returned as part of a frame. */
  get pendingBytes(): number {
    return this.buffered;
  }

  push(chunk: Uint8Array): Uint8Array[] {
    if (chunk.byteLength > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.byteLength;
    }
    const frames: Uint8Array[] = [];
    for (;;) {
      if (this.expected === null) {
        if (this.buffered < FRAME_HEADER_BYTES) break;
        const header = this.take(FRAME_HEADER_BYTES);
        const length = new DataView(header.buffer, header.byteOffset, FRAME_HEADER_BYTES).getUint32(0, false);
        if (length > this.maxFrameBytes) {
          throw new RouterError('frame_too_large', `a frame of ${length} bytes is over the limit of ${this.maxFrameBytes} bytes`);
        }
        this.expected = length;
      }
      if (this.buffered < this.expected) break;
      frames.push(this.take(this.expected));
      this.expected = null;
    }
    return frames;
  }

  private take(n: number): Uint8Array {
    const first = this.chunks[0];
    if (first !== undefined && first.byteLength - this.offset >= n) {
      const out = first.subarray(this.offset, this.offset + n);
      this.offset += n;
      this.buffered -= n;
      if (this.offset === first.byteLength) {
        this.chunks.shift();
        this.offset = 0;
      }
      return out;
    }
    const out = new Uint8Array(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0];
      if (chunk === undefined) throw new Error('FrameDecoder.take past the buffered bytes');
      const available = chunk.byteLength - this.offset;
      const count = Math.min(available, n - filled);
      out.set(chunk.subarray(this.offset, this.offset + count), filled);
      filled += count;
      this.offset += count;
      if (this.offset === chunk.byteLength) {
        this.chunks.shift();
        this.offset = 0;
      }
    }
    this.buffered -= n;
    return out;
  }
}

/**
 * One side of a framed conversation: read frames with `for await` (or `next()`), write with `send`.
 * Sending applies backpressure (it waits for the transport to drain). Breaking out of a `for await`
 * stops reading but leaves the stream open: call `abort()` when the conversation is abandoned.
 */
export interface FrameChannel<In = unknown> extends AsyncIterable<In> {
  /** The node at the other end. */
  readonly remote: string;
  readonly protocol: string;
  /**
   * The remote's IP on the connection that carries this stream (what a direct socket connects to or
   * expects), or null for an in-process channel or a connection that is not plain TCP over IP.
   */
  readonly remoteHost: string | null;
  /** Next frame, or `undefined` when the remote finished sending. Rejects with a RouterError. */
  next(options?: { signal?: AbortSignal }): Promise<In | undefined>;
  send(value: unknown, options?: { signal?: AbortSignal }): Promise<void>;
  /** Ends this side's writing (the remote sees the end of its iteration); reading continues. */
  close(): Promise<void>;
  /** Ends the conversation at once in both directions. */
  abort(reason?: Error): void;
  /** Aborted when the conversation ends abnormally (reset, abort, connection lost). */
  readonly signal: AbortSignal;
}

export interface ChannelOptions<In> {
  maxMessageBytes?: number;
  schema?: z.ZodType<In>;
  /** See FrameChannel.remoteHost. Default null. */
  remoteHost?: string | null;
}

/** Frames decoded and waiting for the reader, with the end-of-stream state. */
class FrameQueue<T> {
  private readonly items: T[] = [];
  private waiter: { resolve: (value: T | undefined, done: boolean) => void; reject: (error: unknown) => void } | null = null;
  private ended = false;
  private failure: Error | null = null;

  constructor(private readonly onDrained: () => void) {}

  get length(): number {
    return this.items.length;
  }

  get done(): boolean {
    return this.ended;
  }

  push(item: T): void {
    if (this.ended) return;
    const waiter = this.waiter;
    if (waiter !== null) {
      this.waiter = null;
      waiter.resolve(item, false);
    } else {
      this.items.push(item);
    }
  }

  end(error?: Error): void {
    if (this.ended) return;
    this.ended = true;
    if (error !== undefined) this.failure = error;
    const waiter = this.waiter;
    if (waiter !== null && this.items.length === 0) {
      this.waiter = null;
      if (this.failure !== null) waiter.reject(this.failure);
      else waiter.resolve(undefined, true);
    }
  }

  next(signal?: AbortSignal): Promise<IteratorResult<T, undefined>> {
    if (this.items.length > 0) {
      const item = this.items.shift() as T;
      if (this.items.length <= LOW_WATER_FRAMES) this.onDrained();
      return Promise.resolve({ value: item, done: false });
    }
    if (this.failure !== null) return Promise.reject(this.failure);
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    if (this.waiter !== null) return Promise.reject(new Error('FrameChannel.next called while another next() is pending'));
    this.onDrained();
    return new Promise<IteratorResult<T, undefined>>((resolve, reject) => {
      const settle = {
        resolve: (value: T | undefined, done: boolean): void => resolve(done ? { value: undefined, done: true } : { value: value as T, done: false }),
        reject,
      };
      if (signal === undefined) {
        this.waiter = settle;
        return;
      }
      if (signal.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = (): void => {
        this.waiter = null;
        reject(abortReason(signal));
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiter = {
        resolve: (value, done) => {
          signal.removeEventListener('abort', onAbort);
          settle.resolve(value, done);
        },
        reject: (error) => {
          signal.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
    });
  }
}

export function abortReason(signal: AbortSignal): RouterError {
  const reason: unknown = signal.reason;
  if (reason instanceof RouterError) return reason;
  if (reason instanceof Error && reason.name === 'TimeoutError') return new RouterError('timeout', 'the deadline passed', { cause: reason });
  return new RouterError('aborted', 'the operation was aborted', { cause: reason });
}

function toBytes(data: Uint8Array | { subarray(): Uint8Array }): Uint8Array {
  return data instanceof Uint8Array ? data : data.subarray();
}

function parseFrame<In>(bytes: Uint8Array, schema: z.ZodType<In> | undefined, protocol: string): In {
  let value: unknown;
  try {
    value = decodeValue(bytes);
  } catch (error) {
    throw new RouterError('protocol_error', `a frame on ${protocol} is not valid msgpack`, { cause: error });
  }
  if (schema === undefined) return value as In;
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw new RouterError('protocol_error', `a frame on ${protocol} does not match its schema: ${parsed.error.message}`, { cause: parsed.error });
  return parsed.data;
}

/** Maps a libp2p stream close error onto a RouterError. */
export function streamError(error: Error, remote: string, protocol: string): RouterError {
  if (error instanceof RouterError) return error;
  if (error.name === 'StreamResetError') return new RouterError('reset', `${remote} reset the ${protocol} stream (it refused us, or its handler failed)`, { cause: error });
  if (error.name === 'TimeoutError') return new RouterError('timeout', `the ${protocol} stream with ${remote} timed out`, { cause: error });
  if (error.name === 'AbortError') return new RouterError('aborted', `the ${protocol} stream with ${remote} was aborted`, { cause: error });
  return new RouterError('closed', `the ${protocol} stream with ${remote} closed: ${error.message}`, { cause: error });
}

/**
 * Waits for the stream's next 'drain' event. Not `stream.onDrain()`: in @libp2p/utils 7.4 it keeps
 * the promise of the first drain forever, so after one drain it resolves at once and a sender is
 * never held back again (a slow reader then makes the writer buffer everything).
 */
function drained(stream: Stream, signal: AbortSignal | undefined): Promise<void> {
  if (!stream.writableNeedsDrain) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const cleanup = (): void => {
      stream.removeEventListener('drain', onDrain);
      stream.removeEventListener('close', onClose);
      signal?.removeEventListener('abort', onAbort);
    };
    const onDrain = (): void => {
      cleanup();
      resolve();
    };
    const onClose = (event: StreamCloseEvent): void => {
      cleanup();
      reject(event.error ?? new Error('the stream closed while a frame waited to be sent'));
    };
    const onAbort = (): void => {
      cleanup();
      reject(signal?.reason);
    };
    stream.addEventListener('drain', onDrain);
    stream.addEventListener('close', onClose);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** A FrameChannel over a libp2p 3 stream (event based: `message`, `end`, `close`; `send` + `onDrain`). */
export class StreamChannel<In = unknown> implements FrameChannel<In> {
  readonly remote: string;
  readonly protocol: string;
  readonly remoteHost: string | null;
  private readonly controller = new AbortController();
  private readonly queue: FrameQueue<In>;
  private readonly decoder: FrameDecoder;
  private readonly maxMessageBytes: number;
  private paused = false;
  private resuming = false;

  constructor(
    private readonly stream: Stream,
    remote: string,
    options: ChannelOptions<In> = {},
  ) {
    this.remote = remote;
    this.protocol = stream.protocol;
    this.remoteHost = options.remoteHost ?? null;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.decoder = new FrameDecoder(this.maxMessageBytes);
    this.queue = new FrameQueue<In>(() => this.resumeIfPaused());
    const schema = options.schema;
    // While paused, the remote may still fill the yamux window (capped at YAMUX_MAX_WINDOW_BYTES by the
    // host); the read buffer must hold that much or libp2p aborts the stream instead of waiting.
    stream.maxReadBufferLength = Math.max(stream.maxReadBufferLength, 2 * YAMUX_MAX_WINDOW_BYTES);

    stream.addEventListener('message', (event) => {
      if (this.queue.done) return;
      try {
        for (const bytes of this.decoder.push(toBytes(event.data))) {
          this.queue.push(parseFrame(bytes, schema, this.protocol));
        }
      } catch (error) {
        const failure = error instanceof RouterError ? error : new RouterError('protocol_error', String(error), { cause: error });
        this.fail(failure);
        stream.abort(failure);
        return;
      }
      // Inside resume() the stream dispatches its buffer before it re-opens yamux's window; pausing
      // then would be undone by that re-opening and let the remote overrun the read buffer, so the
      // pause waits until resume() has returned.
      if (!this.resuming) this.pauseIfFull();
    });
    stream.addEventListener('end', () => {
      // A reset or an abort emits 'end' too, just before the 'close' event that carries its error.
      if (stream.status !== 'reset' && stream.status !== 'aborted') this.finish();
    });
    stream.addEventListener('close', (event) => {
      if (event.error !== undefined) this.fail(streamError(event.error, this.remote, this.protocol));
      else if (stream.readBufferLength === 0) this.finish();
    });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  async next(options: { signal?: AbortSignal } = {}): Promise<In | undefined> {
    return (await this.queue.next(options.signal)).value;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<In> {
    for (;;) {
      const result = await this.queue.next();
      if (result.done === true) return;
      yield result.value;
    }
  }

  async send(value: unknown, options: { signal?: AbortSignal } = {}): Promise<void> {
    const payload = encodeValue(value);
    if (payload.byteLength > this.maxMessageBytes) {
      throw new RouterError('frame_too_large', `a ${payload.byteLength}-byte frame is over the limit of ${this.maxMessageBytes} bytes on ${this.protocol}`);
    }
    if (this.stream.writeStatus !== 'writable') {
      throw new RouterError('closed', `the ${this.protocol} stream with ${this.remote} is no longer writable (${this.stream.writeStatus})`);
    }
    try {
      this.stream.send(frameHeader(payload.byteLength));
      if (!this.stream.send(payload)) await drained(this.stream, options.signal);
    } catch (error) {
      if (options.signal?.aborted === true) throw abortReason(options.signal);
      throw streamError(error instanceof Error ? error : new Error(String(error)), this.remote, this.protocol);
    }
  }

  async close(): Promise<void> {
    if (this.stream.writeStatus !== 'writable') return;
    try {
      await this.stream.close();
    } catch (error) {
      throw streamError(error instanceof Error ? error : new Error(String(error)), this.remote, this.protocol);
    }
  }

  abort(reason?: Error): void {
    const error = reason ?? new RouterError('aborted', `the ${this.protocol} stream with ${this.remote} was abandoned`);
    this.fail(error instanceof RouterError ? error : new RouterError('aborted', error.message, { cause: error }));
    this.stream.abort(error);
  }

  private pauseIfFull(): void {
    if (this.queue.length < HIGH_WATER_FRAMES || this.paused) return;
    try {
      this.stream.pause();
      this.paused = true;
    } catch {
      // the readable end is already closing; nothing more will arrive
    }
  }

  private resumeIfPaused(): void {
    if (!this.paused) return;
    this.paused = false;
    this.resuming = true;
    try {
      this.stream.resume();
    } catch {
      // closed meanwhile
    } finally {
      this.resuming = false;
    }
    this.pauseIfFull();
  }

  private finish(): void {
    if (this.decoder.pendingBytes > 0) {
      this.fail(new RouterError('protocol_error', `the ${this.protocol} stream from ${this.remote} ended inside a frame`));
      return;
    }
    this.queue.end();
  }

  private fail(error: RouterError): void {
    this.queue.end(error);
    if (!this.controller.signal.aborted) this.controller.abort(error);
  }
}

/**
 * Two connected in-process channels, for traffic to this node itself. Values pass by reference after
 * the receiver's schema (if any) parses them, so a self-request behaves like a remote one minus the bytes.
 */
export function createChannelPair<A = unknown, B = unknown>(
  self: string,
  protocol: string,
  options: { schemaA?: z.ZodType<A>; schemaB?: z.ZodType<B>; maxMessageBytes?: number } = {},
): [FrameChannel<A>, FrameChannel<B>] {
  const a = new MemoryChannel<A>(self, protocol, options.schemaA);
  const b = new MemoryChannel<B>(self, protocol, options.schemaB);
  a.peer = b as MemoryChannel<unknown>;
  b.peer = a as MemoryChannel<unknown>;
  return [a, b];
}

class MemoryChannel<In> implements FrameChannel<In> {
  peer: MemoryChannel<unknown> | null = null;
  readonly remoteHost = null;
  private readonly controller = new AbortController();
  readonly queue: FrameQueue<In>;
  private writable = true;
  private drainWaiters: Array<() => void> = [];

  constructor(
    readonly remote: string,
    readonly protocol: string,
    private readonly schema: z.ZodType<In> | undefined,
  ) {
    this.queue = new FrameQueue<In>(() => {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const wake of waiters) wake();
    });
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  async next(options: { signal?: AbortSignal } = {}): Promise<In | undefined> {
    return (await this.queue.next(options.signal)).value;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<In> {
    for (;;) {
      const result = await this.queue.next();
      if (result.done === true) return;
      yield result.value;
    }
  }

  deliver(value: unknown): void {
    if (this.schema === undefined) {
      this.queue.push(value as In);
      return;
    }
    const parsed = this.schema.safeParse(value);
    if (parsed.success) {
      this.queue.push(parsed.data);
      return;
    }
    const error = new RouterError('protocol_error', `a frame on ${this.protocol} does not match its schema: ${parsed.error.message}`);
    this.failBoth(error);
  }

  async send(value: unknown, options: { signal?: AbortSignal } = {}): Promise<void> {
    const peer = this.peer;
    if (!this.writable || peer === null || this.controller.signal.aborted) {
      throw new RouterError('closed', `the in-process ${this.protocol} channel is no longer writable`);
    }
    peer.deliver(value);
    if (peer.queue.length >= HIGH_WATER_FRAMES) {
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => reject(abortReason(options.signal as AbortSignal));
        options.signal?.addEventListener('abort', onAbort, { once: true });
        peer.drainWaiters.push(() => {
          options.signal?.removeEventListener('abort', onAbort);
          resolve();
        });
      });
    }
  }

  close(): Promise<void> {
    if (this.writable) {
      this.writable = false;
      this.peer?.queue.end();
    }
    return Promise.resolve();
  }

  abort(reason?: Error): void {
    const error = reason instanceof RouterError ? reason : new RouterError('reset', `the in-process ${this.protocol} channel was aborted`, { cause: reason });
    this.failBoth(error);
  }

  private failBoth(error: RouterError): void {
    for (const side of [this as MemoryChannel<unknown>, this.peer]) {
      if (side === null) continue;
      side.writable = false;
      side.queue.end(error);
      if (!side.controller.signal.aborted) side.controller.abort(error);
      const waiters = side.drainWaiters;
      side.drainWaiters = [];
      for (const wake of waiters) wake();
    }
  }
}
