import '../polyfill.js';
import type { Connection, Stream } from '@libp2p/interface';
import { z } from 'zod';
import { isShoalError, errorMessage } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { ipOfMultiaddr } from './direct-socket.js';
import { RouterError, knownErrorCode } from './errors.js';
import { DEFAULT_MAX_MESSAGE_BYTES, StreamChannel, abortReason, createChannelPair, type FrameChannel } from './framing.js';

/**
 * Data plane: direct libp2p streams by protocol id, framed (framing.ts), never gossip.
 *
 * - `handle` / `request`: one request frame, one response frame `{ ok: true, value }` or
 *   `{ ok: false, code, message }` (a ShoalError thrown by the handler keeps its code).
 * - `handleStream` / `openStream`: a FrameChannel in each direction, for token streams and bulk bytes.
 * - A request or stream to this node itself never touches the network: `request` calls the handler in
 *   process, `openStream` connects two in-memory channels.
 * Admission (who may open what) is enforced by the host (host.ts) through `Admission`.
 */

export interface RequestContext {
  /** Node id of the remote (Noise-authenticated), or this node's own id for a self request. */
  from: string;
  protocol: string;
  /** Aborted when the caller goes away (stream reset, connection lost, deadline). */
  signal: AbortSignal;
  /** The remote's IP on the stream's connection (see FrameChannel.remoteHost); null in process. */
  remoteHost: string | null;
}

export type RequestHandler<Req, Res> = (request: Req, ctx: RequestContext) => Res | Promise<Res>;
export type ChannelHandler<In> = (channel: FrameChannel<In>, ctx: RequestContext) => void | Promise<void>;

export interface HandleOptions<In> {
  /** Concurrent inbound streams of this protocol per connection (libp2p's limit). Default 32. */
  maxInboundStreams?: number;
  /** Concurrent outbound streams of this protocol per connection. Default 64. */
  maxOutboundStreams?: number;
  /** Largest frame accepted (checked on the length header, before decoding) or sent. Default 1 MiB. */
  maxMessageBytes?: number;
  /** Parses every incoming frame (the request, for `handle`). */
  schema?: z.ZodType<In>;
  /** `handle` only: how long to wait for the request frame once the stream is open. Default 30 s. */
  requestTimeoutMs?: number;
}

export interface RequestOptions<Res> {
  signal?: AbortSignal;
  /** Whole exchange deadline: connect, send, answer. Default 30 s. */
  timeoutMs?: number;
  /** Largest frame sent or accepted in the answer. Default 1 MiB. */
  maxMessageBytes?: number;
  /** Parses the answer's value. */
  schema?: z.ZodType<Res>;
}

export interface OpenStreamOptions<In> {
  signal?: AbortSignal;
  /** Deadline for opening the stream (not for the conversation). Default 10 s. */
  timeoutMs?: number;
  maxMessageBytes?: number;
  schema?: z.ZodType<In>;
}

/** What the data plane needs from the host. */
export interface DataPlaneHost {
  selfId: string;
  log: Logger;
  /** Registers a libp2p handler whose streams already passed admission for `protocol`. */
  register(protocol: string, handler: (stream: Stream, connection: Connection) => void, options: { maxInboundStreams?: number; maxOutboundStreams?: number }): Promise<void>;
  unregister(protocol: string): Promise<void>;
  /**
   * Opens an outbound stream after admission (member check, hello completed); throws a RouterError.
   * `remoteHost` is the peer's IP on the stream's connection, when it is TCP over IP.
   */
  openRaw(peer: string, protocol: string, signal: AbortSignal): Promise<{ stream: Stream; remoteHost: string | null }>;
}

const ResponseEnvelope = z.union([
  z.strictObject({ ok: z.literal(true), value: z.unknown() }),
  z.strictObject({ ok: z.literal(false), code: z.string().max(64), message: z.string().max(4096) }),
]);
type ResponseEnvelope = z.infer<typeof ResponseEnvelope>;

const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
const DEFAULT_OPEN_TIMEOUT_MS = 10_000;

type LocalHandler =
  | { kind: 'request'; handler: RequestHandler<unknown, unknown>; options: HandleOptions<unknown> }
  | { kind: 'stream'; handler: ChannelHandler<unknown>; options: HandleOptions<unknown> };

export class DataPlane {
  private readonly local = new Map<string, LocalHandler>();

  constructor(private readonly host: DataPlaneHost) {}

  protocols(): string[] {
    return [...this.local.keys()];
  }

  async handle<Req, Res>(protocol: string, handler: RequestHandler<Req, Res>, options: HandleOptions<Req> = {}): Promise<void> {
    const entry: LocalHandler = { kind: 'request', handler: handler as RequestHandler<unknown, unknown>, options: options as HandleOptions<unknown> };
    await this.install(protocol, entry);
  }

  async handleStream<In>(protocol: string, handler: ChannelHandler<In>, options: HandleOptions<In> = {}): Promise<void> {
    const entry: LocalHandler = { kind: 'stream', handler: handler as ChannelHandler<unknown>, options: options as HandleOptions<unknown> };
    await this.install(protocol, entry);
  }

  async unhandle(protocol: string): Promise<void> {
    if (!this.local.delete(protocol)) return;
    await this.host.unregister(protocol);
  }

  async request<Res = unknown>(peer: string, protocol: string, message: unknown, options: RequestOptions<Res> = {}): Promise<Res> {
    const signal = deadline(options.signal, options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS);
    if (peer === this.host.selfId) return this.requestSelf(protocol, message, options, signal);
    const maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const { stream } = await this.host.openRaw(peer, protocol, signal);
    const channel = new StreamChannel<ResponseEnvelope>(stream, peer, { maxMessageBytes, schema: ResponseEnvelope });
    try {
      await channel.send(message, { signal });
      await channel.close();
      const answer = await channel.next({ signal });
      if (answer === undefined) throw new RouterError('closed', `${peer} closed ${protocol} without answering`);
      return this.unwrap(answer, peer, protocol, options.schema);
    } catch (error) {
      const failure = signal.aborted ? abortReason(signal) : error;
      channel.abort(failure instanceof Error ? failure : undefined);
      throw failure;
    }
  }

  async openStream<In = unknown>(peer: string, protocol: string, options: OpenStreamOptions<In> = {}): Promise<FrameChannel<In>> {
    const signal = deadline(options.signal, options.timeoutMs ?? DEFAULT_OPEN_TIMEOUT_MS);
    if (peer === this.host.selfId) return this.openSelf(protocol, options);
    const { stream, remoteHost } = await this.host.openRaw(peer, protocol, signal);
    const channelOptions = options.schema === undefined
      ? { maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES, remoteHost }
      : { maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES, schema: options.schema, remoteHost };
    return new StreamChannel<In>(stream, peer, channelOptions);
  }

  private async install(protocol: string, entry: LocalHandler): Promise<void> {
    if (this.local.has(protocol)) throw new RouterError('protocol_error', `${protocol} is handled already`);
    this.local.set(protocol, entry);
    const { maxInboundStreams, maxOutboundStreams } = entry.options;
    await this.host.register(protocol, (stream, connection) => this.serveRemote(protocol, stream, connection), {
      ...(maxInboundStreams === undefined ? {} : { maxInboundStreams }),
      ...(maxOutboundStreams === undefined ? {} : { maxOutboundStreams }),
    });
  }

  private serveRemote(protocol: string, stream: Stream, connection: Connection): void {
    const entry = this.local.get(protocol);
    const remote = connection.remotePeer.toString();
    if (entry === undefined) {
      stream.abort(new RouterError('no_handler', `${protocol} is no longer handled`));
      return;
    }
    const { options } = entry;
    const remoteHost = ipOfMultiaddr(connection.remoteAddr);
    const channel = new StreamChannel<unknown>(stream, remote, {
      maxMessageBytes: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
      ...(options.schema === undefined || entry.kind === 'request' ? {} : { schema: options.schema }),
      remoteHost,
    });
    const ctx: RequestContext = { from: remote, protocol, signal: channel.signal, remoteHost };
    void this.serve(entry, channel, ctx);
  }

  private async serve(entry: LocalHandler, channel: FrameChannel<unknown>, ctx: RequestContext): Promise<void> {
    try {
      if (entry.kind === 'stream') {
        await entry.handler(channel, ctx);
        await channel.close();
        return;
      }
      await serveRequest(channel, entry.handler, entry.options, ctx);
    } catch (error) {
      this.host.log.debug({ err: error, protocol: ctx.protocol, from: ctx.from }, 'data-plane handler ended with an error');
      channel.abort(error instanceof Error ? error : undefined);
    }
  }

  private unwrap<Res>(answer: ResponseEnvelope, peer: string, protocol: string, schema: z.ZodType<Res> | undefined): Res {
    if (!answer.ok) {
      throw new RouterError('remote_error', `${peer} answered ${protocol} with ${answer.code}: ${answer.message}`, { code: knownErrorCode(answer.code) });
    }
    if (schema === undefined) return answer.value as Res;
    const parsed = schema.safeParse(answer.value);
    if (!parsed.success) throw new RouterError('protocol_error', `${peer}'s answer on ${protocol} does not match its schema: ${parsed.error.message}`, { cause: parsed.error });
    return parsed.data;
  }

  private async requestSelf<Res>(protocol: string, message: unknown, options: RequestOptions<Res>, signal: AbortSignal): Promise<Res> {
    const entry = this.local.get(protocol);
    if (entry === undefined) throw new RouterError('no_handler', `this node does not handle ${protocol}`);
    const ctx: RequestContext = { from: this.host.selfId, protocol, signal, remoteHost: null };
    if (entry.kind === 'request') {
      const schema = entry.options.schema;
      let request: unknown = message;
      if (schema !== undefined) {
        const parsed = schema.safeParse(message);
        if (!parsed.success) throw new RouterError('protocol_error', `a request on ${protocol} does not match its schema: ${parsed.error.message}`, { cause: parsed.error });
        request = parsed.data;
      }
      const value = await raceAbort(Promise.resolve(entry.handler(request, ctx)), signal);
      return this.unwrap({ ok: true, value }, this.host.selfId, protocol, options.schema);
    }
    // A request to a stream handler: run the request shape over an in-process channel pair.
    const [mine, theirs] = createChannelPair<unknown, unknown>(this.host.selfId, protocol, entry.options.schema === undefined ? {} : { schemaB: entry.options.schema });
    void this.serve(entry, theirs, { ...ctx, signal: theirs.signal });
    await mine.send(message, { signal });
    await mine.close();
    const answer = await mine.next({ signal });
    if (answer === undefined) throw new RouterError('closed', `the in-process ${protocol} handler closed without answering`);
    return answer as Res;
  }

  private openSelf<In>(protocol: string, options: OpenStreamOptions<In>): FrameChannel<In> {
    const entry = this.local.get(protocol);
    if (entry === undefined) throw new RouterError('no_handler', `this node does not handle ${protocol}`);
    const [mine, theirs] = createChannelPair<In, unknown>(this.host.selfId, protocol, {
      ...(options.schema === undefined ? {} : { schemaA: options.schema }),
      ...(entry.options.schema === undefined || entry.kind === 'request' ? {} : { schemaB: entry.options.schema }),
    });
    void this.serve(entry, theirs, { from: this.host.selfId, protocol, signal: theirs.signal, remoteHost: null });
    return mine;
  }
}

/** The request/response shape on a channel: one frame in, one envelope out. */
async function serveRequest(channel: FrameChannel<unknown>, handler: RequestHandler<unknown, unknown>, options: HandleOptions<unknown>, ctx: RequestContext): Promise<void> {
  const wait = AbortSignal.any([ctx.signal, AbortSignal.timeout(options.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS)]);
  const raw = await channel.next({ signal: wait });
  if (raw === undefined) throw new RouterError('protocol_error', `${ctx.from} opened ${ctx.protocol} and sent no request`);
  let answer: ResponseEnvelope;
  let request: unknown = raw;
  const schema = options.schema;
  const parsed = schema === undefined ? null : schema.safeParse(raw);
  if (parsed !== null && !parsed.success) {
    answer = { ok: false, code: 'BAD_REQUEST', message: `the request does not match ${ctx.protocol}'s schema: ${parsed.error.message}`.slice(0, 4096) };
  } else {
    if (parsed !== null) request = parsed.data;
    try {
      answer = { ok: true, value: await handler(request, ctx) };
    } catch (error) {
      answer = isShoalError(error)
        ? { ok: false, code: error.code, message: error.message.slice(0, 4096) }
        : { ok: false, code: 'INTERNAL', message: `the ${ctx.protocol} handler failed: ${errorMessage(error)}`.slice(0, 4096) };
    }
  }
  await channel.send(answer, { signal: ctx.signal });
  await channel.close();
}

function deadline(signal: AbortSignal | undefined, timeoutMs: number): AbortSignal {
  const timer = AbortSignal.timeout(timeoutMs);
  return signal === undefined ? timer : AbortSignal.any([signal, timer]);
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(abortReason(signal));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
