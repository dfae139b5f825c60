// Which runner serves a request: pure over what the node knows (its own runners, the others' reports).
// docs/DESIGN.md section 6: ready first, then least in flight; this node's own runner wins a tie (no hop).

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

export function chooseRoute(candidates: readonly RouteCandidate[]): RouteChoice {
  const serving = candidates.filter(serves);
  if (serving.length === 0) return { kind: 'none' };
  const ready = serving.filter((c) => c.state === 'ready');
  if (ready.length === 0) {
    const reasons = serving.map((c) => `${c.instanceId} on ${c.local ? 'this node' : c.nodeId}: ${c.reason ?? c.state}`);
    return serving.every((c) => c.state === 'failed' || c.state === 'stopped') ? { kind: 'failed', reasons } : { kind: 'loading', reasons };
  }
  let best = ready[0]!;
  let bestScore = Infinity;
  for (const c of ready) {
    // Half a request of handicap for the hop: a remote runner wins only when it is really less loaded.
    const score = c.load + c.sentOpen + (c.local ? 0 : 0.5);
    if (score < bestScore || (score === bestScore && `${c.nodeId}/${c.instanceId}` < `${best.nodeId}/${best.instanceId}`)) {
      best = c;
      bestScore = score;
    }
  }
  return { kind: 'route', candidate: best };
}
