/** Per-peer bookkeeping is kept for at most this many peers (a busy LAN announces many non-members). */
export const MAX_TRACKED_PEERS = 1024;
/** Addresses remembered per peer. */
const MAX_ADDRS_PER_PEER = 64;

/** Evicts the oldest entry when a map of per-peer facts is full, and returns the map for a `set`. */
export function capped<K, V>(map: Map<K, V>): Map<K, V> {
  while (map.size >= MAX_TRACKED_PEERS) {
    const oldest = map.keys().next();
    if (oldest.done === true) break;
    map.delete(oldest.value);
  }
  return map;
}

export function stripP2p(addr: string): string {
  const at = addr.indexOf('/p2p/');
  return at === -1 ? addr : addr.slice(0, at);
}

export function isLoopback(addr: string): boolean {
  return addr.startsWith('/ip4/127.') || addr.startsWith('/ip6/::1/');
}

/**
 * What this node has learned about peers from hellos and discovery: the addresses they can be dialled
 * on, and until when a peer that speaks another wire version is left alone.
 */
export class PeerBook {
  private readonly known = new Map<string, Set<string>>();
  private readonly mismatchUntil = new Map<string, number>();

  remember(nodeId: string, addrs: Iterable<string>): void {
    let set = this.known.get(nodeId);
    if (set === undefined) {
      set = new Set();
      capped(this.known).set(nodeId, set);
    }
    for (const addr of addrs) {
      if (set.size >= MAX_ADDRS_PER_PEER) break;
      set.add(stripP2p(addr));
    }
  }

  addrsOf(nodeId: string): ReadonlySet<string> | undefined {
    return this.known.get(nodeId);
  }

  /** Neither redial nor discovery dials `nodeId` before `untilMs` (epoch ms). */
  backOff(nodeId: string, untilMs: number): void {
    capped(this.mismatchUntil).set(nodeId, untilMs);
  }

  backingOff(nodeId: string, nowMs: number): boolean {
    return (this.mismatchUntil.get(nodeId) ?? 0) > nowMs;
  }
}
