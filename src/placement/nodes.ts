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
  /** Lower is better: position in backend_preference, then after all of them in `unrankedOrder`. */
  rank: number;
}

/**
 * Engines of one compute, fastest first, for tags a card does not rank itself: the managed
 * llama-server decodes faster than node-llama-cpp's prebuilt binaries on the same CPU (0.95x vs 0.81x
 * a hand-launched llama-server on a 200M model at 2 threads; node-llama-cpp 0.26x on a 20M one).
 */
const ENGINE_SPEED_ORDER = ['llama_server', 'llama_cpp', 'rpc'];

/**
 * The order of tags outside backend_preference: computes as compatible_backends first lists them,
 * within one compute the faster engine first, then compatible order.
 */
export function unrankedOrder(compatible: readonly string[]): string[] {
  const computeOf = (tag: string): string => tag.slice(tag.lastIndexOf('-') + 1);
  const computes = [...new Set(compatible.map(computeOf))];
  const speed = (tag: string): number => {
    const i = ENGINE_SPEED_ORDER.indexOf(engineOf(tag));
    return i < 0 ? ENGINE_SPEED_ORDER.length : i;
  };
  const key = (tag: string): number[] => [computes.indexOf(computeOf(tag)), speed(tag), compatible.indexOf(tag)];
  return [...compatible].sort((a, b) => {
    const [ka, kb] = [key(a), key(b)];
    return ka[0]! - kb[0]! || ka[1]! - kb[1]! || ka[2]! - kb[2]!;
  });
}

/**
 * The card's best backend on this node, optionally only of one engine; null when the node offers no
 * compatible one. compatible_backends filters (hard), backend_preference orders (soft).
 */
export function chooseBackend(card: ModelCard, node: KnownNode, engine?: string): BackendChoice | null {
  const preference = card.backend_preference;
  const unranked = unrankedOrder(card.compatible_backends);
  let best: BackendChoice | null = null;
  for (const tag of card.compatible_backends) {
    if (!node.backends.includes(tag)) continue;
    if (engine !== undefined && engineOf(tag) !== engine) continue;
    const preferred = preference.indexOf(tag);
    const rank = preferred >= 0 ? preferred : preference.length + unranked.indexOf(tag);
    if (best === null || rank < best.rank) best = { tag, rank };
  }
  return best;
}

/** Most free memory first, then better backend rank, then node id so equal nodes order the same everywhere. */
export function byMemoryThenPreference<T extends { node: KnownNode; backend: BackendChoice }>(a: T, b: T): number {
  if (a.node.freeBytes !== b.node.freeBytes) return b.node.freeBytes - a.node.freeBytes;
  if (a.backend.rank !== b.backend.rank) return a.backend.rank - b.backend.rank;
  return a.node.nodeId < b.node.nodeId ? -1 : a.node.nodeId > b.node.nodeId ? 1 : 0;
}
