import '../polyfill.js';
import { bootstrap } from '@libp2p/bootstrap';
import { gossipsub, type GossipSub } from '@libp2p/gossipsub';
import { identify, type Identify } from '@libp2p/identify';
import type { Connection, PeerId, PeerInfo, PrivateKey, Stream, StreamHandler, StreamHandlerOptions, Topology } from '@libp2p/interface';
import type { Registrar } from '@libp2p/interface-internal';
import { mdns } from '@libp2p/mdns';
import { noise } from '@libp2p/noise';
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id';
import { ping, type Ping } from '@libp2p/ping';
import { tcp } from '@libp2p/tcp';
import { yamux } from '@libp2p/yamux';
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import { createLibp2p, type Libp2p } from 'libp2p';
import type { z } from 'zod';
import { createLogger, type Logger } from '../common/log.js';
import { ipOfMultiaddr } from './direct-socket.js';
import { RouterError } from './errors.js';
import { StreamChannel, YAMUX_MAX_WINDOW_BYTES, type FrameChannel } from './framing.js';
import {
  HELLO_MAX_BYTES,
  HELLO_PROTOCOL,
  Hello,
  HelloProbe,
  NON_MEMBER_PROTOCOLS,
  WIRE_VERSION,
  fingerprintOfPeer,
  wireMismatchLine,
  type PeerHello,
} from './hello.js';
import { DataPlane, type ChannelHandler, type HandleOptions, type OpenStreamOptions, type RequestHandler, type RequestOptions } from './streams.js';
import { TopicRegistry, type PublishOptions, type TelemetryQueueStats, type Topic, type TopicDefinition, type TopicStats } from './topics.js';

/*
 * Admission: how a peer outside the roster is kept to `/shoal/hello/1` and `/shoal/invite/1`.
 *
 * 1. Connection gater (`denyDialPeer`, `denyInbound/OutboundEncryptedConnection`): after Noise has
 *    proven the remote's peer id, a peer that is neither `isMember` nor `allowUnknown` is cut off
 *    before the muxer is negotiated. (No `@libp2p/pnet`: it breaks bulk streams; see STACK-NOTES.)
 * 2. Inbound stream guard. Every stream handler goes through `guardHandler`: our own data-plane and
 *    hello handlers directly, and the identify and gossipsub services because their factories get a
 *    components object whose `registrar.handle` wraps the handler. A stream on any protocol other
 *    than hello/invite (and libp2p's ping, which only echoes 32 random bytes and keeps the connection
 *    monitor working) is aborted before the service sees a byte unless the remote `isMember` AND this
 *    connection's hello exchange finished with our wire version. So a non-member cannot identify us
 *    (learn our protocols and addresses), cannot open gossipsub's `/meshsub/*` streams (no
 *    subscriptions, no messages, no control traffic), and cannot open any data-plane protocol.
 *    (libp2p 3's `node.use()` middleware is NOT used: in 3.3.11 the inbound path pushes the handler
 *    onto the registered middleware array itself, so every later stream runs every earlier handler.)
 * 3. Outbound guard. Gossipsub only opens streams to peers the registrar announces through its
 *    topology after identify; `registrar.register` is wrapped the same way, so the topology never
 *    hears of a non-member (even one that advertises `/meshsub` in identify) or of a peer whose hello
 *    has not completed. Our data plane refuses `request`/`openStream` to non-members before dialling.
 * 4. Gossip validators (topics.ts): the propagation source and the signed author (`msg.from`, checked
 *    by gossipsub's StrictSign policy) must both be members, else Reject and `dropped_non_member`.
 * 5. Peer score: `appSpecificScore` is -1000 for non-members (x weight 10, far below the graylist
 *    threshold of -80), so gossipsub also ignores their RPCs and leaves them out of mesh, gossip and
 *    flood publishing. Defence in depth; 2 and 3 already keep them out.
 * 6. Roster changes (`updateRoster`, and a sweep on every redial tick): a peer that stopped being a
 *    member has all its connections closed; a peer that became a member on an open connection gets
 *    identify re-run, which is what tells the registrar (and so gossipsub) about it.
 */

export const DEFAULT_P2P_PORT = 52601;
export const MDNS_SERVICE_TAG = '_shoal._udp.local';
const PING_PROTOCOL = '/ipfs/ping/1.0.0';
/** Pings in flight per connection each way (timeout / interval, rounded up, plus one). */
const PING_STREAMS_MAX = 12;
const MISMATCH_BACKOFF_MS = 30_000;
const DISCOVERY_REDIAL_MS = 10_000;
const DISCOVERY_TIEBREAK_MS = 1500;

export type RouterServices = { identify: Identify; ping: Ping; pubsub: GossipSub };

export interface RouterOptions {
  /** The node's Ed25519 key (the identity helper loads it from the data dir). */
  privateKey: PrivateKey;
  /** Shown to other nodes in the hello (host name by default in the caller). */
  name: string;
  /** The cluster this node belongs to, read at every hello. Default: none. */
  clusterId?: () => string | null;
  /** Roster check; called often, must be cheap and synchronous. */
  isMember: (nodeId: string) => boolean;
  /** Whether a non-member may connect at all (for hello/invite). Default: everyone may. */
  allowUnknown?: (nodeId: string) => boolean;
  /** Listen host. Default 0.0.0.0. */
  host?: string;
  /** Listen port. Default 52601; 0 picks a free one. */
  p2pPort?: number;
  /** mDNS discovery (service tag `_shoal._udp.local`). Default true. Never in tests outside a netns. */
  mdns?: boolean;
  mdnsIntervalMs?: number;
  /** Multiaddrs (with /p2p/<id>) to dial at start. */
  bootstrap?: string[];
  /** Dial discovered (mDNS/bootstrap) peers so their hello is heard. Default true. */
  dialOnDiscovery?: boolean;
  /** How often members that are not connected are redialled. Default 2000. */
  redialIntervalMs?: number;
  /** Connection monitor: ping every connection this often... Default 1000. */
  pingIntervalMs?: number;
  /**
   * ...and abort it when a ping takes longer than this. Default 10 000: a ping queues behind whatever
   * the connection carries, and a bulk transfer (the RPC tunnel uploading a model's layers, a model copy)
   * on a busy machine delays it by seconds; a 1 s timeout cut such connections mid-transfer. A dead
   * process's connection closes at once anyway, and requests notice a silent node by their own keepalives.
   */
  pingTimeoutMs?: number;
  /** A connection whose hello has not completed by then is closed. Default 5000. */
  helloTimeoutMs?: number;
  /** Entries in the telemetry last-write-wins queue. Default 1024. */
  telemetryQueueMax?: number;
  /** Largest gossipsub RPC frame accepted; bigger ones make gossipsub drop the peer, so keep it far above every topic's maxBytes. Default 4 MiB. */
  maxGossipBytes?: number;
  /** Inbound connections per second per remote host before libp2p refuses them. Default 20. */
  inboundConnectionThreshold?: number;
  /** For tests of version refusal only. Default WIRE_VERSION. */
  wireVersion?: number;
  log?: Logger;
}

export interface RosterEntry {
  nodeId: string;
  addrs: readonly string[];
}

export interface ConnectedPeer {
  nodeId: string;
  member: boolean;
  hello: PeerHello | null;
  connections: number;
  addrs: string[];
}

export interface DiscoveredPeer {
  nodeId: string;
  addrs: string[];
}

export interface RouterStats {
  topics: Record<string, TopicStats>;
  telemetry: TelemetryQueueStats;
  /** Inbound streams refused by admission, by protocol. */
  refusedStreams: Record<string, number>;
  hello: { completed: number; mismatched: number; invalid: number; timedOut: number };
  connections: number;
}

export interface Router extends AsyncDisposable {
  readonly nodeId: string;
  readonly fingerprint: string;
  readonly wireVersion: number;
  /** The libp2p node, for diagnostics and tests. Do not open streams on it directly: use the data plane. */
  readonly libp2p: Libp2p<RouterServices>;
  /** Addresses this node listens on, without /p2p. */
  addrs(): string[];

  registerTopic<S extends z.ZodType>(def: TopicDefinition<S>): Topic<S>;
  unregisterTopic(name: string): void;
  publish(topic: string | { name: string }, message: unknown, options?: PublishOptions): Promise<{ recipients: number }>;

  handle<Req = unknown, Res = unknown>(protocol: string, handler: RequestHandler<Req, Res>, options?: HandleOptions<Req>): Promise<void>;
  handleStream<In = unknown>(protocol: string, handler: ChannelHandler<In>, options?: HandleOptions<In>): Promise<void>;
  unhandle(protocol: string): Promise<void>;
  request<Res = unknown>(nodeId: string, protocol: string, message: unknown, options?: RequestOptions<Res>): Promise<Res>;
  openStream<In = unknown>(nodeId: string, protocol: string, options?: OpenStreamOptions<In>): Promise<FrameChannel<In>>;

  /** Dials a multiaddr (with /p2p/<id>) or a known node id and resolves with its verified hello. */
  dial(target: string, options?: { signal?: AbortSignal }): Promise<PeerHello>;
  hangUp(nodeId: string): Promise<void>;
  isConnected(nodeId: string): boolean;
  connectedPeers(): ConnectedPeer[];
  /** The latest verified hello from this node, if any. */
  helloOf(nodeId: string): PeerHello | undefined;
  /** Members (with last-known addresses) to keep connected; also re-applies admission to open connections. */
  updateRoster(members: readonly RosterEntry[]): void;

  onHello(listener: (hello: PeerHello) => void): () => void;
  onPeerUp(listener: (nodeId: string) => void): () => void;
  onPeerDown(listener: (nodeId: string) => void): () => void;
  onDiscovery(listener: (peer: DiscoveredPeer) => void): () => void;

  stats(): RouterStats;
  stop(): Promise<void>;
}

interface ConnState {
  conn: Connection;
  hello: PromiseWithResolvers<PeerHello>;
  settled: boolean;
  info: PeerHello | null;
  timer: NodeJS.Timeout;
  /** The roster's verdict the last time admission was applied to this connection. */
  member: boolean;
  promoting: boolean;
}

class Listeners<T> {
  private readonly set = new Set<(value: T) => void>();
  constructor(private readonly log: Logger, private readonly what: string) {}
  add(listener: (value: T) => void): () => void {
    this.set.add(listener);
    return () => this.set.delete(listener);
  }
  emit(value: T): void {
    for (const listener of this.set) {
      try {
        listener(value);
      } catch (error) {
        this.log.error({ err: error }, `an ${this.what} listener threw`);
      }
    }
  }
}

/** Per-peer bookkeeping is kept for at most this many peers (a busy LAN announces many non-members). */
const MAX_TRACKED_PEERS = 1024;

/** Evicts the oldest entry when a map of per-peer facts is full, and returns the map for a `set`. */
function capped<K, V>(map: Map<K, V>): Map<K, V> {
  while (map.size >= MAX_TRACKED_PEERS) {
    const oldest = map.keys().next();
    if (oldest.done === true) break;
    map.delete(oldest.value);
  }
  return map;
}

function stripP2p(addr: string): string {
  const at = addr.indexOf('/p2p/');
  return at === -1 ? addr : addr.slice(0, at);
}

function sleepUnref(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms).unref());
}

function isLoopback(addr: string): boolean {
  return addr.startsWith('/ip4/127.') || addr.startsWith('/ip6/::1/');
}

function errorOf(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}

export async function createRouter(options: RouterOptions): Promise<Router> {
  const log = options.log ?? createLogger().child({ component: 'router' });
  const privateKey = options.privateKey;
  const selfPeer = peerIdFromPrivateKey(privateKey);
  const selfId = selfPeer.toString();
  const fingerprint = fingerprintOfPeer(selfPeer);
  if (fingerprint === null) throw new RouterError('protocol_error', 'the node key must be Ed25519');
  const wireVersion = options.wireVersion ?? WIRE_VERSION;
  const isMember = (nodeId: string): boolean => nodeId !== selfId && options.isMember(nodeId);
  const allowUnknown = options.allowUnknown ?? ((): boolean => true);
  const helloTimeoutMs = options.helloTimeoutMs ?? 5000;
  const clusterId = options.clusterId ?? ((): string | null => null);

  const conns = new Map<string, ConnState>();
  const lastHello = new Map<string, PeerHello>();
  const knownAddrs = new Map<string, Set<string>>();
  const roster = new Map<string, Set<string>>();
  const dialing = new Set<string>();
  const mismatchUntil = new Map<string, number>();
  const discoveryDialedAt = new Map<string, number>();
  const refusedStreams: Record<string, number> = {};
  const helloCounters = { completed: 0, mismatched: 0, invalid: 0, timedOut: 0 };
  const helloListeners = new Listeners<PeerHello>(log, 'onHello');
  const upListeners = new Listeners<string>(log, 'onPeerUp');
  const downListeners = new Listeners<string>(log, 'onPeerDown');
  const discoveryListeners = new Listeners<DiscoveredPeer>(log, 'onDiscovery');
  let stopped = false;
  let node: Libp2p<RouterServices> | null = null;

  const remember = (nodeId: string, addrs: Iterable<string>): void => {
    let set = knownAddrs.get(nodeId);
    if (set === undefined) {
      set = new Set();
      capped(knownAddrs).set(nodeId, set);
    }
    for (const addr of addrs) {
      if (set.size >= 64) break;
      set.add(stripP2p(addr));
    }
  };

  const closeConnection = (conn: Connection, why: string, delayMs = 0): void => {
    const run = (): void => {
      if (conn.status !== 'open') return;
      log.debug({ peer: conn.remotePeer.toString(), why }, 'closing connection');
      conn.close().catch((error: unknown) => conn.abort(errorOf(error)));
    };
    if (delayMs > 0) setTimeout(run, delayMs).unref();
    else run();
  };

  const stateOf = (conn: Connection): ConnState => {
    const st = conns.get(conn.id);
    if (st !== undefined) return st;
    const hello = Promise.withResolvers<PeerHello>();
    hello.promise.catch(() => {});
    const peer = conn.remotePeer.toString();
    if (conn.status !== 'open') {
      // Asked about a connection that already closed (its 'connection:close' has passed): never store it.
      hello.reject(new RouterError('closed', `the connection to ${peer} is closed`));
      return { conn, hello, settled: true, info: null, member: false, promoting: false, timer: setTimeout(() => {}, 0) };
    }
    const created: ConnState = {
      conn,
      hello,
      settled: false,
      info: null,
      member: isMember(peer),
      promoting: false,
      timer: setTimeout(() => {
        if (created.settled) return;
        helloCounters.timedOut++;
        const error = new RouterError('timeout', `peer ${peer} did not complete the hello exchange within ${helloTimeoutMs} ms`);
        log.warn({ peer }, error.message);
        settle(created, error);
        closeConnection(conn, 'hello timeout');
      }, helloTimeoutMs),
    };
    created.timer.unref();
    conns.set(conn.id, created);
    return created;
  };

  const settle = (st: ConnState, outcome: PeerHello | Error): void => {
    if (st.settled) return;
    st.settled = true;
    clearTimeout(st.timer);
    if (outcome instanceof Error) st.hello.reject(outcome);
    else st.hello.resolve(outcome);
  };

  const waitHello = (conn: Connection): Promise<PeerHello> => stateOf(conn).hello.promise;

  /** Verifies a hello against the Noise-proven peer id; settles the connection's hello state. */
  const acceptHello = (conn: Connection, raw: unknown): void => {
    const st = stateOf(conn);
    const peer = conn.remotePeer.toString();
    const probe = HelloProbe.safeParse(raw);
    if (!probe.success) {
      helloCounters.invalid++;
      const error = new RouterError('protocol_error', `peer ${peer} sent a hello without a wire version`);
      if (!st.settled) log.warn({ peer }, error.message);
      settle(st, error);
      closeConnection(conn, 'invalid hello', 200);
      return;
    }
    if (probe.data.wireVersion !== wireVersion) {
      const line = wireMismatchLine(peer, probe.data.wireVersion, wireVersion);
      if (!st.settled) {
        helloCounters.mismatched++;
        log.warn({ peer, theirs: probe.data.wireVersion, ours: wireVersion }, line);
      }
      capped(mismatchUntil).set(peer, Date.now() + MISMATCH_BACKOFF_MS);
      settle(st, new RouterError('refused', line));
      // Give our own hello (sent or about to be sent) time to reach them, so they log it too.
      closeConnection(conn, 'wire version mismatch', 250);
      return;
    }
    const parsed = Hello.safeParse(raw);
    let problem: string | null = null;
    if (!parsed.success) problem = `peer ${peer} sent an invalid hello: ${parsed.error.message}`;
    else if (parsed.data.nodeId !== peer) problem = `peer ${peer} sent a hello claiming to be ${parsed.data.nodeId}`;
    else if (parsed.data.fingerprint !== fingerprintOfPeer(conn.remotePeer)) problem = `peer ${peer} sent a hello with a fingerprint that is not its key's`;
    if (problem !== null || !parsed.success) {
      helloCounters.invalid++;
      if (!st.settled) log.warn({ peer }, problem ?? 'invalid hello');
      settle(st, new RouterError('protocol_error', problem ?? 'invalid hello'));
      closeConnection(conn, 'invalid hello', 200);
      return;
    }
    if (st.settled) return; // the other direction's hello already decided this connection
    const hello = parsed.data;
    const viaLoopback = isLoopback(conn.remoteAddr.toString());
    const addrs = new Set(hello.addrs.map(stripP2p).filter((a) => viaLoopback || !isLoopback(a)));
    if (conn.direction === 'outbound') addrs.add(stripP2p(conn.remoteAddr.toString()));
    const info: PeerHello = {
      nodeId: peer,
      name: hello.name,
      fingerprint: fingerprintOfPeer(conn.remotePeer) ?? hello.fingerprint,
      clusterId: hello.clusterId,
      wireVersion: hello.wireVersion,
      addrs: [...addrs],
      member: isMember(peer),
      direction: conn.direction,
    };
    remember(peer, info.addrs);
    capped(lastHello).set(peer, info);
    st.info = info;
    helloCounters.completed++;
    settle(st, info);
    helloListeners.emit(info);
  };

  const ownHello = (): Hello => ({
    type: 'hello',
    wireVersion,
    nodeId: selfId,
    name: options.name.slice(0, 256),
    fingerprint,
    clusterId: clusterId(),
    addrs: selfAddrs().slice(0, 32),
  });

  const selfAddrs = (): string[] => (node === null ? [] : [...new Set(node.getMultiaddrs().map((ma) => stripP2p(ma.toString())))]);

  /** The hello we start on every new connection (the remote starts its own towards us as well). */
  const startHello = async (conn: Connection): Promise<void> => {
    const peer = conn.remotePeer.toString();
    const signal = AbortSignal.timeout(helloTimeoutMs);
    let channel: StreamChannel | null = null;
    try {
      const stream = await conn.newStream(HELLO_PROTOCOL, { signal });
      channel = new StreamChannel(stream, peer, { maxMessageBytes: HELLO_MAX_BYTES });
      await channel.send(ownHello(), { signal });
      await channel.close();
      const reply = await channel.next({ signal });
      if (reply !== undefined) acceptHello(conn, reply);
    } catch (error) {
      channel?.abort(errorOf(error));
      log.debug({ peer, err: error }, 'outbound hello failed');
    }
  };

  const serveHello = async (stream: Stream, conn: Connection): Promise<void> => {
    const peer = conn.remotePeer.toString();
    const channel = new StreamChannel(stream, peer, { maxMessageBytes: HELLO_MAX_BYTES });
    try {
      const raw = await channel.next({ signal: AbortSignal.timeout(helloTimeoutMs) });
      await channel.send(ownHello());
      await channel.close();
      if (raw !== undefined) acceptHello(conn, raw);
    } catch (error) {
      channel.abort(errorOf(error));
      log.debug({ peer, err: error }, 'inbound hello failed');
    }
  };

  /** Throws a RouterError when `conn`'s remote may not use `protocol` (see "Admission" above). */
  const admitStream = async (protocol: string, conn: Connection): Promise<void> => {
    const peer = conn.remotePeer.toString();
    const refuse = (why: string): never => {
      refusedStreams[protocol] = (refusedStreams[protocol] ?? 0) + 1;
      throw new RouterError('refused', `${peer} may not open ${protocol}: ${why}`);
    };
    if (protocol === PING_PROTOCOL) return;
    if (NON_MEMBER_PROTOCOLS.includes(protocol)) {
      if (!isMember(peer) && !allowUnknown(peer)) refuse('it is not admitted');
      if (protocol === HELLO_PROTOCOL) return;
      // invite: anyone admitted to connect, but only once the wire versions are known to match
      try {
        await waitHello(conn);
      } catch (error) {
        refuse(`its hello failed (${errorOf(error).message})`);
      }
      return;
    }
    if (!isMember(peer)) refuse('it is not a member');
    try {
      await waitHello(conn);
    } catch (error) {
      refuse(`its hello failed (${errorOf(error).message})`);
    }
    if (!isMember(peer)) refuse('it is no longer a member');
  };

  const guardHandler = (protocol: string, handler: StreamHandler): StreamHandler => {
    if (protocol === PING_PROTOCOL) return handler;
    return (stream, conn) => {
      admitStream(protocol, conn).then(
        () => {
          try {
            Promise.resolve(handler(stream, conn)).catch((error: unknown) => stream.abort(errorOf(error)));
          } catch (error) {
            stream.abort(errorOf(error));
          }
        },
        (error: unknown) => {
          log.debug({ peer: conn.remotePeer.toString(), protocol, err: error }, 'refused an inbound stream');
          stream.abort(errorOf(error));
        },
      );
    };
  };

  const guardTopology = (topology: Topology): Topology => ({
    filter: topology.filter,
    notifyOnLimitedConnection: topology.notifyOnLimitedConnection,
    onConnect: async (peerId: PeerId, conn: Connection): Promise<void> => {
      const peer = peerId.toString();
      let admitted = isMember(peer);
      if (admitted) {
        try {
          await waitHello(conn);
        } catch {
          admitted = false;
        }
      }
      if (!admitted || !isMember(peer) || conn.status !== 'open') {
        topology.filter?.remove(peerId);
        return;
      }
      await topology.onConnect?.(peerId, conn);
    },
    onDisconnect: (peerId: PeerId) => topology.onDisconnect?.(peerId),
  });

  /** Gives a service factory a registrar whose handlers and topologies pass admission first. */
  const guarded = <C extends { registrar: Registrar }, S>(factory: (components: C) => S) => (components: C): S => {
    const real = components.registrar;
    const registrar = new Proxy(real, {
      get(target, prop) {
        if (prop === 'handle') {
          return (protocol: string, handler: StreamHandler, handlerOptions?: StreamHandlerOptions) => target.handle(protocol, guardHandler(protocol, handler), handlerOptions);
        }
        if (prop === 'register') return (protocol: string, topology: Topology) => target.register(protocol, guardTopology(topology));
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const wrapped = new Proxy(components, {
      get(target, prop) {
        return prop === 'registrar' ? registrar : Reflect.get(target, prop);
      },
    });
    return factory(wrapped);
  };

  const admitsConnection = (peerId: PeerId): boolean => {
    if (stopped) return false;
    const peer = peerId.toString();
    return isMember(peer) || allowUnknown(peer);
  };

  const listenHost = options.host ?? '0.0.0.0';
  const listen = `/${listenHost.includes(':') ? 'ip6' : 'ip4'}/${listenHost}/tcp/${options.p2pPort ?? DEFAULT_P2P_PORT}`;
  const peerDiscovery = [];
  if (options.mdns ?? true) peerDiscovery.push(mdns({ serviceTag: MDNS_SERVICE_TAG, interval: options.mdnsIntervalMs ?? 5000 }));
  if ((options.bootstrap ?? []).length > 0) peerDiscovery.push(bootstrap({ list: [...(options.bootstrap ?? [])], timeout: 100 }));

  const libp2p = await createLibp2p<RouterServices>({
    start: false,
    privateKey,
    addresses: { listen: [listen] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    // A paused reader stops granting window; the remote can still send one window's worth, which
    // must fit the read buffer (framing.ts raises it to twice this on data-plane streams).
    streamMuxers: [yamux({ streamOptions: { maxStreamWindowSize: YAMUX_MAX_WINDOW_BYTES } })],
    peerDiscovery,
    connectionGater: {
      denyDialPeer: (peerId) => !admitsConnection(peerId),
      denyInboundEncryptedConnection: (peerId) => !admitsConnection(peerId),
      denyOutboundEncryptedConnection: (peerId) => !admitsConnection(peerId),
    },
    connectionManager: { inboundConnectionThreshold: options.inboundConnectionThreshold ?? 20 },
    connectionMonitor: {
      pingInterval: options.pingIntervalMs ?? 1000,
      pingTimeout: { minTimeout: options.pingTimeoutMs ?? 10_000, maxTimeout: options.pingTimeoutMs ?? 10_000 },
      abortConnectionOnPingFailure: true,
    },
    services: {
      identify: guarded(identify({ timeout: helloTimeoutMs + 2000 })),
      // With a ping timeout longer than its interval, pings overlap: allow as many as can be in flight.
      ping: ping({ maxOutboundStreams: PING_STREAMS_MAX, maxInboundStreams: PING_STREAMS_MAX }),
      pubsub: guarded(
        gossipsub({
          allowPublishToZeroTopicPeers: true,
          fallbackToFloodsub: false,
          emitSelf: false,
          // In-order processing per sender stream: control messages are consumed in the order sent.
          awaitRpcHandler: true,
          awaitRpcMessageHandler: true,
          globalSignaturePolicy: 'StrictSign',
          maxInboundDataLength: options.maxGossipBytes ?? 4 * 1024 * 1024,
          scoreParams: {
            appSpecificScore: (peer: string) => (isMember(peer) ? 0 : -1000),
            // Everyone may sit behind one address (tests on loopback, NAT); the roster decides, not the IP.
            IPColocationFactorWeight: 0,
          },
        }),
      ),
    },
  });
  node = libp2p;

  const topics = new TopicRegistry({
    pubsub: libp2p.services.pubsub,
    isMember: (peer) => isMember(peer.toString()),
    log,
    telemetryQueueMax: options.telemetryQueueMax ?? 1024,
  });

  const openRaw = async (peer: string, protocol: string, signal: AbortSignal): Promise<{ stream: Stream; remoteHost: string | null }> => {
    if (!NON_MEMBER_PROTOCOLS.includes(protocol) && !isMember(peer)) {
      throw new RouterError('refused', `${peer} is not a member: ${protocol} is for members only`);
    }
    let conn: Connection;
    try {
      conn = await libp2p.dial(peerIdFromString(peer), { signal });
    } catch (error) {
      if (signal.aborted) throw new RouterError(signalReason(signal), `could not reach ${peer} in time`, { cause: error });
      throw new RouterError('unreachable', `could not reach ${peer}: ${errorOf(error).message}`, { cause: error });
    }
    if (protocol !== HELLO_PROTOCOL) {
      try {
        await raceSignal(waitHello(conn), signal);
      } catch (error) {
        if (error instanceof RouterError && (error.reason === 'timeout' || error.reason === 'aborted')) throw error;
        throw new RouterError('refused', `${peer}'s hello failed: ${errorOf(error).message}`, { cause: error });
      }
    }
    try {
      return { stream: await conn.newStream(protocol, { signal }), remoteHost: ipOfMultiaddr(conn.remoteAddr) };
    } catch (error) {
      const e = errorOf(error);
      if (signal.aborted) throw new RouterError(signalReason(signal), `opening ${protocol} to ${peer} timed out`, { cause: e });
      if (e.name === 'UnsupportedProtocolError') throw new RouterError('no_handler', `${peer} does not handle ${protocol}`, { cause: e });
      throw new RouterError('unreachable', `could not open ${protocol} to ${peer}: ${e.message}`, { cause: e });
    }
  };

  const dataPlane = new DataPlane({
    selfId,
    log,
    openRaw,
    register: (protocol, handler, handlerOptions) => libp2p.handle(protocol, guardHandler(protocol, handler), handlerOptions),
    unregister: (protocol) => libp2p.unhandle(protocol),
  });

  /** Re-runs identify so the registrar tells gossipsub about a peer that just became a member. */
  const promote = async (st: ConnState): Promise<void> => {
    if (st.promoting) return;
    st.promoting = true;
    try {
      await st.hello.promise;
      for (let attempt = 0; attempt < 3 && st.conn.status === 'open' && !stopped; attempt++) {
        try {
          await libp2p.services.identify.identify(st.conn);
          return;
        } catch (error) {
          log.debug({ peer: st.conn.remotePeer.toString(), err: error }, 'identify after admission failed; retrying');
          await new Promise((resolve) => setTimeout(resolve, 500).unref());
        }
      }
    } catch {
      // hello failed: the connection is being closed anyway
    } finally {
      st.promoting = false;
    }
  };

  const reevaluate = (): void => {
    for (const st of conns.values()) {
      if (st.conn.status !== 'open') continue;
      const peer = st.conn.remotePeer.toString();
      const member = isMember(peer);
      if (!member && st.member) {
        log.info({ peer }, 'closing the connection of a node that is no longer a member');
        st.member = false;
        closeConnection(st.conn, 'removed from the roster');
        continue;
      }
      if (!member && !allowUnknown(peer)) {
        closeConnection(st.conn, 'not admitted');
        continue;
      }
      if (member && !st.member) {
        st.member = true;
        void promote(st);
      }
    }
  };

  const dialPeer = async (nodeId: string, addrs: Iterable<string>, signal: AbortSignal): Promise<Connection> => {
    const peerId = peerIdFromString(nodeId);
    const multiaddrs: Multiaddr[] = [];
    for (const addr of addrs) {
      try {
        multiaddrs.push(multiaddr(stripP2p(addr)));
      } catch {
        // an unparsable address from a roster or a hello: skip it
      }
    }
    if (multiaddrs.length > 0) await libp2p.peerStore.merge(peerId, { multiaddrs });
    return libp2p.dial(peerId, { signal });
  };

  const redialTick = (): void => {
    if (stopped) return;
    reevaluate();
    const now = Date.now();
    for (const [nodeId, addrs] of roster) {
      if (!isMember(nodeId) || dialing.has(nodeId)) continue;
      if ((mismatchUntil.get(nodeId) ?? 0) > now) continue;
      if (libp2p.getConnections(peerIdFromString(nodeId)).length > 0) continue;
      const all = new Set([...addrs, ...(knownAddrs.get(nodeId) ?? [])]);
      if (all.size === 0) continue;
      dialing.add(nodeId);
      dialPeer(nodeId, all, AbortSignal.timeout(Math.max(5000, redialIntervalMs * 2)))
        .then(() => log.debug({ peer: nodeId }, 'redialled a member'))
        .catch((error: unknown) => log.debug({ peer: nodeId, err: error }, 'redial failed'))
        .finally(() => dialing.delete(nodeId));
    }
  };

  libp2p.addEventListener('connection:open', (event) => {
    const conn = event.detail;
    stateOf(conn);
    void startHello(conn);
  });
  libp2p.addEventListener('connection:close', (event) => {
    const st = conns.get(event.detail.id);
    if (st === undefined) return;
    conns.delete(event.detail.id);
    settle(st, new RouterError('closed', `the connection to ${event.detail.remotePeer.toString()} closed before its hello`));
  });
  libp2p.addEventListener('peer:connect', (event) => upListeners.emit(event.detail.toString()));
  libp2p.addEventListener('peer:disconnect', (event) => downListeners.emit(event.detail.toString()));
  libp2p.addEventListener('peer:discovery', (event) => {
    const info: PeerInfo = event.detail;
    const nodeId = info.id.toString();
    if (nodeId === selfId) return;
    // mDNS announces loopback addresses too; from another machine they would reach ourselves.
    const addrs = info.multiaddrs.map((ma) => stripP2p(ma.toString())).filter((a) => !isLoopback(a));
    remember(nodeId, addrs);
    discoveryListeners.emit({ nodeId, addrs });
    if (!(options.dialOnDiscovery ?? true) || stopped) return;
    if (libp2p.getConnections(info.id).length > 0 || dialing.has(nodeId)) return;
    if (!isMember(nodeId) && !allowUnknown(nodeId)) return;
    const now = Date.now();
    if ((discoveryDialedAt.get(nodeId) ?? 0) + DISCOVERY_REDIAL_MS > now || (mismatchUntil.get(nodeId) ?? 0) > now) return;
    capped(discoveryDialedAt).set(nodeId, now);
    dialing.add(nodeId);
    // Both sides usually discover each other at once; the lower id dials first so that one
    // connection, not two, results. The higher id dials too if nothing came after a moment.
    const wait = selfId < nodeId ? 0 : DISCOVERY_TIEBREAK_MS;
    void sleepUnref(wait)
      .then(() => {
        if (stopped || libp2p.getConnections(info.id).length > 0) return;
        return dialPeer(nodeId, addrs, AbortSignal.timeout(5000));
      })
      .catch((error: unknown) => log.debug({ peer: nodeId, err: error }, 'dial after discovery failed'))
      .finally(() => dialing.delete(nodeId));
  });

  await libp2p.handle(HELLO_PROTOCOL, guardHandler(HELLO_PROTOCOL, (stream, conn) => void serveHello(stream, conn)), { maxInboundStreams: 2, maxOutboundStreams: 2 });
  await libp2p.start();

  const redialIntervalMs = options.redialIntervalMs ?? 2000;
  const redialTimer = setInterval(redialTick, redialIntervalMs);
  redialTimer.unref();

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    clearInterval(redialTimer);
    topics.stop();
    for (const st of conns.values()) clearTimeout(st.timer);
    await libp2p.stop();
  };

  const router: Router = {
    nodeId: selfId,
    fingerprint,
    wireVersion,
    libp2p,
    addrs: selfAddrs,
    registerTopic: (def) => topics.register(def),
    unregisterTopic: (name) => topics.unregister(name),
    publish: (topic, message, publishOptions) => topics.publish(typeof topic === 'string' ? topic : topic.name, message, publishOptions),
    handle: (protocol, handler, handleOptions) => dataPlane.handle(protocol, handler, handleOptions),
    handleStream: (protocol, handler, handleOptions) => dataPlane.handleStream(protocol, handler, handleOptions),
    unhandle: (protocol) => dataPlane.unhandle(protocol),
    request: (nodeId, protocol, message, requestOptions) => dataPlane.request(nodeId, protocol, message, requestOptions),
    openStream: (nodeId, protocol, streamOptions) => dataPlane.openStream(nodeId, protocol, streamOptions),
    dial: async (target, dialOptions = {}) => {
      const signal = dialOptions.signal ?? AbortSignal.timeout(10_000);
      let conn: Connection;
      try {
        if (target.startsWith('/')) conn = await libp2p.dial(multiaddr(target), { signal });
        else conn = await dialPeer(target, roster.get(target) ?? knownAddrs.get(target) ?? [], signal);
      } catch (error) {
        if (signal.aborted) throw new RouterError(signalReason(signal), `could not reach ${target} in time`, { cause: error });
        throw new RouterError('unreachable', `could not reach ${target}: ${errorOf(error).message}`, { cause: error });
      }
      return raceSignal(waitHello(conn), signal);
    },
    hangUp: async (nodeId) => {
      await libp2p.hangUp(peerIdFromString(nodeId));
    },
    isConnected: (nodeId) => libp2p.getConnections(peerIdFromString(nodeId)).length > 0,
    connectedPeers: () => {
      const byPeer = new Map<string, ConnectedPeer>();
      for (const conn of libp2p.getConnections()) {
        const nodeId = conn.remotePeer.toString();
        const entry = byPeer.get(nodeId) ?? { nodeId, member: isMember(nodeId), hello: null, connections: 0, addrs: [] };
        entry.connections++;
        entry.hello = conns.get(conn.id)?.info ?? entry.hello;
        byPeer.set(nodeId, entry);
      }
      for (const entry of byPeer.values()) entry.addrs = [...(knownAddrs.get(entry.nodeId) ?? [])];
      return [...byPeer.values()];
    },
    helloOf: (nodeId) => lastHello.get(nodeId),
    updateRoster: (members) => {
      roster.clear();
      for (const member of members) {
        if (member.nodeId === selfId) continue;
        roster.set(member.nodeId, new Set(member.addrs.map(stripP2p)));
      }
      reevaluate();
      redialTick();
    },
    onHello: (listener) => helloListeners.add(listener),
    onPeerUp: (listener) => upListeners.add(listener),
    onPeerDown: (listener) => downListeners.add(listener),
    onDiscovery: (listener) => discoveryListeners.add(listener),
    stats: () => ({
      topics: topics.stats(),
      telemetry: topics.telemetry.stats(),
      refusedStreams: { ...refusedStreams },
      hello: { ...helloCounters },
      connections: libp2p.getConnections().length,
    }),
    stop,
    [Symbol.asyncDispose]: stop,
  };
  return router;
}

function signalReason(signal: AbortSignal): 'timeout' | 'aborted' {
  const reason: unknown = signal.reason;
  return reason instanceof Error && reason.name === 'TimeoutError' ? 'timeout' : 'aborted';
}

function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(new RouterError(signalReason(signal), 'the operation was aborted'));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new RouterError(signalReason(signal), 'the deadline passed while waiting for the hello'));
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
