// The worker's next action, pure: what replicated state asks this node to run against what it runs.

import type { InstanceId, NodeId } from '../common/ids.js';
import type { InstancePlacement, InstanceState } from '../master/state/instances.js';
import type { ClusterState } from '../master/state/state.js';
import { formatBytes } from '../common/format-bytes.js';

/**
 * The memory guard refuses a part only on a real shortfall: the plan's estimate already carries an
 * overhead factor and a floor, and readings move between planning and starting, so a part is refused
 * only when what the node can offer now is more than this fraction below the estimate.
 */
export const MEMORY_GUARD_TOLERANCE = 0.1;

/** One part of one instance this node should run. */
export interface Assignment {
  instance: InstanceState;
  placement: InstancePlacement;
}

export interface HeldPart {
  instanceId: InstanceId;
  /** Started by the node itself (its default model), not by cluster state: never stopped here. */
  local: boolean;
}

export type WorkerAction = { type: 'start'; assignment: Assignment } | { type: 'stop'; instanceId: InstanceId };

export function assignmentsFor(state: ClusterState, nodeId: NodeId): Assignment[] {
  const out: Assignment[] = [];
  for (const instance of Object.values(state.instances)) {
    // Starting a part would start its download: one the operator has not approved yet waits.
    if (instance.awaitingApproval !== undefined) continue;
    const placement = instance.placements.find((p) => p.nodeId === nodeId);
    if (placement) out.push({ instance, placement });
  }
  return out.sort((a, b) => a.instance.createdIdx - b.instance.createdIdx);
}

/**
 * Stops what state no longer asks for, then starts what it asks for and is neither held nor being
 * started. Donors start before drivers so a driver's RPC peers exist as early as possible.
 */
export function nextActions(assignments: readonly Assignment[], held: readonly HeldPart[], starting: ReadonlySet<InstanceId>): WorkerAction[] {
  const wanted = new Set<string>(assignments.map((a) => a.instance.instanceId));
  const have = new Set<string>(held.map((h) => h.instanceId));
  const actions: WorkerAction[] = [];
  for (const part of held) if (!part.local && !wanted.has(part.instanceId)) actions.push({ type: 'stop', instanceId: part.instanceId });
  const toStart = assignments.filter((a) => !have.has(a.instance.instanceId) && !starting.has(a.instance.instanceId));
  const order = { donor: 0, full: 1, driver: 2 } as const;
  toStart.sort((a, b) => order[a.placement.role] - order[b.placement.role] || a.instance.createdIdx - b.instance.createdIdx);
  for (const assignment of toStart) actions.push({ type: 'start', assignment });
  return actions;
}

export type GuardVerdict = { ok: true } | { ok: false; message: string };

/** `offerBytes`: what this node can give the part now, not counting the part's own commitment. */
export function memoryGuard(estimatedBytes: number, offerBytes: number): GuardVerdict {
  const floor = estimatedBytes * (1 - MEMORY_GUARD_TOLERANCE);
  if (offerBytes >= floor) return { ok: true };
  return {
    ok: false,
    message: `this part needs about ${formatBytes(estimatedBytes)} and the node can offer ${formatBytes(offerBytes)} now (refused below ${formatBytes(floor)}, ${MEMORY_GUARD_TOLERANCE * 100}% tolerance)`,
  };
}
