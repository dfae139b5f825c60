// One node's part on its GPUs: which of its layers each device holds, what stays in system RAM, and
// whether it all fits. Pure arithmetic over GGUF facts and the node's readings.
//
// A part on a GPU backend is admitted against the free VRAM of each device it uses (estimateDevice: its
// layers' weights and KV, the output head and logits on the device holding the output, 10% overhead,
// DEVICE_FLOOR_BYTES) and, for what stays on the host, against the node's free RAM (estimateHost: the
// runner, the token embeddings, spilled layers). Several GPUs of one node are dealt layers in proportion
// to their room after fixed costs (split.ts), in index order, the output on the last.
//
// Spilling: when the layers do not all fit the devices, the first layers of the part stay in system RAM
// (llama.cpp offloads the last `-ngl` layers; with fewer than all, the output head stays on the CPU too),
// but only when the launch allows it (`allow_spill`): a spilled part decodes at host-RAM speed for its
// spilled layers, which is a choice to make knowingly. The most layers that fit stay on the devices.
//
// Unified memory (Apple silicon): the device's memory is the system RAM, so the device's bytes and the
// host's come out of one pool and are counted once: a device is offered no more than the node's RAM left
// after the host part.

import { admits, CONTEXT_STEP_TOKENS, estimateHost, estimateMemory, FIT_MARGIN_BYTES, type LayerShare, type MemoryEstimate, type MemoryOptions } from './memory.js';
import type { KnownNode, PlannerGpu } from './nodes.js';
import { splitRange, tensorSplitWeights } from './split.js';
import type { GgufFacts } from '../models/cards/gguf-facts.js';

/** One GPU's side of a part. */
export interface DevicePart {
  /** The device's index on its node (`--device <COMPUTE><index>` for llama-server). */
  index: number;
  name: string;
  share: LayerShare;
  /** Its `--tensor-split` weight among the node's devices: its layers, plus one on the device holding the output. */
  tensorSplit: number;
  estimate: MemoryEstimate;
  /** Free VRAM it was admitted against (for unified memory, capped by the node's RAM left). */
  freeBytes: number;
  fits: boolean;
}

export interface NodeFit {
  /** Empty for a part on a CPU backend. */
  devices: DevicePart[];
  /** What the part takes from system RAM (on a CPU backend: all of it). */
  host: MemoryEstimate;
  hostFits: boolean;
  /** `-ngl`: layers on the devices, plus one when the output head is offloaded; null on a CPU backend. */
  gpuLayers: number | null;
  /** Layers of the part left in system RAM on a GPU backend (0 when none spilled). */
  spilledLayers: number;
  /** Bytes the part takes out of the node's RAM: the host part, plus the devices' on unified memory. */
  ramBytes: number;
  fits: boolean;
  /** What did not fit, in words, when it does not. */
  reason: string | null;
}

export interface FitOptions {
  /** The part is the model's entry (a full copy or a split's driver): it holds the token embeddings. */
  entry: boolean;
  /** Layers may stay in system RAM when the devices cannot hold them all. */
  allowSpill: boolean;
}

function cpuFit(facts: GgufFacts, share: LayerShare, node: KnownNode, options: MemoryOptions): NodeFit {
  const host = estimateMemory(facts, share, options);
  const fits = admits(host, node.freeBytes);
  return { devices: [], host, hostFits: fits, gpuLayers: null, spilledLayers: 0, ramBytes: host.totalBytes, fits, reason: fits ? null : 'system RAM' };
}

/** The part with its last `offloaded` layers on `devices` and the rest in RAM. */
function fitWith(facts: GgufFacts, share: LayerShare, node: KnownNode, devices: readonly PlannerGpu[], offloaded: number, options: MemoryOptions, fit: FitOptions): NodeFit {
  const spilled = share.layerCount - offloaded;
  // The output is offloaded only with every layer (llama.cpp puts it on a GPU only when -ngl exceeds the layers).
  const outputOnDevice = share.holdsOutput && spilled === 0;
  const host = estimateHost(facts, { firstLayer: share.firstLayer, layerCount: spilled, holdsOutput: share.holdsOutput && !outputOnDevice }, options, fit.entry);
  const unified = devices.some((d) => d.unifiedMemory);
  const ramLeft = node.freeBytes - host.totalBytes - FIT_MARGIN_BYTES;
  const units = devices.map((d) => ({ freeBytes: d.unifiedMemory ? Math.max(0, Math.min(d.freeBytes, ramLeft)) : d.freeBytes, device: true }));
  const range = { firstLayer: share.firstLayer + spilled, layerCount: offloaded, holdsOutput: outputOnDevice };
  // Fewer layers than devices: the first devices take one each and the rest stay idle.
  const used = Math.max(1, Math.min(units.length, offloaded));
  const split = splitRange(facts, range, units.slice(0, used), options);
  const weights = tensorSplitWeights(split.parts);
  const parts: DevicePart[] = split.parts.map((part, i) => ({
    index: devices[i]!.index,
    name: devices[i]!.name,
    share: part.share,
    tensorSplit: weights[i]!,
    estimate: part.estimate,
    freeBytes: units[i]!.freeBytes,
    fits: part.admitted,
  }));
  const deviceBytes = parts.reduce((sum, p) => sum + p.estimate.totalBytes, 0);
  const ramBytes = host.totalBytes + (unified ? deviceBytes : 0);
  const hostFits = admits(host, node.freeBytes);
  const over = parts.filter((p) => !p.fits).map((p) => `GPU ${p.index}`);
  const fits = hostFits && split.ok;
  const reason = fits ? null : [...over, ...(hostFits ? [] : ['system RAM'])].join(', ');
  return { devices: parts, host, hostFits, gpuLayers: offloaded + (outputOnDevice ? 1 : 0), spilledLayers: spilled, ramBytes, fits, reason };
}

/**
 * `share` of the model on `node` with `backend`: on its devices of the backend's compute when it has any
 * (`devices`, from nodes.ts devicesFor), else in RAM. Without a fit, the all-on-devices attempt is
 * returned, so a refusal shows what every device was short of.
 */
export function fitOnNode(facts: GgufFacts, share: LayerShare, node: KnownNode, devices: readonly PlannerGpu[], options: MemoryOptions, fit: FitOptions): NodeFit {
  if (devices.length === 0 || share.layerCount === 0) return cpuFit(facts, share, node, options);
  const whole = fitWith(facts, share, node, devices, share.layerCount, options, fit);
  if (whole.fits || !fit.allowSpill) return whole;
  for (let offloaded = share.layerCount - 1; offloaded >= 1; offloaded--) {
    const spilled = fitWith(facts, share, node, devices, offloaded, options, fit);
    if (spilled.fits) return spilled;
  }
  return whole;
}

/**
 * The largest context per sequence (a multiple of 256, no larger than the trained context) at which the
 * share still fits the node with `offloaded` of its layers on the devices, as planned; 0 when not even
 * 256 tokens fit. Every context-dependent term grows with the context, so a bisection finds it.
 */
export function deviceContextCeiling(facts: GgufFacts, share: LayerShare, node: KnownNode, devices: readonly PlannerGpu[], offloaded: number, parallel: number, options: MemoryOptions, entry: boolean): number {
  const cap = Math.max(CONTEXT_STEP_TOKENS, Math.floor(facts.trainedContext / CONTEXT_STEP_TOKENS) * CONTEXT_STEP_TOKENS);
  const fitsAt = (tokens: number): boolean => fitWith(facts, share, node, devices, offloaded, { ...options, contextTokens: tokens, sequences: parallel }, { entry, allowSpill: false }).fits;
  let [lo, hi] = [0, cap / CONTEXT_STEP_TOKENS];
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fitsAt(mid * CONTEXT_STEP_TOKENS)) lo = mid;
    else hi = mid - 1;
  }
  return lo * CONTEXT_STEP_TOKENS;
}
