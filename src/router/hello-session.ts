import type { Connection, Stream } from '@libp2p/interface';
import type { Logger } from '../common/log.js';
import { RouterError, errorOf } from './errors.js';
import { StreamChannel } from './framing.js';
import { HELLO_MAX_BYTES, HELLO_PROTOCOL, Hello, HelloProbe, fingerprintOfPeer, wireMismatchLine, type PeerHello } from './hello.js';
import { Listeners } from './listeners.js';
import { capped, isLoopback, stripP2p, type PeerBook } from './peer-book.js';

const MISMATCH_BACKOFF_MS = 30_000;

/** One connection's hello exchange, and the admission verdict kept beside it. */
export interface ConnState {
  conn: Connection;
  hello: PromiseWithResolvers<PeerHello>;
  settled: boolean;
  info: PeerHello | null;
  timer: NodeJS.Timeout;
  /** The roster's verdict the last time admission was applied to this connection. */
  member: boolean;
  promoting: boolean;
  /** Consecutive roster sweeps that found this member's connection without a gossip stream to it. */
  gossipMisses: number;
}

export interface HelloCounters {
  completed: number;
  mismatched: number;
  invalid: number;
  timedOut: number;
}

export interface HelloSessionsOptions {
  selfId: string;
  name: string;
  fingerprint: string;
  wireVersion: number;
  clusterId: () => string | null;
  /** A connection whose hello has not completed by then is closed. */
  helloTimeoutMs: number;
  isMember: (nodeId: string) => boolean;
  /** Where the addresses peers announce are remembered, and wire-version mismatches backed off. */
  book: PeerBook;
  /** This node's listen addresses, without /p2p, announced in our hello. */
  selfAddrs: () => string[];
  log: Logger;
}

export function closeConnection(log: Logger, conn: Connection, why: string, delayMs = 0): void {
  const run = (): void => {
    if (conn.status !== 'open') return;
    log.debug({ peer: conn.remotePeer.toString(), why }, 'closing connection');
    conn.close().catch((error: unknown) => conn.abort(errorOf(error)));
  };
  if (delayMs > 0) setTimeout(run, delayMs).unref();
  else run();
}

/**
 * The `/shoal/hello/1` exchange: both sides send a hello on every new connection; the first valid one
 * heard decides the connection (a verified `PeerHello`), a wire-version mismatch or an invalid hello
 * closes it, and so does silence past `helloTimeoutMs`. Admission waits on the outcome.
 */
export class HelloSessions {
  readonly counters: HelloCounters = { completed: 0, mismatched: 0, invalid: 0, timedOut: 0 };
  private readonly conns = new Map<string, ConnState>();
  private readonly lastHello = new Map<string, PeerHello>();
  private readonly listeners: Listeners<PeerHello>;

  constructor(private readonly options: HelloSessionsOptions) {
    this.listeners = new Listeners<PeerHello>(options.log, 'onHello');
  }

  /** Open connections with their hello state (for admission's roster sweep). */
  connections(): Iterable<ConnState> {
    return this.conns.values();
  }

  /** The verified hello of the peer on this connection, once it arrived. */
  infoOf(connId: string): PeerHello | null {
    return this.conns.get(connId)?.info ?? null;
  }

  /** The latest verified hello from this node, if any. */
  latest(nodeId: string): PeerHello | undefined {
    return this.lastHello.get(nodeId);
  }

  onHello(listener: (hello: PeerHello) => void): () => void {
    return this.listeners.add(listener);
  }

  waitHello(conn: Connection): Promise<PeerHello> {
    return this.stateOf(conn).hello.promise;
  }

  /** A connection opened: track it and start our hello on it. */
  opened(conn: Connection): void {
    this.stateOf(conn);
    void this.startHello(conn);
  }

  closed(conn: Connection): void {
    const st = this.conns.get(conn.id);
    if (st === undefined) return;
    this.conns.delete(conn.id);
    this.settle(st, new RouterError('closed', `the connection to ${conn.remotePeer.toString()} closed before its hello`));
  }

  /** Answers a hello the remote started (our `HELLO_PROTOCOL` handler). */
  async serve(stream: Stream, conn: Connection): Promise<void> {
    const peer = conn.remotePeer.toString();
    const channel = new StreamChannel(stream, peer, { maxMessageBytes: HELLO_MAX_BYTES });
    try {
      const raw = await channel.next({ signal: AbortSignal.timeout(this.options.helloTimeoutMs) });
      await channel.send(this.ownHello());
      await channel.close();
      if (raw !== undefined) this.acceptHello(conn, raw);
    } catch (error) {
      channel.abort(errorOf(error));
      this.options.log.debug({ peer, err: error }, 'inbound hello failed');
    }
  }

  stop(): void {
    for (const st of this.conns.values()) clearTimeout(st.timer);
  }

  private stateOf(conn: Connection): ConnState {
    const st = this.conns.get(conn.id);
    if (st !== undefined) return st;
    const { helloTimeoutMs, log } = this.options;
    const hello = Promise.withResolvers<PeerHello>();
    hello.promise.catch(() => {});
    const peer = conn.remotePeer.toString();
    if (conn.status !== 'open') {
      // Asked about a connection that already closed (its 'connection:close' has passed): never store it.
      hello.reject(new RouterError('closed', `the connection to ${peer} is closed`));
      return { conn, hello, settled: true, info: null, member: false, promoting: false, gossipMisses: 0, timer: setTimeout(() => {}, 0) };
    }
    const created: ConnState = {
      conn,
      hello,
      settled: false,
      info: null,
      member: this.options.isMember(peer),
      promoting: false,
      gossipMisses: 0,
      timer: setTimeout(() => {
        if (created.settled) return;
        this.counters.timedOut++;
        const error = new RouterError('timeout', `peer ${peer} did not complete the hello exchange within ${helloTimeoutMs} ms`);
        log.warn({ peer }, error.message);
        this.settle(created, error);
        closeConnection(log, conn, 'hello timeout');
      }, helloTimeoutMs),
    };
    created.timer.unref();
    this.conns.set(conn.id, created);
    return created;
  }

  private settle(st: ConnState, outcome: PeerHello | Error): void {
    if (st.settled) return;
    st.settled = true;
    clearTimeout(st.timer);
    if (outcome instanceof Error) st.hello.reject(outcome);
    else st.hello.resolve(outcome);
  }

  /** Verifies a hello against the Noise-proven peer id; settles the connection's hello state. */
  private acceptHello(conn: Connection, raw: unknown): void {
    const { wireVersion, log } = this.options;
    const st = this.stateOf(conn);
    const peer = conn.remotePeer.toString();
    const probe = HelloProbe.safeParse(raw);
    if (!probe.success) {
      this.counters.invalid++;
      const error = new RouterError('protocol_error', `peer ${peer} sent a hello without a wire version`);
      if (!st.settled) log.warn({ peer }, error.message);
      this.settle(st, error);
      closeConnection(log, conn, 'invalid hello', 200);
      return;
    }
    if (probe.data.wireVersion !== wireVersion) {
      const line = wireMismatchLine(peer, probe.data.wireVersion, wireVersion);
      if (!st.settled) {
        this.counters.mismatched++;
        log.warn({ peer, theirs: probe.data.wireVersion, ours: wireVersion }, line);
      }
      this.options.book.backOff(peer, Date.now() + MISMATCH_BACKOFF_MS);
      this.settle(st, new RouterError('refused', line));
      // Give our own hello (sent or about to be sent) time to reach them, so they log it too.
      closeConnection(log, conn, 'wire version mismatch', 250);
      return;
    }
    const parsed = Hello.safeParse(raw);
    let problem: string | null = null;
    if (!parsed.success) problem = `peer ${peer} sent an invalid hello: ${parsed.error.message}`;
    else if (parsed.data.nodeId !== peer) problem = `peer ${peer} sent a hello claiming to be ${parsed.data.nodeId}`;
    else if (parsed.data.fingerprint !== fingerprintOfPeer(conn.remotePeer)) problem = `peer ${peer} sent a hello with a fingerprint that is not its key's`;
    if (problem !== null || !parsed.success) {
      this.counters.invalid++;
      if (!st.settled) log.warn({ peer }, problem ?? 'invalid hello');
      this.settle(st, new RouterError('protocol_error', problem ?? 'invalid hello'));
      closeConnection(log, conn, 'invalid hello', 200);
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
      member: this.options.isMember(peer),
      direction: conn.direction,
    };
    this.options.book.remember(peer, info.addrs);
    capped(this.lastHello).set(peer, info);
    st.info = info;
    this.counters.completed++;
    this.settle(st, info);
    this.listeners.emit(info);
  }

  private ownHello(): Hello {
    const { wireVersion, selfId, name, fingerprint, clusterId, selfAddrs } = this.options;
    return {
      type: 'hello',
      wireVersion,
      nodeId: selfId,
      name: name.slice(0, 256),
      fingerprint,
      clusterId: clusterId(),
      addrs: selfAddrs().slice(0, 32),
    };
  }

  /** The hello we start on every new connection (the remote starts its own towards us as well). */
  private async startHello(conn: Connection): Promise<void> {
    const peer = conn.remotePeer.toString();
    const signal = AbortSignal.timeout(this.options.helloTimeoutMs);
    let channel: StreamChannel | null = null;
    try {
      const stream = await conn.newStream(HELLO_PROTOCOL, { signal });
      channel = new StreamChannel(stream, peer, { maxMessageBytes: HELLO_MAX_BYTES });
      await channel.send(this.ownHello(), { signal });
      await channel.close();
      const reply = await channel.next({ signal });
      if (reply !== undefined) this.acceptHello(conn, reply);
    } catch (error) {
      channel?.abort(errorOf(error));
      this.options.log.debug({ peer, err: error }, 'outbound hello failed');
    }
  }
}
