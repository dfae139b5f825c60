import type { Role } from '../../election/bully.js';
import type { MemberState } from '../state/state.js';
import type { CoreConfig } from './config.js';
import type { Peer } from './context.js';

export interface HealthReason {
  /** Stable and short, for badges and scripts (`pruned`, `suspect`, `no-direct-connection`). */
  code: string;
  text: string;
  remediation: string;
}

export interface NodeHealth {
  level: 'ok' | 'suspect' | 'pruned';
  reasons: HealthReason[];
  /** Since this node last received a heartbeat from it; null if none since this node started. */
  heartbeatAgeMs: number | null;
  /** Since this node last received anything from it (or since it started listening). */
  lastSeenAgeMs: number;
  connected: boolean;
}

/** How another member looks from here at `now`, by what this node heard of it and when. */
export function healthOf(
  member: MemberState,
  peer: Peer,
  now: number,
  cfg: Pick<CoreConfig, 'pruneAfterMs' | 'suspectAfterMs'>,
  role: Role,
): NodeHealth {
  const lastSeenAgeMs = Math.max(0, Math.round(now - peer.lastHeardMs));
  const heartbeatAgeMs = peer.lastHeartbeatMs === null ? null : Math.max(0, Math.round(now - peer.lastHeartbeatMs));
  const reasons: HealthReason[] = [];
  let level: NodeHealth['level'] = 'ok';
  if (member.status === 'pruned' || lastSeenAgeMs >= cfg.pruneAfterMs) {
    level = 'pruned';
    reasons.push({
      code: 'pruned',
      text: `not heard from for ${Math.round(lastSeenAgeMs / 1000)} s: pruned from the cluster`,
      remediation: 'start Shoal on that machine and check the network between the nodes; or remove the node if it is gone for good',
    });
  } else if (lastSeenAgeMs >= cfg.suspectAfterMs) {
    level = 'suspect';
    reasons.push({
      code: 'suspect',
      text: `no heartbeat for ${Math.round(lastSeenAgeMs / 1000)} s`,
      remediation: `check that the node is running and reachable; it is pruned after ${Math.round(cfg.pruneAfterMs / 1000)} s`,
    });
  }
  if (!peer.connected && level === 'ok' && role !== 'standalone') {
    // Gossip may still reach it through others; worth saying, not worth a level.
    reasons.push({ code: 'no-direct-connection', text: 'no direct connection', remediation: 'check that its address is reachable from this node' });
  }
  return { level, reasons, heartbeatAgeMs, lastSeenAgeMs, connected: peer.connected };
}
