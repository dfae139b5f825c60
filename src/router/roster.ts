import type { Connection, PeerInfo } from '@libp2p/interface';
import { peerIdFromString } from '@libp2p/peer-id';
import { multiaddr, type Multiaddr } from '@multiformats/multiaddr';
import type { Libp2p } from 'libp2p';
import type { Logger } from '../common/log.js';
import { capped, isLoopback, stripP2p, type PeerBook } from './peer-book.js';

const DISCOVERY_REDIAL_MS = 10_000;
const DISCOVERY_TIEBREAK_MS = 1500;

export interface RosterEntry {
  nodeId: string;
  addrs: readonly string[];
}

export interface DiscoveredPeer {
  nodeId: string;
  addrs: string[];
}

export interface RosterOptions {
  libp2p: Libp2p;
  selfId: string;
  isMember: (nodeId: string) => boolean;
  allowUnknown: (nodeId: string) => boolean;
  isStopped: () => boolean;
  book: PeerBook;
  /** Admission's sweep over open connections, run before every redial. */
  reevaluate: () => void;
  /** Told of every peer discovery announces (loopback addresses left out). */
  discovered: (peer: DiscoveredPeer) => void;
  /** Dial discovered peers so their hello is heard. */
  dialOnDiscovery: boolean;
  /** How often members that are not connected are redialled. */
  redialIntervalMs: number;
  log: Logger;
}

function sleepUnref(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * The members to keep connected: redials every member without a connection on each tick (from the
 * roster's addresses and those its hellos and discovery announced), and dials what discovery finds.
 */
export class Roster {
  private readonly members = new Map<string, Set<string>>();
  private readonly dialing = new Set<string>();
  private readonly discoveryDialedAt = new Map<string, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly options: RosterOptions) {}

  start(): void {
    this.timer = setInterval(() => this.tick(), this.options.redialIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
  }

  /** Members (with last-known addresses) to keep connected; also re-applies admission to open connections. */
  update(members: readonly RosterEntry[]): void {
    this.members.clear();
    for (const member of members) {
      if (member.nodeId === this.options.selfId) continue;
      this.members.set(member.nodeId, new Set(member.addrs.map(stripP2p)));
    }
    this.options.reevaluate();
    this.tick();
  }

  /** Addresses to dial a node id on: the roster's, else what hellos and discovery taught. */
  addrsOf(nodeId: string): Iterable<string> {
    return this.members.get(nodeId) ?? this.options.book.addrsOf(nodeId) ?? [];
  }

  async dial(nodeId: string, addrs: Iterable<string>, signal: AbortSignal): Promise<Connection> {
    const { libp2p } = this.options;
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
  }

  /** libp2p's 'peer:discovery' (mDNS, bootstrap). */
  onDiscovery(info: PeerInfo): void {
    const { libp2p, selfId, isMember, allowUnknown, isStopped, book, log } = this.options;
    const nodeId = info.id.toString();
    if (nodeId === selfId) return;
    // mDNS announces loopback addresses too; from another machine they would reach ourselves.
    const addrs = info.multiaddrs.map((ma) => stripP2p(ma.toString())).filter((a) => !isLoopback(a));
    book.remember(nodeId, addrs);
    this.options.discovered({ nodeId, addrs });
    if (!this.options.dialOnDiscovery || isStopped()) return;
    if (libp2p.getConnections(info.id).length > 0 || this.dialing.has(nodeId)) return;
    if (!isMember(nodeId) && !allowUnknown(nodeId)) return;
    const now = Date.now();
    if ((this.discoveryDialedAt.get(nodeId) ?? 0) + DISCOVERY_REDIAL_MS > now || book.backingOff(nodeId, now)) return;
    capped(this.discoveryDialedAt).set(nodeId, now);
    this.dialing.add(nodeId);
    // Both sides usually discover each other at once; the lower id dials first so that one
    // connection, not two, results. The higher id dials too if nothing came after a moment.
    const wait = selfId < nodeId ? 0 : DISCOVERY_TIEBREAK_MS;
    void sleepUnref(wait)
      .then(() => {
        if (isStopped() || libp2p.getConnections(info.id).length > 0) return;
        return this.dial(nodeId, addrs, AbortSignal.timeout(5000));
      })
      .catch((error: unknown) => log.debug({ peer: nodeId, err: error }, 'dial after discovery failed'))
      .finally(() => this.dialing.delete(nodeId));
  }

  private tick(): void {
    const { libp2p, isMember, isStopped, book, redialIntervalMs, log } = this.options;
    if (isStopped()) return;
    this.options.reevaluate();
    const now = Date.now();
    for (const [nodeId, addrs] of this.members) {
      if (!isMember(nodeId) || this.dialing.has(nodeId)) continue;
      if (book.backingOff(nodeId, now)) continue;
      if (libp2p.getConnections(peerIdFromString(nodeId)).length > 0) continue;
      const all = new Set([...addrs, ...(book.addrsOf(nodeId) ?? [])]);
      if (all.size === 0) continue;
      this.dialing.add(nodeId);
      this.dial(nodeId, all, AbortSignal.timeout(Math.max(5000, redialIntervalMs * 2)))
        .then(() => log.debug({ peer: nodeId }, 'redialled a member'))
        .catch((error: unknown) => log.debug({ peer: nodeId, err: error }, 'redial failed'))
        .finally(() => this.dialing.delete(nodeId));
    }
  }
}
