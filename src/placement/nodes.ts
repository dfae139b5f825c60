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
  /** The node's GPUs as placement may use them (absent or empty: a CPU node). */
  gpus?: readonly PlannerGpu[];
}

/** GPU computes: a backend tag ending in one of these runs on the node's devices of that compute. */
export const GPU_COMPUTES = ['cuda', 'vulkan', 'metal'] as const;
export type GpuCompute = (typeof GPU_COMPUTES)[number];

/** One GPU as the planner sees it: its free VRAM after `--vram-budget` and what is committed there. */
export interface PlannerGpu {
  /** The device's index on its node (llama.cpp's `CUDA<index>`, `Vulkan<index>`, `Metal<index>`). */
  index: number;
  name: string;
  compute: GpuCompute;
  /** Bytes placement may use on this device. */
  freeBytes: number;
  /** Apple silicon: the VRAM is the system RAM, so a part's device bytes also come out of `freeBytes` of the node. */
  unifiedMemory: boolean;
}

export function computeOf(tag: string): string {
  return tag.slice(tag.lastIndexOf('-') + 1);
}

export function isGpuCompute(compute: string): compute is GpuCompute {
  return (GPU_COMPUTES as readonly string[]).includes(compute);
}

/** The node's devices a backend runs on, in index order: those of its compute, none for a CPU tag. */
export function devicesFor(node: ClusterNode, backend: string): PlannerGpu[] {
  const compute = computeOf(backend);
  if (!isGpuCompute(compute)) return [];
  return (node.gpus ?? []).filter((g) => g.compute === compute).sort((a, b) => a.index - b.index);
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
 * compatible one. compatible_backends filters (hard), backend_preference orders (soft). Outside the
 * preference, a GPU tag whose devices the node has comes before every other tag: a card lists computes
 * in a fixed order (cpu first), which says nothing about which of them this machine runs fastest, and a
 * GPU's memory bandwidth is several times its host's (unranked tags keep their order among themselves).
 * A GPU tag with no device of its compute on the node (advertised by override only) keeps its rank.
 */
export function chooseBackend(card: ModelCard, node: KnownNode, engine?: string): BackendChoice | null {
  const preference = card.backend_preference;
  const unranked = unrankedOrder(card.compatible_backends);
  const onDevices = (tag: string): boolean => devicesFor(node, tag).length > 0;
  const unrankedGpu = unranked.filter(onDevices);
  const order = [...unrankedGpu, ...unranked.filter((tag) => !onDevices(tag))];
  let best: BackendChoice | null = null;
  for (const tag of card.compatible_backends) {
    if (!node.backends.includes(tag)) continue;
    if (engine !== undefined && engineOf(tag) !== engine) continue;
    const preferred = preference.indexOf(tag);
    const rank = preferred >= 0 ? preferred : preference.length + order.indexOf(tag);
    if (best === null || rank < best.rank) best = { tag, rank };
  }
  return best;
}

/**
 * Bytes a part on this node may take with this backend: the devices' free VRAM for a GPU tag (on unified
 * memory no more than the node's RAM, which it is), the node's free RAM otherwise.
 */
export function capacityBytes(node: KnownNode, backend: string): number {
  const devices = devicesFor(node, backend);
  if (devices.length === 0) return node.freeBytes;
  const vram = devices.reduce((sum, d) => sum + d.freeBytes, 0);
  return devices.some((d) => d.unifiedMemory) ? Math.min(vram, node.freeBytes) : vram;
}

/**
 * Parts that run on GPUs first (see chooseBackend), then most free memory (capacityBytes), then better
 * backend rank, then node id so equal nodes order the same everywhere.
 */
export function byMemoryThenPreference<T extends { node: KnownNode; backend: BackendChoice }>(a: T, b: T): number {
  const [ga, gb] = [devicesFor(a.node, a.backend.tag).length > 0, devicesFor(b.node, b.backend.tag).length > 0];
  if (ga !== gb) return ga ? -1 : 1;
  const [ca, cb] = [capacityBytes(a.node, a.backend.tag), capacityBytes(b.node, b.backend.tag)];
  if (ca !== cb) return cb - ca;
  if (a.backend.rank !== b.backend.rank) return a.backend.rank - b.backend.rank;
  return a.node.nodeId < b.node.nodeId ? -1 : a.node.nodeId > b.node.nodeId ? 1 : 0;
}

/** What a node reports of one GPU (src/wire/telemetry.ts GpuReading), as far as placement reads it. */
export interface GpuFigures {
  index: number;
  name: string;
  compute: GpuCompute;
  vramFreeBytes: number;
  unifiedMemory: boolean;
}

/**
 * A node's GPUs as placement may use them. With a `--vram-budget` each device offers at most the budget
 * less what the instances placed there are expected to take on it (`committedBytes(index)`: parts not
 * loaded yet do not show in free VRAM, so free alone would double-book), always capped by its free VRAM;
 * without one, its free VRAM (like `--memory-budget` for RAM, src/cluster/telemetry.ts offerBytes).
 */
export function plannerGpus(readings: readonly GpuFigures[], vramBudgetBytes: number | null, committedBytes: (index: number) => number): PlannerGpu[] {
  return readings.map((g) => ({
    index: g.index,
    name: g.name,
    compute: g.compute,
    freeBytes: vramBudgetBytes === null ? g.vramFreeBytes : Math.max(0, Math.min(g.vramFreeBytes, vramBudgetBytes - committedBytes(g.index))),
    unifiedMemory: g.unifiedMemory,
  }));
}
