// Which runner serves a request: pure over what the node knows (its own runners, the others' reports).
// docs/DESIGN.md section 6: ready first, then least in flight; among equally loaded runners the one
// that holds the prompt's prefix in its cache wins (it skips evaluating it, which outweighs a hop),
// then this node's own runner (no hop).

import type { InstanceId, ModelId, NodeId } from '../common/ids.js';
import type { InstanceRole } from '../wire/instance-role.js';

export interface RouteCandidate {
  nodeId: NodeId;
  instanceId: InstanceId;
  modelId: ModelId;
  role: InstanceRole;
  state: 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped';
  reason: string | null;
  /** In flight + queued as the serving node last reported (or now, for this node). */
  load: number;
  /** Requests this node sent there that are still open (the report may not show them yet). */
  sentOpen: number;
  local: boolean;
}

export type RouteChoice =
  | { kind: 'route'; candidate: RouteCandidate }
  /** Placed, but nothing ready yet. */
  | { kind: 'loading'; reasons: string[] }
  /** Placed, and every runner gave up. */
  | { kind: 'failed'; reasons: string[] }
  | { kind: 'none' };

/** Only whole-model servers take requests: donors hold layers, not a model. */
function serves(candidate: RouteCandidate): boolean {
  return candidate.role === 'full' || candidate.role === 'driver';
}

/** `holder`: the runner that last served this prompt's prefix (prefix-routes.ts), if any. */
export function chooseRoute(candidates: readonly RouteCandidate[], holder: { nodeId: NodeId; instanceId: InstanceId } | null = null): RouteChoice {
  const serving = candidates.filter(serves);
  if (serving.length === 0) return { kind: 'none' };
  const ready = serving.filter((c) => c.state === 'ready');
  if (ready.length === 0) {
    const reasons = serving.map((c) => `${c.instanceId} on ${c.local ? 'this node' : c.nodeId}: ${c.reason ?? c.state}`);
    return serving.every((c) => c.state === 'failed' || c.state === 'stopped') ? { kind: 'failed', reasons } : { kind: 'loading', reasons };
  }
  // Loads are whole requests, so a remote runner wins on load only when it is at least one request less loaded.
  const holds = (c: RouteCandidate): boolean => holder !== null && c.nodeId === holder.nodeId && c.instanceId === holder.instanceId;
  const order = (a: RouteCandidate, b: RouteCandidate): number =>
    a.load + a.sentOpen - (b.load + b.sentOpen) ||
    Number(holds(b)) - Number(holds(a)) ||
    Number(b.local) - Number(a.local) ||
    (`${a.nodeId}/${a.instanceId}` < `${b.nodeId}/${b.instanceId}` ? -1 : 1);
  return { kind: 'route', candidate: ready.reduce((best, c) => (order(c, best) < 0 ? c : best)) };
}
