// The cluster as placement sees it, and how a card's backend lists rank its nodes.

import type { NodeId } from '../common/ids.js';
import { engineOf, type ModelCard } from '../models/cards/card.js';

export interface ClusterNode {
  nodeId: NodeId;
  /** Bytes placement may use (after `--memory-budget`); null until the node has reported. */
  freeBytes: number | null;
  /** Backend tags the node offers; null until the node has reported. */
  backends: readonly string[] | null;
  /** Measured memory read bandwidth, when known. */
  memoryBandwidthBytesPerS?: number;
  /** Throughput of the node's link to its peers, when known. */
  linkBytesPerS?: number;
}

/** A node whose resources are known. */
export interface KnownNode extends ClusterNode {
  freeBytes: number;
  backends: readonly string[];
}

export function isKnown(node: ClusterNode): node is KnownNode {
  return node.freeBytes !== null && node.backends !== null;
}

export interface BackendChoice {
  tag: string;
  /** Lower is better: position in backend_preference, then after all of them in compatible order. */
  rank: number;
}

/**
 * The card's best backend on this node, optionally only of one engine; null when the node offers no
 * compatible one. compatible_backends filters (hard), backend_preference orders (soft).
 */
export function chooseBackend(card: ModelCard, node: KnownNode, engine?: string): BackendChoice | null {
  const preference = card.backend_preference;
  let best: BackendChoice | null = null;
  card.compatible_backends.forEach((tag, i) => {
    if (!node.backends.includes(tag)) return;
    if (engine !== undefined && engineOf(tag) !== engine) return;
    const preferred = preference.indexOf(tag);
    const rank = preferred >= 0 ? preferred : preference.length + i;
    if (best === null || rank < best.rank) best = { tag, rank };
  });
  return best;
}

/** Most free memory first, then better backend rank, then node id so equal nodes order the same everywhere. */
export function byMemoryThenPreference<T extends { node: KnownNode; backend: BackendChoice }>(a: T, b: T): number {
  if (a.node.freeBytes !== b.node.freeBytes) return b.node.freeBytes - a.node.freeBytes;
  if (a.backend.rank !== b.backend.rank) return a.backend.rank - b.backend.rank;
  return a.node.nodeId < b.node.nodeId ? -1 : a.node.nodeId > b.node.nodeId ? 1 : 0;
}
