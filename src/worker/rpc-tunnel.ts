import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { z } from 'zod';
import { ShoalError, errorMessage } from '../common/errors.js';
import { InstanceId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import { knownErrorCode } from '../router/errors.js';
import {
  DirectAnswerFrame,
  DirectDeclineFrame,
  DirectHost,
  DirectOfferFrame,
  RouterError,
  isDirectReply,
  offerDirect,
  takeDirect,
  type FrameChannel,
  type Router,
} from '../router/index.js';

/*
 * `/shoal/rpc-tunnel/1`: a pooled split's driver reaches a donor's `ggml-rpc-server` through libp2p.
 * The RPC server listens on 127.0.0.1 only (its protocol has no authentication: anyone who reaches it
 * can read and write the donor's memory for the model), so a stranger on the LAN cannot; members reach
 * it through this tunnel, which the router admits for members only and Noise encrypts.
 *
 * Driver: a TCP listener on 127.0.0.1:<free port> that llama-server is pointed at (`--rpc`). Each
 * accepted connection opens its own stream to the donor, sends `{type:'open', instanceId}`, then raw
 * byte frames both ways. Donor: connects a socket to 127.0.0.1:<the instance's RPC port> per stream
 * and pipes. TCP half-close is carried (a socket's end closes the stream's writing side and back).
 *
 * Direct sockets (router/direct-socket.ts): the open frame names the IP the driver reached the donor
 * at; the donor offers a one-shot TLS-PSK socket there, keyed over this stream, and when the driver
 * connects the bytes go through it instead of the stream (llama.cpp's RPC makes a round trip per layer
 * hand-off per token, and a libp2p stream costs ~0.6 ms per round trip where TLS costs ~0.1 ms). The
 * stream stays open as the socket's lifetime. When the socket cannot be reached (a firewall, NAT),
 * both sides keep to the stream's frames.
 */

export const RPC_TUNNEL_PROTOCOL = '/shoal/rpc-tunnel/1';
/** Bytes per data frame; a larger socket read is cut into frames of this size. */
export const RPC_TUNNEL_CHUNK_BYTES = 256 * 1024;
/** A chunk plus its msgpack envelope, or an error frame. */
export const RPC_TUNNEL_MAX_MESSAGE_BYTES = RPC_TUNNEL_CHUNK_BYTES + 8 * 1024;
/**
 * Tunnel streams per connection, each way. llama.cpp's RPC client keeps one socket per server
 * endpoint, so a driver needs a handful; this bounds what one member can make a donor connect.
 */
export const RPC_TUNNEL_MAX_STREAMS_PER_CONNECTION = 16;
/** Driver: connecting to the donor and opening one stream. */
export const RPC_TUNNEL_OPEN_TIMEOUT_MS = 2000;
/** Donor: waiting for the open frame, and connecting to the local RPC server. */
export const RPC_TUNNEL_OPEN_FRAME_TIMEOUT_MS = 10_000;
export const RPC_TUNNEL_CONNECT_TIMEOUT_MS = 2000;
const MAX_ERROR_MESSAGE_CHARS = 4096;

const Bytes = z.instanceof(Uint8Array);
/** `direct`: the IP the driver reached the donor at, to ask for a direct socket there. */
const OpenFrame = z.strictObject({ type: z.literal('open'), instanceId: InstanceId, direct: DirectHost.optional() });
const TunnelErrorFrame = z.strictObject({ type: z.literal('error'), code: z.string().min(1).max(64), message: z.string().max(MAX_ERROR_MESSAGE_CHARS) });
/** Driver -> donor: the open frame first, the answer to a direct offer, then bytes. */
export const DriverFrame = z.union([OpenFrame, DirectAnswerFrame, Bytes]);
export type DriverFrame = z.infer<typeof DriverFrame>;
/**
 * Donor -> driver: a direct offer or decline when asked, then bytes; or one error frame (the donor
 * could not reach the RPC server) and the end.
 */
export const DonorFrame = z.union([Bytes, TunnelErrorFrame, DirectOfferFrame, DirectDeclineFrame]);
export type DonorFrame = z.infer<typeof DonorFrame>;

/** Why a pipe ended abnormally: the tunnel stream (`remote`) or the local socket (`local`). */
class PipeError extends Error {
  constructor(
    readonly side: 'remote' | 'local',
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
    this.name = 'PipeError';
  }
}

/**
 * Pipes bytes between a socket and a tunnel stream until both directions have ended (resolves) or
 * either fails (rejects with a PipeError after destroying the socket and aborting the stream).
 * Backpressure both ways: the socket is paused while a frame is being sent, and the next frame is
 * read only once the socket has taken the previous one.
 */
function pipe(socket: Socket, channel: FrameChannel<unknown>, isData: (frame: unknown) => frame is Uint8Array, describe: (frame: unknown) => string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let upstreamDone = false;
    let downstreamDone = false;
    let settled = false;

    const fail = (error: PipeError): void => {
      if (settled) return;
      settled = true;
      cleanup();
      reset(socket);
      if (!channel.signal.aborted) channel.abort(new RouterError('aborted', error.message, { cause: error }));
      reject(error);
    };
    const maybeDone = (): void => {
      if (settled || !upstreamDone || !downstreamDone) return;
      settled = true;
      cleanup();
      resolve();
    };
    const onChannelAbort = (): void => {
      const reason: unknown = channel.signal.reason;
      fail(new PipeError('remote', `the tunnel stream failed: ${errorMessage(reason)}`, { cause: reason }));
    };
    const onSocketError = (error: Error): void => fail(new PipeError('local', `the socket failed: ${error.message}`, { cause: error }));
    const onSocketClose = (): void => {
      if (!upstreamDone || !downstreamDone) fail(new PipeError('local', 'the socket closed before the tunnel finished'));
    };
    const cleanup = (): void => {
      channel.signal.removeEventListener('abort', onChannelAbort);
      socket.off('data', onData);
      socket.off('end', onEnd);
    };

    // socket -> stream
    let sending: Promise<void> = Promise.resolve();
    const sendChunk = async (chunk: Buffer): Promise<void> => {
      for (let at = 0; at < chunk.byteLength; at += RPC_TUNNEL_CHUNK_BYTES) {
        await channel.send(chunk.subarray(at, at + RPC_TUNNEL_CHUNK_BYTES));
      }
    };
    const onData = (chunk: Buffer): void => {
      socket.pause();
      sending = sending
        .then(() => sendChunk(chunk))
        .then(() => {
          if (!settled) socket.resume();
        });
      sending.catch((error: unknown) => fail(new PipeError('remote', `sending into the tunnel failed: ${errorMessage(error)}`, { cause: error })));
    };
    const onEnd = (): void => {
      sending
        .then(() => channel.close())
        .then(() => {
          upstreamDone = true;
          maybeDone();
        })
        .catch((error: unknown) => fail(new PipeError('remote', `closing the tunnel stream failed: ${errorMessage(error)}`, { cause: error })));
    };

    // stream -> socket
    const downstream = async (): Promise<void> => {
      for (;;) {
        const frame = await channel.next();
        if (settled) return;
        if (frame === undefined) break;
        if (!isData(frame)) throw new PipeError('remote', describe(frame));
        if (!socket.write(frame)) await drained(socket);
      }
      await new Promise<void>((done) => socket.end(done));
      downstreamDone = true;
      maybeDone();
    };

    channel.signal.addEventListener('abort', onChannelAbort, { once: true });
    socket.on('error', onSocketError);
    socket.on('close', onSocketClose);
    socket.on('data', onData);
    socket.on('end', onEnd);
    if (channel.signal.aborted) onChannelAbort();
    else if (socket.destroyed) onSocketClose();
    else socket.resume();
    downstream().catch((error: unknown) => {
      fail(error instanceof PipeError ? error : new PipeError('remote', `reading the tunnel stream failed: ${errorMessage(error)}`, { cause: error }));
    });
  });
}

/**
 * Pipes a local socket and a direct socket into each other until both have closed (resolves) or
 * either fails or the tunnel stream (their lifetime) is aborted (rejects with a PipeError after
 * destroying both). An end on one side ends the other, as TCP does.
 */
function splice(local: Socket, direct: TLSSocket, channel: FrameChannel<unknown>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    let open = 2;
    const fail = (error: PipeError): void => {
      if (settled) return;
      settled = true;
      channel.signal.removeEventListener('abort', onAbort);
      reset(local);
      direct.destroy();
      reject(error);
    };
    const onAbort = (): void => {
      const reason: unknown = channel.signal.reason;
      fail(new PipeError('remote', `the tunnel stream failed: ${errorMessage(reason)}`, { cause: reason }));
    };
    const onClose = (): void => {
      open -= 1;
      if (open > 0 || settled) return;
      settled = true;
      channel.signal.removeEventListener('abort', onAbort);
      resolve();
    };
    local.on('error', (error) => fail(new PipeError('local', `the socket failed: ${error.message}`, { cause: error })));
    direct.on('error', (error) => fail(new PipeError('remote', `the direct socket failed: ${error.message}`, { cause: error })));
    local.on('close', onClose);
    direct.on('close', (hadError) => {
      if (hadError) fail(new PipeError('remote', 'the direct socket closed with an error'));
      else onClose();
    });
    channel.signal.addEventListener('abort', onAbort, { once: true });
    if (channel.signal.aborted) return onAbort();
    local.pipe(direct);
    direct.pipe(local);
    local.resume();
  });
}

/**
 * Ends a socket with a TCP reset rather than a FIN, so the program at the other end (llama-server,
 * ggml-rpc-server) sees a failed connection, not a finished one.
 *
 * Not while its own FIN is still queued (ended, not finished): libuv refuses that reset (EINVAL),
 * Node 20 then never closes the handle, and the process spins at 100 % CPU when it exits. The other
 * end has been told "finished" already; such a socket is destroyed plainly.
 */
function reset(socket: Socket): void {
  if (socket.destroyed) return;
  if (socket.writableEnded && !socket.writableFinished) socket.destroy();
  else socket.resetAndDestroy();
}

function drained(socket: Socket): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onDrain = (): void => {
      socket.off('close', onClose);
      resolve();
    };
    const onClose = (): void => {
      socket.off('drain', onDrain);
      reject(new PipeError('local', 'the socket closed while data was waiting to be written'));
    };
    socket.once('drain', onDrain);
    socket.once('close', onClose);
  });
}

function isBytes(frame: unknown): frame is Uint8Array {
  return frame instanceof Uint8Array;
}


export interface ServeRpcTunnelOptions {
  log?: Logger;
  /** Offer direct sockets to drivers that ask. Default true. */
  direct?: boolean;
}

/**
 * Donor side: registers `/shoal/rpc-tunnel/1`. `lookup` gives the 127.0.0.1 port of the instance's
 * RPC server on this node, or null when it has none. Every node registers it (the driver's outbound
 * stream limit is read from its own registration).
 */
export async function serveRpcTunnel(router: Router, lookup: (instanceId: InstanceId) => number | null, options: ServeRpcTunnelOptions = {}): Promise<void> {
  const log = options.log;
  await router.handleStream<DriverFrame>(
    RPC_TUNNEL_PROTOCOL,
    async (channel, ctx) => {
      const first = await channel.next({ signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(RPC_TUNNEL_OPEN_FRAME_TIMEOUT_MS)]) });
      if (first === undefined) return;
      if (first instanceof Uint8Array || first.type !== 'open') {
        await channel.send({ type: 'error', code: 'BAD_REQUEST', message: `the first frame on ${RPC_TUNNEL_PROTOCOL} must be the open frame` });
        return;
      }
      const port = lookup(first.instanceId);
      if (port === null) {
        await channel.send({ type: 'error', code: 'INSTANCE_LOST', message: `instance ${first.instanceId} has no RPC server on node ${router.nodeId}` });
        return;
      }
      let socket: Socket;
      try {
        socket = await connectLocal(port, AbortSignal.any([ctx.signal, AbortSignal.timeout(RPC_TUNNEL_CONNECT_TIMEOUT_MS)]));
      } catch (error) {
        const message = `could not connect to the RPC server of instance ${first.instanceId} at 127.0.0.1:${port} on node ${router.nodeId}: ${errorMessage(error)}`;
        log?.warn({ instanceId: first.instanceId, port, from: ctx.from, err: error }, message);
        await channel.send({ type: 'error', code: 'INSTANCE_LOST', message: message.slice(0, MAX_ERROR_MESSAGE_CHARS) });
        return;
      }
      try {
        const direct = first.direct === undefined ? null : await offerDirect(channel as FrameChannel<unknown>, first.direct, { enabled: options.direct ?? true, signal: ctx.signal });
        if (direct !== null) await splice(socket, direct, channel as FrameChannel<unknown>);
        else await pipe(socket, channel as FrameChannel<unknown>, isBytes, () => `${ctx.from} sent an unexpected frame on ${RPC_TUNNEL_PROTOCOL}`);
      } catch (error) {
        reset(socket);
        log?.debug({ instanceId: first.instanceId, from: ctx.from, err: error }, 'an RPC tunnel connection ended abnormally');
        throw error;
      }
    },
    {
      schema: DriverFrame,
      maxMessageBytes: RPC_TUNNEL_MAX_MESSAGE_BYTES,
      maxInboundStreams: RPC_TUNNEL_MAX_STREAMS_PER_CONNECTION,
      maxOutboundStreams: RPC_TUNNEL_MAX_STREAMS_PER_CONNECTION,
    },
  );
}

function connectLocal(port: number, signal: AbortSignal): Promise<Socket> {
  return new Promise<Socket>((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port, allowHalfOpen: true, noDelay: true });
    // Until the pipe takes over: read nothing, so the first bytes wait for it.
    socket.pause();
    const onAbort = (): void => {
      socket.destroy();
      reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => {
      signal.removeEventListener('abort', onAbort);
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', (error) => {
      signal.removeEventListener('abort', onAbort);
      reject(error);
    });
  });
}

export interface RpcTunnel extends AsyncDisposable {
  /** The 127.0.0.1 port to give llama-server (`--rpc 127.0.0.1:<port>`). */
  readonly port: number;
  /**
   * Calls `listener` once when the tunnel breaks: the donor's connection is lost, a tunnel stream
   * is reset, the donor cannot reach its RPC server, or a stream cannot be opened. By then every
   * piped socket is destroyed and the listener is closed. Called at once (asynchronously) if the
   * tunnel is already broken. Returns an unsubscribe function.
   */
  onBroken(listener: (error: ShoalError) => void): () => void;
  /** The reason it broke, or null. */
  readonly broken: ShoalError | null;
  /** Connections tunnelled so far, by how their bytes went: a direct socket or the libp2p stream. */
  readonly connections: { readonly direct: number; readonly stream: number };
  /** Stops listening and destroys every piped socket and stream. Idempotent; never fires onBroken. */
  close(): Promise<void>;
}

export interface OpenRpcTunnelOptions {
  log?: Logger;
  /** Ask the donor for direct sockets (falling back to the stream when one cannot be reached). Default true. */
  direct?: boolean;
  /** Per-stream open deadline. Default 2000 ms. */
  openTimeoutMs?: number;
}

/**
 * Driver side: listens on 127.0.0.1:<free port> and tunnels each connection to `instanceId`'s RPC
 * server on `donorNodeId`. A broken tunnel stays broken (a donor's RPC server drops everything a
 * client had allocated when its connection goes): re-place the instance.
 */
export async function openRpcTunnel(router: Router, donorNodeId: string, instanceId: string, options: OpenRpcTunnelOptions = {}): Promise<RpcTunnel> {
  const log = options.log;
  const openTimeoutMs = options.openTimeoutMs ?? RPC_TUNNEL_OPEN_TIMEOUT_MS;
  const where = `instance ${instanceId}'s RPC server on node ${donorNodeId}`;
  const sockets = new Set<Socket>();
  const channels = new Set<FrameChannel<DonorFrame>>();
  const listeners = new Set<(error: ShoalError) => void>();
  let broken: ShoalError | null = null;
  let closed = false;
  const connections = { direct: 0, stream: 0 };

  const server: Server = createServer({ allowHalfOpen: true, noDelay: true, pauseOnConnect: true });
  const shutDown = (): void => {
    server.close();
    for (const socket of sockets) reset(socket);
    for (const channel of channels) channel.abort(new RouterError('aborted', `the tunnel to ${where} closed`));
    sockets.clear();
    channels.clear();
  };
  const breakWith = (message: string, cause?: unknown): void => {
    if (broken !== null || closed) return;
    broken = new ShoalError('INSTANCE_LOST', `the RPC tunnel to ${where} broke: ${message}`, cause === undefined ? {} : { cause });
    log?.warn({ donor: donorNodeId, instanceId }, broken.message);
    stopWatching();
    shutDown();
    const error = broken;
    for (const listener of [...listeners]) {
      try {
        listener(error);
      } catch (listenerError) {
        log?.error({ err: listenerError }, 'an RPC tunnel onBroken listener threw');
      }
    }
    listeners.clear();
  };
  const stopWatching = router.onPeerDown((peer) => {
    if (peer === donorNodeId) breakWith(`the connection to node ${donorNodeId} was lost`);
  });

  const tunnel = async (socket: Socket): Promise<void> => {
    let channel: FrameChannel<DonorFrame>;
    try {
      channel = await router.openStream(donorNodeId, RPC_TUNNEL_PROTOCOL, {
        timeoutMs: openTimeoutMs,
        maxMessageBytes: RPC_TUNNEL_MAX_MESSAGE_BYTES,
        schema: DonorFrame,
      });
    } catch (error) {
      reset(socket);
      breakWith(`could not open a tunnel stream: ${errorMessage(error)}`, error);
      return;
    }
    if (broken !== null || closed || socket.destroyed) {
      channel.abort(new RouterError('aborted', `the tunnel to ${where} is closed`));
      reset(socket);
      return;
    }
    channels.add(channel);
    const describe = (frame: unknown): string => {
      const parsed = TunnelErrorFrame.safeParse(frame);
      if (parsed.success) return `node ${donorNodeId} answered ${knownErrorCode(parsed.data.code)}: ${parsed.data.message}`;
      return `node ${donorNodeId} sent an unexpected frame`;
    };
    try {
      const ask = (options.direct ?? true) && channel.remoteHost !== null;
      await channel.send({ type: 'open', instanceId, ...(ask ? { direct: channel.remoteHost } : {}) });
      const direct = ask ? await directOf(channel, describe) : null;
      if (direct !== null) {
        connections.direct += 1;
        await splice(socket, direct, channel as FrameChannel<unknown>);
        await channel.close().catch(() => undefined);
        channel.abort();
      } else {
        connections.stream += 1;
        await pipe(socket, channel as FrameChannel<unknown>, isBytes, describe);
      }
    } catch (error) {
      reset(socket);
      channel.abort(new RouterError('aborted', `the tunnel to ${where} failed`));
      // llama-server dropping its own connection is its business; the donor's side failing is ours.
      if (!(error instanceof PipeError && error.side === 'local')) breakWith(errorMessage(error), error);
      else log?.debug({ donor: donorNodeId, instanceId, err: error }, 'llama-server closed an RPC tunnel connection abruptly');
    } finally {
      channels.delete(channel);
      sockets.delete(socket);
    }
  };

  /** The donor's reply to an open frame that asked for a direct socket: the socket, or null to keep to the stream. */
  const directOf = async (channel: FrameChannel<DonorFrame>, describe: (frame: unknown) => string): Promise<TLSSocket | null> => {
    const reply = await channel.next({ signal: AbortSignal.timeout(RPC_TUNNEL_OPEN_FRAME_TIMEOUT_MS) });
    if (reply === undefined) throw new PipeError('remote', `node ${donorNodeId} closed the tunnel stream without answering`);
    if (!isDirectReply(reply)) throw new PipeError('remote', describe(reply));
    return takeDirect(channel as FrameChannel<unknown>, reply, {
      signal: AbortSignal.timeout(RPC_TUNNEL_OPEN_FRAME_TIMEOUT_MS),
      onUnreachable: (error) => log?.info({ donor: donorNodeId, instanceId, err: error }, `no direct socket to node ${donorNodeId}: tunnelling over the libp2p stream`),
    });
  };

  server.on('connection', (socket: Socket) => {
    if (broken !== null || closed) {
      reset(socket);
      return;
    }
    sockets.add(socket);
    socket.on('error', () => {
      // reported by the pipe (or the socket was never piped and is being destroyed)
    });
    void tunnel(socket);
  });

  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: '127.0.0.1', port: 0 }, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    stopWatching();
    throw new ShoalError('INTERNAL', `could not listen on 127.0.0.1 for the RPC tunnel to ${where}: ${errorMessage(error)}`, { cause: error });
  }
  server.on('error', (error) => log?.warn({ err: error }, `the RPC tunnel listener for ${where} failed`));
  const port = (server.address() as AddressInfo).port;

  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    stopWatching();
    listeners.clear();
    const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
    shutDown();
    await stopped;
  };

  return {
    port,
    get broken() {
      return broken;
    },
    get connections() {
      return { ...connections };
    },
    onBroken(listener) {
      if (broken !== null) {
        const error = broken;
        queueMicrotask(() => listener(error));
        return () => {};
      }
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
