import '../polyfill.js';
import { bootstrap } from '@libp2p/bootstrap';
import { gossipsub, type GossipSub } from '@libp2p/gossipsub';
import { identify, type Identify } from '@libp2p/identify';
import type { Connection, PrivateKey, Stream } from '@libp2p/interface';
import { mdns } from '@libp2p/mdns';
import { noise } from '@libp2p/noise';
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id';
import { ping, type Ping } from '@libp2p/ping';
import { tcp } from '@libp2p/tcp';
import { yamux } from '@libp2p/yamux';
import { multiaddr } from '@multiformats/multiaddr';
import { createLibp2p, type Libp2p } from 'libp2p';
import type { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import { createLogger, type Logger } from '../common/log.js';
import { Admission, type GossipView } from './admission.js';
import { bootstrapAddrProblem } from './bootstrap-addrs.js';
import { ipOfMultiaddr } from './direct-socket.js';
import { RouterError, errorOf } from './errors.js';
import { YAMUX_MAX_WINDOW_BYTES, type FrameChannel } from './framing.js';
import { HELLO_PROTOCOL, NON_MEMBER_PROTOCOLS, WIRE_VERSION, fingerprintOfPeer, type PeerHello } from './hello.js';
import { HelloSessions } from './hello-session.js';
import { Listeners } from './listeners.js';
import { PeerBook, stripP2p } from './peer-book.js';
import { Roster, type DiscoveredPeer, type RosterEntry } from './roster.js';
import { DataPlane, type ChannelHandler, type HandleOptions, type OpenStreamOptions, type RequestHandler, type RequestOptions } from './streams.js';
import { TopicRegistry, type PublishOptions, type TelemetryQueueStats, type Topic, type TopicDefinition, type TopicStats } from './topics.js';

// The libp2p host: assembles the hello sessions (hello-session.ts), admission (admission.ts, where the
// rules for peers outside the roster are explained), the roster and redial (roster.ts), the topics
// (topics.ts) and the direct streams (streams.ts) into one `Router`.

export const DEFAULT_P2P_PORT = 52601;
export const MDNS_SERVICE_TAG = '_shoal._udp.local';
/** Pings in flight per connection each way (timeout / interval, rounded up, plus one). */
const PING_STREAMS_MAX = 12;

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

export interface ConnectedPeer {
  nodeId: string;
  member: boolean;
  hello: PeerHello | null;
  connections: number;
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

  const upListeners = new Listeners<string>(log, 'onPeerUp');
  const downListeners = new Listeners<string>(log, 'onPeerDown');
  const discoveryListeners = new Listeners<DiscoveredPeer>(log, 'onDiscovery');
  let stopped = false;
  const isStopped = (): boolean => stopped;
  // Set once libp2p exists; the hello and admission need it only on connections, which come later.
  let node: Libp2p<RouterServices> | null = null;
  const selfAddrs = (): string[] => (node === null ? [] : [...new Set(node.getMultiaddrs().map((ma) => stripP2p(ma.toString())))]);

  const book = new PeerBook();
  const hellos = new HelloSessions({
    selfId,
    name: options.name,
    fingerprint,
    wireVersion,
    clusterId: options.clusterId ?? ((): string | null => null),
    helloTimeoutMs,
    isMember,
    book,
    selfAddrs,
    log,
  });
  const admission = new Admission({
    isMember,
    allowUnknown,
    isStopped,
    hellos,
    identify: async (conn) => {
      await node?.services.identify.identify(conn);
    },
    gossip: () => {
      // The service's interface type hides the implementation's public peer tables; check they are there.
      const pubsub = node?.services.pubsub as Partial<GossipView> | undefined;
      return pubsub?.peers instanceof Map && pubsub.streamsOutbound instanceof Map ? (pubsub as GossipView) : undefined;
    },
    log,
  });

  const listenHost = options.host ?? '0.0.0.0';
  const listen = `/${listenHost.includes(':') ? 'ip6' : 'ip4'}/${listenHost}/tcp/${options.p2pPort ?? DEFAULT_P2P_PORT}`;
  const peerDiscovery = [];
  if (options.mdns ?? true) peerDiscovery.push(mdns({ serviceTag: MDNS_SERVICE_TAG, interval: options.mdnsIntervalMs ?? 5000 }));
  for (const addr of options.bootstrap ?? []) {
    const problem = bootstrapAddrProblem(addr);
    if (problem !== null) log.warn(problem);
  }
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
      denyDialPeer: (peerId) => !admission.admitsConnection(peerId),
      denyInboundEncryptedConnection: (peerId) => !admission.admitsConnection(peerId),
      denyOutboundEncryptedConnection: (peerId) => !admission.admitsConnection(peerId),
    },
    connectionManager: { inboundConnectionThreshold: options.inboundConnectionThreshold ?? 20 },
    connectionMonitor: {
      pingInterval: options.pingIntervalMs ?? 1000,
      pingTimeout: { minTimeout: options.pingTimeoutMs ?? 10_000, maxTimeout: options.pingTimeoutMs ?? 10_000 },
      abortConnectionOnPingFailure: true,
    },
    services: {
      identify: admission.guarded(identify({ timeout: helloTimeoutMs + 2000 })),
      // With a ping timeout longer than its interval, pings overlap: allow as many as can be in flight.
      ping: ping({ maxOutboundStreams: PING_STREAMS_MAX, maxInboundStreams: PING_STREAMS_MAX }),
      pubsub: admission.guarded(
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
        await raceSignal(hellos.waitHello(conn), signal);
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
    register: (protocol, handler, handlerOptions) => libp2p.handle(protocol, admission.guardHandler(protocol, handler), handlerOptions),
    unregister: (protocol) => libp2p.unhandle(protocol),
  });

  const roster = new Roster({
    libp2p,
    selfId,
    isMember,
    allowUnknown,
    isStopped,
    book,
    reevaluate: () => admission.reevaluate(),
    discovered: (peer) => discoveryListeners.emit(peer),
    dialOnDiscovery: options.dialOnDiscovery ?? true,
    redialIntervalMs: options.redialIntervalMs ?? 2000,
    log,
  });

  libp2p.addEventListener('connection:open', (event) => hellos.opened(event.detail));
  libp2p.addEventListener('connection:close', (event) => hellos.closed(event.detail));
  libp2p.addEventListener('peer:connect', (event) => upListeners.emit(event.detail.toString()));
  libp2p.addEventListener('peer:disconnect', (event) => downListeners.emit(event.detail.toString()));
  libp2p.addEventListener('peer:discovery', (event) => roster.onDiscovery(event.detail));

  await libp2p.handle(HELLO_PROTOCOL, admission.guardHandler(HELLO_PROTOCOL, (stream, conn) => void hellos.serve(stream, conn)), { maxInboundStreams: 2, maxOutboundStreams: 2 });
  try {
    await libp2p.start();
  } catch (error) {
    // libp2p reports a taken port as a stack trace that suggests its own config knobs; the port is the operator's to free.
    if (/EADDRINUSE/.test(errorOf(error).message)) {
      throw new ShoalError('BAD_REQUEST', `cluster port ${options.p2pPort ?? DEFAULT_P2P_PORT} is already in use: stop the other process or pass --p2p-port`, { cause: error });
    }
    throw error;
  }
  roster.start();

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    roster.stop();
    topics.stop();
    hellos.stop();
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
        else conn = await roster.dial(target, roster.addrsOf(target), signal);
      } catch (error) {
        if (signal.aborted) throw new RouterError(signalReason(signal), `could not reach ${target} in time`, { cause: error });
        throw new RouterError('unreachable', `could not reach ${target}: ${errorOf(error).message}`, { cause: error });
      }
      return raceSignal(hellos.waitHello(conn), signal);
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
        entry.hello = hellos.infoOf(conn.id) ?? entry.hello;
        byPeer.set(nodeId, entry);
      }
      for (const entry of byPeer.values()) entry.addrs = [...(book.addrsOf(entry.nodeId) ?? [])];
      return [...byPeer.values()];
    },
    helloOf: (nodeId) => hellos.latest(nodeId),
    updateRoster: (members) => roster.update(members),
    onHello: (listener) => hellos.onHello(listener),
    onPeerUp: (listener) => upListeners.add(listener),
    onPeerDown: (listener) => downListeners.add(listener),
    onDiscovery: (listener) => discoveryListeners.add(listener),
    stats: () => ({
      topics: topics.stats(),
      telemetry: topics.telemetry.stats(),
      refusedStreams: { ...admission.refusedStreams },
      hello: { ...hellos.counters },
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
