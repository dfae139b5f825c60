// The placement routes' port (src/api/control/placement-port.ts) over a PlacementService: the
// request body's wire names become a PlaceRequest, and a DELETE ends the instance as an operator's stop.

import type { PlaceBody, PlacementControl } from '../api/control/placement-port.js';
import type { PlacementService, PlaceRequest } from './service.js';

export function placementControl(placement: PlacementService): PlacementControl {
  return {
    plan: async (body) => {
      const { model, result } = await placement.plan(placeRequest(body));
      return result.ok ? { ok: true, plan: result.plan, downloads: placement.downloadsFor(result.plan, model) } : result;
    },
    place: (body) => placement.place(placeRequest(body)),
    approve: (instanceId) => placement.approve(instanceId),
    end: (instanceId) => placement.end(instanceId, 'deleted', 'stopped by an operator'),
  };
}

/** Only the fields the body carries: an absent one keeps the planner's default. */
export function placeRequest(body: PlaceBody): PlaceRequest {
  return {
    model: body.model,
    ...(body.replicas !== undefined ? { replicas: body.replicas } : {}),
    ...(body.exclude !== undefined ? { exclude: body.exclude } : {}),
    ...(body.min_nodes !== undefined ? { minNodes: body.min_nodes } : {}),
    ...(body.context_tokens !== undefined ? { contextTokens: body.context_tokens } : {}),
    ...(body.parallel !== undefined ? { parallel: body.parallel } : {}),
    ...(body.kv_cache_type !== undefined ? { kvCacheType: body.kv_cache_type } : {}),
    ...(body.flash_attention !== undefined ? { flashAttention: body.flash_attention } : {}),
    ...(body.allow_spill !== undefined ? { allowSpill: body.allow_spill } : {}),
    ...(body.approve_downloads !== undefined ? { approveDownloads: body.approve_downloads } : {}),
  };
}
