import '../polyfill.js';
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { connect as tlsConnect, createServer as createTlsServer, type ConnectionOptions, type TLSSocket } from 'node:tls';
import type { Multiaddr } from '@multiformats/multiaddr';
import { z } from 'zod';
import { RouterError } from './errors.js';
import type { FrameChannel } from './framing.js';

/*
 * Direct sockets: a one-shot TLS connection between two members, keyed over a data-plane stream.
 *
 * A libp2p stream carries every byte through JS Noise and yamux in both event loops: about 0.6 ms per
 * round trip for a 64-byte message on loopback and ~200 MB/s of bulk, where a TLS socket (OpenSSL)
 * relayed by the same two processes measured 0.11 ms and 1.5 GB/s. The RPC tunnel (one round trip
 * per layer hand-off per token) and model copies (gigabytes) therefore ask for a direct socket:
 *
 *   1. The opener sends, on the protocol's own stream, the IP it reached the other node at.
 *   2. The server, if that IP is one of its interfaces, listens there on a free port for one TLS 1.2
 *      connection with a fresh 32-byte pre-shared key (PSK-AES128-GCM-SHA256) and a random identity,
 *      and sends `{ type: 'direct-offer', port, identity, key }` on the stream (Noise-encrypted, to a
 *      member the router admitted). Only that member knows the key: anyone else who connects fails the
 *      handshake; a connection from another IP than the stream's is refused before it.
 *   3. The opener connects and answers `{ type: 'direct-answer', connected }` on the stream; both
 *      sides then use the socket, or both keep to the stream (a firewall, NAT, a routed network).
 *
 * The stream stays open beside the socket as its lifetime: the router's member checks and connection
 * monitor still govern it. The key is used once and travels only inside Noise, so its secrecy is the
 * stream's (Noise's ephemeral keys give it forward secrecy).
 */

/** One TLS version and cipher: PSK-only suites need no certificate; AES-GCM runs on AES-NI. */
const DIRECT_TLS = { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: 'PSK-AES128-GCM-SHA256' } as const;
export const DIRECT_KEY_BYTES = 32;
/** The server waits this long for the one connection it offered. */
export const DIRECT_ACCEPT_TIMEOUT_MS = 5000;
/** The opener gives up connecting (TCP and handshake) after this and keeps to the stream. */
export const DIRECT_CONNECT_TIMEOUT_MS = 2000;
/** Failed handshakes (a wrong key, a stranger) after which an offer is withdrawn. */
export const DIRECT_MAX_FAILED_HANDSHAKES = 8;

const Port = z.number().int().min(1).max(65535);
const Identity = z.string().regex(/^[0-9a-f]{32}$/);
const Key = z.instanceof(Uint8Array).refine((key) => key.byteLength === DIRECT_KEY_BYTES, { message: `a direct key is ${DIRECT_KEY_BYTES} bytes` });
/** An IP literal (no zone index), as the opener saw the server's address. */
export const DirectHost = z
  .string()
  .max(64)
  .refine((host) => isIP(host) !== 0 && !host.includes('%'), { message: 'not an IP address without a zone index' });

export const DirectOfferFrame = z.strictObject({ type: z.literal('direct-offer'), port: Port, identity: Identity, key: Key });
export type DirectOfferFrame = z.infer<typeof DirectOfferFrame>;
export const DirectAnswerFrame = z.strictObject({ type: z.literal('direct-answer'), connected: z.boolean() });
export type DirectAnswerFrame = z.infer<typeof DirectAnswerFrame>;

/** The IP of a TCP multiaddr (`/ip4/…/tcp/…`, `/ip6/…/tcp/…`), or null for anything else. */
export function ipOfMultiaddr(addr: Multiaddr): string | null {
  const [first, second] = addr.getComponents();
  if (first === undefined || second?.name !== 'tcp') return null;
  if (first.name !== 'ip4' && first.name !== 'ip6') return null;
  return first.value ?? null;
}

/** `::ffff:10.0.0.1` → `10.0.0.1`, so an IPv4 peer compares equal however the socket reports it. */
export function normalizeIp(ip: string): string {
  return ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;
}

/** Whether `ip` is an address of one of this machine's interfaces (where a listener may bind). */
export function isLocalAddress(ip: string): boolean {
  const want = normalizeIp(ip);
  for (const addrs of Object.values(networkInterfaces())) {
    for (const addr of addrs ?? []) {
      if (normalizeIp(addr.address) === want) return true;
    }
  }
  return false;
}

export interface DirectListener extends AsyncDisposable {
  readonly offer: DirectOfferFrame;
  /**
   * The first socket from the expected peer that completed the handshake. Rejects with a RouterError
   * (`timeout`, `aborted`, `refused` after too many failed handshakes) once the offer is withdrawn.
   */
  readonly accepted: Promise<TLSSocket>;
  /** Withdraws the offer; a socket already accepted is destroyed unless it was taken with `take`. */
  close(): void;
  /** Waits for the accepted socket (up to `timeoutMs`) and keeps it open past `close`. */
  take(timeoutMs: number): Promise<TLSSocket>;
}

export interface ListenDirectOptions {
  /** The local IP to listen on: where the opener reached this node. */
  host: string;
  /** The IP of the member the stream belongs to; a connection from elsewhere is dropped. */
  peerHost: string;
  acceptTimeoutMs?: number;
  signal?: AbortSignal;
}

/** Server side: listens for one TLS-PSK connection on `host`; null when `host` is not this machine's. */
export async function listenDirect(options: ListenDirectOptions): Promise<DirectListener | null> {
  if (isIP(options.host) === 0 || !isLocalAddress(options.host)) return null;
  const peerHost = normalizeIp(options.peerHost);
  const identity = randomBytes(16).toString('hex');
  const key = randomBytes(DIRECT_KEY_BYTES);
  let failed = 0;
  let taken = false;
  let settled = false;
  let socket: TLSSocket | null = null;
  const { promise: accepted, resolve, reject } = Promise.withResolvers<TLSSocket>();
  accepted.catch(() => undefined);

  const server = createTlsServer({
    ...DIRECT_TLS,
    // Half-close is carried (the RPC tunnel relays TCP, where one side may end and still read).
    allowHalfOpen: true,
    handshakeTimeout: DIRECT_CONNECT_TIMEOUT_MS,
    pskCallback: (_socket, offered) => {
      const given = Buffer.from(offered, 'utf8');
      const want = Buffer.from(identity, 'utf8');
      return given.byteLength === want.byteLength && timingSafeEqual(given, want) ? key : null;
    },
  });
  const finish = (error: RouterError | null, won: TLSSocket | null): void => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    server.close();
    if (won !== null) {
      socket = won;
      resolve(won);
    } else {
      reject(error ?? new RouterError('aborted', 'the direct offer was withdrawn'));
    }
  };
  server.on('connection', (raw) => {
    // Before the handshake: only the stream's peer may even try the key.
    if (settled || normalizeIp(raw.remoteAddress ?? '') !== peerHost) raw.destroy();
  });
  server.on('secureConnection', (tls: TLSSocket) => {
    if (settled) {
      tls.destroy();
      return;
    }
    tls.setNoDelay(true);
    // Until its taker listens: an error in between must not be an unhandled 'error' event.
    tls.on('error', () => {});
    finish(null, tls);
  });
  server.on('tlsClientError', () => {
    failed += 1;
    if (failed >= DIRECT_MAX_FAILED_HANDSHAKES) finish(new RouterError('refused', `${failed} failed handshakes on a direct offer: withdrawn`), null);
  });
  server.on('error', (error) => finish(new RouterError('closed', `the direct listener failed: ${error.message}`, { cause: error }), null));

  const acceptTimeoutMs = options.acceptTimeoutMs ?? DIRECT_ACCEPT_TIMEOUT_MS;
  const timer = setTimeout(() => finish(new RouterError('timeout', `no direct connection within ${acceptTimeoutMs} ms`), null), acceptTimeoutMs);
  const onAbort = (): void => finish(new RouterError('aborted', 'the direct offer was aborted'), null);
  options.signal?.addEventListener('abort', onAbort, { once: true });

  try {
    await new Promise<void>((ok, fail) => {
      server.once('error', fail);
      server.listen({ host: options.host, port: 0 }, () => {
        server.off('error', fail);
        ok();
      });
    });
  } catch {
    // An address this machine has but cannot listen on (being removed, a scope): keep to the stream.
    finish(new RouterError('closed', 'could not listen'), null);
    return null;
  }
  const address = server.address();
  if (address === null || typeof address === 'string') {
    finish(new RouterError('closed', 'the direct listener has no port'), null);
    return null;
  }

  const close = (): void => {
    finish(new RouterError('aborted', 'the direct offer was withdrawn'), null);
    if (!taken && socket !== null) socket.destroy();
  };
  return {
    offer: { type: 'direct-offer', port: address.port, identity, key },
    accepted,
    close,
    async take(timeoutMs: number): Promise<TLSSocket> {
      const timeout = setTimeout(() => finish(new RouterError('timeout', `the direct connection did not arrive within ${timeoutMs} ms`), null), timeoutMs);
      try {
        const won = await accepted;
        taken = true;
        return counted(won);
      } finally {
        clearTimeout(timeout);
      }
    },
    [Symbol.asyncDispose]: async () => close(),
  };
}

/**
 * This process's direct sockets (both ends, every protocol that uses them): open now and connected
 * since start, for `GET /diagnostics/node`. A node is one process, so these are the node's.
 */
const directCounts = { open: 0, connected: 0 };

function counted(socket: TLSSocket): TLSSocket {
  directCounts.open += 1;
  directCounts.connected += 1;
  socket.once('close', () => {
    directCounts.open -= 1;
  });
  return socket;
}

export function directSocketStats(): { open: number; connected: number } {
  return { ...directCounts };
}

export interface ConnectDirectOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/**
 * Opener side: connects to an offer at `host` (the server's IP); rejects with a RouterError. The
 * caller owns the socket from then on and must listen for its 'error' events.
 */
export function connectDirect(host: string, offer: DirectOfferFrame, options: ConnectDirectOptions = {}): Promise<TLSSocket> {
  const timeoutMs = options.timeoutMs ?? DIRECT_CONNECT_TIMEOUT_MS;
  return new Promise<TLSSocket>((resolve, reject) => {
    // Half-close is carried, as on the server. (`allowHalfOpen` is a documented net.Socket option that
    // tls.connect passes on but its types omit. Not a socket made here and handed over with `socket`:
    // Node 20 then could leave that TCP handle unclosed and spin at exit.)
    const connectOptions: ConnectionOptions & { allowHalfOpen: boolean } = {
      ...DIRECT_TLS,
      allowHalfOpen: true,
      host,
      port: offer.port,
      pskCallback: () => ({ psk: Buffer.from(offer.key), identity: offer.identity }),
      // PSK authenticates the server (only it has the key); there is no certificate to check.
      checkServerIdentity: () => undefined,
    };
    const socket = tlsConnect(connectOptions);
    const fail = (error: RouterError): void => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      reject(error);
    };
    const onAbort = (): void => fail(new RouterError('aborted', 'the direct connection was aborted'));
    const timer = setTimeout(() => fail(new RouterError('timeout', `could not connect directly to ${host}:${offer.port} within ${timeoutMs} ms`)), timeoutMs);
    if (options.signal?.aborted === true) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const onError = (error: Error): void => fail(new RouterError('unreachable', `could not connect directly to ${host}:${offer.port}: ${error.message}`, { cause: error }));
    socket.once('error', onError);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      socket.off('error', onError);
      // Until the caller listens (takeDirect still sends its answer): never an unhandled 'error'.
      socket.on('error', () => {});
      socket.setNoDelay(true);
      resolve(counted(socket));
    });
  });
}

// ---- negotiation on a protocol's own stream ------------------------------------------------------

/** The server's answer when it will not offer (the IP is not its own, or it keeps to streams). */
export const DirectDeclineFrame = z.strictObject({ type: z.literal('direct-decline') });
export type DirectDeclineFrame = z.infer<typeof DirectDeclineFrame>;
/** What a server sends after a request that asked for a direct socket. */
export type DirectReply = DirectOfferFrame | DirectDeclineFrame;

export function isDirectReply(frame: unknown): frame is DirectReply {
  const type = (frame as { type?: unknown } | null)?.type;
  return type === 'direct-offer' || type === 'direct-decline';
}

/**
 * Server side, once the request asked for a direct socket at `requestedHost`: offers one (or declines)
 * and waits for the opener's answer. Returns the connected socket, or null when both keep to the stream.
 * Throws when the stream fails or the opener breaks the protocol.
 */
export async function offerDirect(channel: FrameChannel<unknown>, requestedHost: string, options: { enabled: boolean; signal: AbortSignal }): Promise<TLSSocket | null> {
  const listener = options.enabled && channel.remoteHost !== null ? await listenDirect({ host: requestedHost, peerHost: channel.remoteHost, signal: options.signal }) : null;
  if (listener === null) {
    await channel.send({ type: 'direct-decline' } satisfies DirectDeclineFrame, { signal: options.signal });
    return null;
  }
  try {
    await channel.send(listener.offer, { signal: options.signal });
    const answer = await channel.next({ signal: AbortSignal.any([options.signal, AbortSignal.timeout(DIRECT_ACCEPT_TIMEOUT_MS + DIRECT_CONNECT_TIMEOUT_MS)]) });
    const parsed = DirectAnswerFrame.safeParse(answer);
    if (!parsed.success) throw new RouterError('protocol_error', `${channel.remote} answered a direct offer on ${channel.protocol} with something else`);
    if (!parsed.data.connected) return null;
    return await listener.take(DIRECT_CONNECT_TIMEOUT_MS);
  } finally {
    listener.close();
  }
}

/**
 * Opener side, with the server's reply to a request that asked for a direct socket: connects to an
 * offer and tells the server whether it did. Returns the socket, or null to keep to the stream
 * (declined, or the offer could not be reached: `onUnreachable` hears why).
 */
export async function takeDirect(channel: FrameChannel<unknown>, reply: DirectReply, options: { signal: AbortSignal; onUnreachable?: (error: unknown) => void }): Promise<TLSSocket | null> {
  if (reply.type === 'direct-decline') return null;
  let socket: TLSSocket | null = null;
  if (channel.remoteHost !== null) {
    try {
      socket = await connectDirect(channel.remoteHost, reply, { signal: options.signal });
    } catch (error) {
      if (options.signal.aborted) throw error;
      options.onUnreachable?.(error);
    }
  }
  try {
    await channel.send({ type: 'direct-answer', connected: socket !== null } satisfies DirectAnswerFrame, { signal: options.signal });
  } catch (error) {
    socket?.destroy();
    throw error;
  }
  return socket;
}
