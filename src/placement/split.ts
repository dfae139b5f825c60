// Proportional layer split for a pooled placement over llama.cpp RPC.
//
// Each node first pays its fixed costs (the floor; the driver also the embeddings, output head and
// logits workspace), then the layers are dealt in proportion to what is left on each node, by largest
// remainder, at least one layer each. Layers are contiguous in llama.cpp's device order: RPC devices
// come first (llama.cpp puts them at the front "to minimize network transfers") and the driver's own
// device last, where the output layer lands. Rounding and uneven layers can still tip one node over;
// a bounded repair moves single layers from an over-full node to the one with the most room.
// The same dealing places a part over several GPUs of one node (devices.ts): a unit is a node's RAM or
// one GPU, and a multi-GPU node is split per device.

import type { GgufFacts } from '../models/cards/gguf-facts.js';
import { admits, estimateDevice, estimateMemory, FIT_MARGIN_BYTES, kvBytesPerCell, OVERHEAD_FRACTION, shareWeightsBytes, type LayerShare, type MemoryEstimate, type MemoryOptions } from './memory.js';

/**
 * One memory a split deals layers to: a node's RAM (a CPU part, estimateMemory) or one GPU (estimateDevice:
 * no embeddings, DEVICE_FLOOR_BYTES). `device` absent means RAM.
 */
export interface SplitNode {
  freeBytes: number;
  device?: boolean;
}

export interface SplitPart {
  share: LayerShare;
  estimate: MemoryEstimate;
  admitted: boolean;
}

export type SplitResult = { ok: true; parts: SplitPart[] } | { ok: false; parts: SplitPart[]; reason: string };

/** The contiguous layers a split deals, and whether the last unit also holds the output. */
export interface LayerRange {
  firstLayer: number;
  layerCount: number;
  holdsOutput: boolean;
}

/**
 * `layers` dealt in proportion to `weights` by largest remainder (ties to the earlier node, so the result
 * is the same everywhere); a node left with none then takes one from the node with the most, since a
 * donor without layers would only add a hop.
 */
export function dealLayers(layers: number, weights: readonly number[]): number[] {
  const k = weights.length;
  if (k === 0 || layers < k) throw new RangeError(`cannot deal ${layers} layers over ${k} nodes, one each at least`);
  const positive = weights.map((w) => Math.max(0, w));
  const sum = positive.reduce((a, b) => a + b, 0);
  const exact = positive.map((w) => (sum > 0 ? (layers * w) / sum : layers / k));
  const counts = exact.map((x) => Math.floor(x));
  let left = layers - counts.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, frac: x - Math.floor(x) })).sort((a, b) => b.frac - a.frac || a.i - b.i);
  for (const { i } of order) {
    if (left === 0) break;
    counts[i]!++;
    left--;
  }
  for (let i = 0; i < k; i++) {
    if (counts[i]! > 0) continue;
    const richest = counts.indexOf(Math.max(...counts));
    counts[richest]!--;
    counts[i] = 1;
  }
  return counts;
}

function estimateUnit(facts: GgufFacts, unit: SplitNode, share: LayerShare, options: MemoryOptions): MemoryEstimate {
  return unit.device === true ? estimateDevice(facts, share, options) : estimateMemory(facts, share, options);
}

function partsFor(facts: GgufFacts, range: LayerRange, nodes: readonly SplitNode[], counts: readonly number[], options: MemoryOptions): SplitPart[] {
  let first = range.firstLayer;
  return counts.map((layerCount, i) => {
    const share: LayerShare = { firstLayer: first, layerCount, holdsOutput: range.holdsOutput && i === counts.length - 1 };
    first += layerCount;
    const estimate = estimateUnit(facts, nodes[i]!, share, options);
    return { share, estimate, admitted: admits(estimate, nodes[i]!.freeBytes) };
  });
}

/** Slack after admission: negative when the part does not fit. */
function slack(part: SplitPart, node: SplitNode): number {
  return node.freeBytes - FIT_MARGIN_BYTES - 1 - part.estimate.totalBytes;
}

/**
 * Splits the model's layers over `nodes`, given in llama.cpp device order: donors first, the driver
 * (which holds the output) last.
 */
export function proportionalSplit(facts: GgufFacts, nodes: readonly SplitNode[], options: MemoryOptions): SplitResult {
  if (nodes.length < 2) throw new RangeError('a split needs a driver and at least one donor');
  return splitRange(facts, { firstLayer: 0, layerCount: facts.blockCount, holdsOutput: true }, nodes, options);
}

/**
 * Deals `range` over `nodes` (RAM or GPUs, in device order; the last holds the output when the range
 * does): each first pays its fixed costs, then the layers go in proportion to the room left, and a
 * bounded repair moves single layers off a unit that rounding tipped over. One unit takes the range whole.
 */
export function splitRange(facts: GgufFacts, range: LayerRange, nodes: readonly SplitNode[], options: MemoryOptions): SplitResult {
  const k = nodes.length;
  const n = range.layerCount;
  if (k < 1) throw new RangeError('a split needs at least one unit');
  const what = nodes.every((u) => u.device === true) ? 'devices' : 'nodes';
  if (n < k) {
    const parts = partsFor(facts, range, nodes, [...new Array<number>(n).fill(1), ...new Array<number>(k - n).fill(0)], options);
    return { ok: false, parts, reason: `the model has ${n} layers, fewer than the ${k} ${what}` };
  }
  const fixed = nodes.map((unit, i) => estimateUnit(facts, unit, { firstLayer: range.firstLayer, layerCount: 0, holdsOutput: range.holdsOutput && i === k - 1 }, options).totalBytes);
  const room = nodes.map((node, i) => node.freeBytes - FIT_MARGIN_BYTES - fixed[i]!);
  const counts = dealLayers(n, room);
  let parts = partsFor(facts, range, nodes, counts, options);

  // A typical layer's cost, to move a layer only where it will fit (no ping-pong between two nodes).
  const all = { firstLayer: range.firstLayer, layerCount: n, holdsOutput: false };
  const layerCost =
    (shareWeightsBytes(facts, all) / n) * (1 + OVERHEAD_FRACTION) + (kvBytesPerCell(facts, all, options.kvCacheType) / n) * options.contextTokens * options.sequences;
  for (let step = 0; step < n * k && parts.some((p) => !p.admitted); step++) {
    const from = parts.findIndex((p, i) => !p.admitted && counts[i]! > 1);
    if (from < 0) break;
    let to = -1;
    for (let i = 0; i < k; i++) {
      if (i === from) continue;
      if (slack(parts[i]!, nodes[i]!) > layerCost * 1.5 && (to < 0 || slack(parts[i]!, nodes[i]!) > slack(parts[to]!, nodes[to]!))) to = i;
    }
    if (to < 0) break;
    counts[from]!--;
    counts[to]!++;
    parts = partsFor(facts, range, nodes, counts, options);
  }
  if (parts.every((p) => p.admitted)) return { ok: true, parts };
  const over = parts.filter((p) => !p.admitted).length;
  return { ok: false, parts, reason: `${over} of ${k} ${what} would still be over their memory` };
}

/**
 * `--tensor-split` weights in device order: each part's layer count, plus one on the driver for the
 * output layer. llama.cpp assigns layer l to the first device whose cumulative weight exceeds
 * l / (layers + 1), with the output as layer `layers`; integer counts make that land exactly on these
 * ranges.
 */
export function tensorSplitWeights(parts: readonly { share: LayerShare }[]): number[] {
  return parts.map((p) => p.share.layerCount + (p.share.holdsOutput ? 1 : 0));
}
