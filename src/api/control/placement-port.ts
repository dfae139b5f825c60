// What the placement routes (placement-routes.ts) need of the node, and the body they accept: the
// placement service fills this port (src/placement/control.ts), so the routes never import it.

import { z } from 'zod';
import { CARD_KV_CACHE_TYPES, CARD_MAX_PARALLEL, FLASH_ATTENTION_MODES } from '../../models/cards/card.js';
import type { PlacementError } from '../../placement/errors.js';
import type { DownloadsPlan } from '../../placement/downloads.js';
import type { Plan } from '../../placement/planner.js';

/** What the placement routes need from the node. */
export interface PlacementControl {
  /** The plan and the downloads it would start, or the planner's typed reason it cannot be placed. */
  plan(request: PlaceBody): Promise<{ ok: true; plan: Plan; downloads: DownloadsPlan } | { ok: false; error: PlacementError }>;
  /** Places it; throws a ShoalError carrying `placement` when the planner refuses. */
  place(request: PlaceBody): Promise<unknown>;
  /** Approves the downloads an instance waits for (idempotent). */
  approve(instanceId: string): Promise<unknown>;
  end(instanceId: string): Promise<void>;
}

const MAX_EXCLUSIONS = 64;

export const PlaceBody = z.strictObject({
  model: z.string().min(1).max(200),
  replicas: z.number().int().min(1).max(64).optional(),
  exclude: z.array(z.string().min(1).max(200)).max(MAX_EXCLUSIONS).optional(),
  min_nodes: z.number().int().min(1).max(16).optional(),
  context_tokens: z.number().int().min(1).max(1 << 21).optional(),
  /** Slots; absent: the card's, else as many as fit up to 16. */
  parallel: z.number().int().min(1).max(CARD_MAX_PARALLEL).optional(),
  kv_cache_type: z.enum(CARD_KV_CACHE_TYPES).optional(),
  flash_attention: z.enum(FLASH_ATTENTION_MODES).optional(),
  /** Layers that do not fit a node's GPUs may stay in system RAM (slower); default false: such a node is short. */
  allow_spill: z.boolean().optional(),
  dry_run: z.boolean().optional(),
  /** Approves up front the downloads above the cluster's `downloadApprovalBytes` (default false: they wait). */
  approve_downloads: z.boolean().optional(),
});
export type PlaceBody = z.infer<typeof PlaceBody>;
