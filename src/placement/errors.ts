// Why a model could not be placed, as data: the dry-run route returns it before anything runs, and the
// master records it. Each code tells the caller something different to do.

import type { NodeId } from '../common/ids.js';
import type { MemoryEstimate } from './memory.js';

export const PLACEMENT_ERROR_CODES = [
  /** Fewer usable nodes than the shape needs (replicas, min_nodes), or none offers a compatible backend. */
  'TOPOLOGY_GAP',
  /** The exclusions removed every node that could have been used. */
  'ALL_EXCLUDED',
  /** Nodes exist but none (nor any split over them) has the memory; carries the numbers per node. */
  'MEMORY_SHORTFALL',
  /** Some node has not reported its resources yet and the known nodes are not enough: retry shortly. */
  'INFO_PENDING',
  /** The request itself is contradictory (replicas of a split, a refusal from a node not in the plan). */
  'INVALID_REQUEST',
  /** Nodes refused the placement and the bounded re-placement chain is spent. */
  'PLACEMENT_REFUSED',
] as const;
export type PlacementErrorCode = (typeof PLACEMENT_ERROR_CODES)[number];

/** One node's side of a memory shortfall: what the estimate needs against what the node has. */
export interface NodeShortfall {
  nodeId: NodeId;
  role: 'full' | 'driver' | 'donor';
  /** Free bytes the node would need (estimate + margin + 1). */
  neededBytes: number;
  freeBytes: number;
  /** On a GPU backend: the host side (runner, embeddings, spilled layers), and `devices` the GPUs' sides. */
  estimate: MemoryEstimate;
  /** A part on a GPU backend: per device, the VRAM it would need (estimate + margin + 1) against the free VRAM. */
  devices?: { index: number; neededBytes: number; freeBytes: number; estimate: MemoryEstimate }[];
}

export interface PlacementError {
  code: PlacementErrorCode;
  message: string;
  /** MEMORY_SHORTFALL: each node tried for a full copy, best first. */
  single?: NodeShortfall[];
  /** MEMORY_SHORTFALL: the widest split tried, part by part. */
  pooled?: NodeShortfall[];
  /** INFO_PENDING: nodes whose resources are unknown. */
  pendingNodes?: NodeId[];
  /** The exclusions in force when it failed. */
  exclusions?: NodeId[];
  /** INFO_PENDING, PLACEMENT_REFUSED: the failures underneath. */
  causes?: PlacementError[];
}

export function placementError(code: PlacementErrorCode, message: string, extra: Omit<PlacementError, 'code' | 'message'> = {}): PlacementError {
  return { code, message, ...extra };
}
