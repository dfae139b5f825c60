import type { Connection, PeerId, StreamHandler, StreamHandlerOptions, Topology } from '@libp2p/interface';
import type { Registrar } from '@libp2p/interface-internal';
import type { Logger } from '../common/log.js';
import { RouterError, errorOf } from './errors.js';
import { HELLO_PROTOCOL, NON_MEMBER_PROTOCOLS } from './hello.js';
import { closeConnection, type HelloSessions, type ConnState } from './hello-session.js';

/*
 * Admission: how a peer outside the roster is kept to `/shoal/hello/1` and `/shoal/invite/1`.
 *
 * 1. Connection gater (`denyDialPeer`, `denyInbound/OutboundEncryptedConnection`): after Noise has
 *    proven the remote's peer id, a peer that is neither `isMember` nor `allowUnknown` is cut off
 *    before the muxer is negotiated. (No `@libp2p/pnet`: it breaks bulk streams; see docs/STACK-NOTES.md.)
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
 *    identify re-run, which is what tells the registrar (and so gossipsub) about it. The same sweep
 *    announces again a member that gossipsub holds no outbound stream to (see `checkGossip`).
 *
 * 1, 2, 3 and 6 live here; the host (host.ts) plugs them into libp2p and sets the score of 5.
 */

export const PING_PROTOCOL = '/ipfs/ping/1.0.0';

export interface AdmissionOptions {
  /** Roster check (never true for this node itself); called often, must be cheap and synchronous. */
  isMember: (nodeId: string) => boolean;
  /** Whether a non-member may connect at all (for hello/invite). */
  allowUnknown: (nodeId: string) => boolean;
  /** True once the router stopped: nothing is admitted any more. */
  isStopped: () => boolean;
  hellos: HelloSessions;
  /** Re-runs identify on a connection (bound to the libp2p node this admission helps build). */
  identify: (conn: Connection) => Promise<unknown>;
  /** Gossipsub's view of its peers (bound late, like `identify`), for the sweep's gossip check. */
  gossip: () => GossipView | undefined;
  log: Logger;
}

/** The public parts of gossipsub's peer tables the sweep reads. */
export interface GossipView {
  peers: ReadonlyMap<string, unknown>;
  streamsOutbound: ReadonlyMap<string, unknown>;
}

/** Sweeps a member's connection may lack its gossip stream before it is repaired (a sweep is one redial tick). */
const GOSSIP_MISSES_BEFORE_REPAIR = 2;

export class Admission {
  /** Inbound streams refused, by protocol. */
  readonly refusedStreams: Record<string, number> = {};
  /** The services' topologies (gossipsub's), as registered, so a peer can be announced to them again. */
  private readonly topologies: Topology[] = [];

  constructor(private readonly options: AdmissionOptions) {}

  /** The connection gater's verdict (1). */
  admitsConnection(peerId: PeerId): boolean {
    if (this.options.isStopped()) return false;
    const peer = peerId.toString();
    return this.options.isMember(peer) || this.options.allowUnknown(peer);
  }

  /** Wraps an inbound stream handler so that it only runs once `admitStream` said yes (2). */
  guardHandler(protocol: string, handler: StreamHandler): StreamHandler {
    if (protocol === PING_PROTOCOL) return handler;
    return (stream, conn) => {
      this.admitStream(protocol, conn).then(
        () => {
          try {
            Promise.resolve(handler(stream, conn)).catch((error: unknown) => stream.abort(errorOf(error)));
          } catch (error) {
            stream.abort(errorOf(error));
          }
        },
        (error: unknown) => {
          this.options.log.debug({ peer: conn.remotePeer.toString(), protocol, err: error }, 'refused an inbound stream');
          stream.abort(errorOf(error));
        },
      );
    };
  }

  /** Gives a service factory a registrar whose handlers and topologies pass admission first (2, 3). */
  guarded<C extends { registrar: Registrar }, S>(factory: (components: C) => S): (components: C) => S {
    return (components: C): S => {
      const real = components.registrar;
      const registrar = new Proxy(real, {
        get: (target, prop) => {
          if (prop === 'handle') {
            return (protocol: string, handler: StreamHandler, handlerOptions?: StreamHandlerOptions) => target.handle(protocol, this.guardHandler(protocol, handler), handlerOptions);
          }
          if (prop === 'register') return (protocol: string, topology: Topology) => target.register(protocol, this.guardTopology(topology));
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
  }

  /** Re-applies the roster to every open connection (6). */
  reevaluate(): void {
    const { isMember, allowUnknown, log } = this.options;
    for (const st of this.options.hellos.connections()) {
      if (st.conn.status !== 'open') continue;
      const peer = st.conn.remotePeer.toString();
      const member = isMember(peer);
      if (!member && st.member) {
        log.info({ peer }, 'closing the connection of a node that is no longer a member');
        st.member = false;
        closeConnection(log, st.conn, 'removed from the roster');
        continue;
      }
      if (!member && !allowUnknown(peer)) {
        closeConnection(log, st.conn, 'not admitted');
        continue;
      }
      if (member && !st.member) {
        st.member = true;
        void this.promote(st);
        continue;
      }
      if (member && st.info !== null) this.checkGossip(st);
    }
  }

  /**
   * Gossipsub opens its outbound stream once, when the registrar announces the peer, and never
   * retries: a refused or failed attempt (a race with the remote's roster, a stall under load, a
   * member back with an empty log that refuses us until it rejoins) would leave a connected member
   * deaf to our gossip for as long as the connection lives. The peer is announced again (taken out
   * of the topologies' filters, identify re-run), which makes gossipsub try once more. The
   * connection is never closed for it: a join may be under way on it.
   */
  private checkGossip(st: ConnState): void {
    const gossip = this.options.gossip();
    if (gossip === undefined) return;
    const peer = st.conn.remotePeer.toString();
    if (gossip.peers.has(peer) && gossip.streamsOutbound.has(peer)) {
      st.gossipMisses = 0;
      return;
    }
    if (++st.gossipMisses < GOSSIP_MISSES_BEFORE_REPAIR || st.promoting) return;
    st.gossipMisses = 0;
    this.options.log.debug({ peer }, 'no gossip stream to a connected member; announcing it to gossipsub again');
    for (const topology of this.topologies) topology.filter?.remove(st.conn.remotePeer);
    void this.promote(st);
  }

  /** Throws a RouterError when `conn`'s remote may not use `protocol` (see "Admission" above). */
  private async admitStream(protocol: string, conn: Connection): Promise<void> {
    const { isMember, allowUnknown, hellos } = this.options;
    const peer = conn.remotePeer.toString();
    const refuse = (why: string): never => {
      this.refusedStreams[protocol] = (this.refusedStreams[protocol] ?? 0) + 1;
      throw new RouterError('refused', `${peer} may not open ${protocol}: ${why}`);
    };
    if (protocol === PING_PROTOCOL) return;
    if (NON_MEMBER_PROTOCOLS.includes(protocol)) {
      if (!isMember(peer) && !allowUnknown(peer)) refuse('it is not admitted');
      if (protocol === HELLO_PROTOCOL) return;
      // invite: anyone admitted to connect, but only once the wire versions are known to match
      try {
        await hellos.waitHello(conn);
      } catch (error) {
        refuse(`its hello failed (${errorOf(error).message})`);
      }
      return;
    }
    if (!isMember(peer)) refuse('it is not a member');
    try {
      await hellos.waitHello(conn);
    } catch (error) {
      refuse(`its hello failed (${errorOf(error).message})`);
    }
    if (!isMember(peer)) refuse('it is no longer a member');
  }

  private guardTopology(topology: Topology): Topology {
    const { isMember, hellos } = this.options;
    this.topologies.push(topology);
    return {
      filter: topology.filter,
      notifyOnLimitedConnection: topology.notifyOnLimitedConnection,
      onConnect: async (peerId: PeerId, conn: Connection): Promise<void> => {
        const peer = peerId.toString();
        let admitted = isMember(peer);
        if (admitted) {
          try {
            await hellos.waitHello(conn);
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
    };
  }

  /** Re-runs identify so the registrar tells gossipsub about a peer that just became a member. */
  private async promote(st: ConnState): Promise<void> {
    if (st.promoting) return;
    st.promoting = true;
    try {
      await st.hello.promise;
      for (let attempt = 0; attempt < 3 && st.conn.status === 'open' && !this.options.isStopped(); attempt++) {
        try {
          await this.options.identify(st.conn);
          return;
        } catch (error) {
          this.options.log.debug({ peer: st.conn.remotePeer.toString(), err: error }, 'identify after admission failed; retrying');
          await new Promise((resolve) => setTimeout(resolve, 500).unref());
        }
      }
    } catch {
      // hello failed: the connection is being closed anyway
    } finally {
      st.promoting = false;
    }
  }
}
