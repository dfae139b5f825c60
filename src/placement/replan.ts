// Re-placement after a plan fails on a node: a worker's memory guard refused its share, or its
// download failed. Both are bounded so recovery never loops:
// - refusal: one node wider (each node holds less), else once to a single node without the refuser;
//   a refusal of that fallback, or a third refusal in a chain, gives up. Two hops at most.
// - download failure: the same request without that node; each failure excludes one more node, so the
//   chain ends when the cluster runs out of nodes.
// Both keep the plan's stamped exclusions, so automatic repair never lands on a node the operator excluded.

import type { NodeId } from '../common/ids.js';
import { placementError, type PlacementError } from './errors.js';
import { optionsOf, planPlacement, type Plan, type PlanInput, type PlanResult, type RefusalState } from './planner.js';

/** Re-placements a chain of memory refusals may take before giving up. */
export const MAX_REFUSAL_HOPS = 2;

function withRefusal(result: PlanResult, refusal: RefusalState): PlanResult {
  return result.ok ? { ok: true, plan: { ...result.plan, refusal } } : result;
}

function notInPlan(plan: Plan, nodeId: NodeId): PlanResult | null {
  if (plan.placements.some((p) => p.nodeId === nodeId)) return null;
  return { ok: false, error: placementError('INVALID_REQUEST', `${nodeId} holds no part of this ${plan.modelId} placement`) };
}

function giveUp(plan: Plan, refuser: NodeId, why: string, causes: PlacementError[] = []): PlanResult {
  return {
    ok: false,
    error: placementError('PLACEMENT_REFUSED', `${refuser} refused ${plan.modelId} for lack of memory and ${why}; giving up`, { causes, exclusions: plan.exclusions }),
  };
}

/** `input` is the cluster now (nodes may have changed since `previous` was planned). */
export function replanAfterRefusal(previous: Plan, refusingNodeId: NodeId, input: PlanInput): PlanResult {
  const invalid = notInPlan(previous, refusingNodeId);
  if (invalid) return invalid;
  const { hops, fellBack } = previous.refusal;
  if (fellBack) return giveUp(previous, refusingNodeId, 'it was already the single-node fallback');
  if (hops >= MAX_REFUSAL_HOPS) return giveUp(previous, refusingNodeId, `${hops} re-placements were already tried`);
  const options = optionsOf(previous);

  // Replicas are independent copies: widening one means nothing, so re-place the set without the refuser.
  if (previous.shape === 'replicas') {
    const again = planPlacement(input, { ...options, exclusions: [...options.exclusions, refusingNodeId] });
    return again.ok ? withRefusal(again, { hops: hops + 1, fellBack: false }) : giveUp(previous, refusingNodeId, 'no other node can take its copy', [again.error]);
  }

  const width = previous.placements.length;
  const wider = planPlacement(input, { ...options, replicas: 1, minNodes: width + 1 });
  if (wider.ok) return withRefusal(wider, { hops: hops + 1, fellBack: false });

  // On a mixed cluster a wider split may not exist (engines differ) while another node could hold it alone.
  const single = planPlacement(input, { ...options, replicas: 1, minNodes: 1, exclusions: [...options.exclusions, refusingNodeId] });
  if (single.ok && single.plan.shape === 'single') return withRefusal(single, { hops: hops + 1, fellBack: true });
  const singleError = single.ok ? placementError('MEMORY_SHORTFALL', `no single node without ${refusingNodeId} can hold it`) : single.error;
  return giveUp(previous, refusingNodeId, `neither a ${width + 1}-node split nor another single node can hold it`, [wider.error, singleError]);
}

/** Re-places `plan` without `nodeId`, whose download failed; the refusal budget carries over unchanged. */
export function replanAfterDownloadFailure(plan: Plan, nodeId: NodeId, input: PlanInput): PlanResult {
  const invalid = notInPlan(plan, nodeId);
  if (invalid) return invalid;
  const options = optionsOf(plan);
  return withRefusal(planPlacement(input, { ...options, exclusions: [...options.exclusions, nodeId] }), plan.refusal);
}
