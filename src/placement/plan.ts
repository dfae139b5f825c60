// The shapes a plan takes and the helpers the planner's parts share: pure data and arithmetic.

import { formatBytes } from '../common/format-bytes.js';
import type { NodeId } from '../common/ids.js';
import { engineOf, type FlashAttentionMode, type ModelCard } from '../models/cards/card.js';
import type { GgufFacts } from '../models/cards/gguf-facts.js';
import type { NodeShortfall, PlacementError } from './errors.js';
import { contextCeiling, fullShare, requiredFreeBytes, type KvCacheType, type LayerShare, type MemoryEstimate, type MemoryOptions } from './memory.js';
import { devicesFor, type BackendChoice, type ClusterNode, type KnownNode, type PlannerGpu } from './nodes.js';
import { deviceContextCeiling, fitOnNode, type DevicePart, type NodeFit } from './devices.js';
import { predictDecode, type SpeedPrediction } from './speed.js';

export interface PlanInput {
  card: ModelCard;
  facts: GgufFacts;
  nodes: readonly ClusterNode[];
  /**
   * The GGUF facts of the card's speculative draft (runtime.speculative), which llama-server loads
   * beside the model: counted with the part holding the output. Absent for a card that names a draft
   * not on this node: its memory is then not counted, and the plan says so.
   */
  draft?: GgufFacts | undefined;
  /**
   * The bytes of the card's projector file (a vision card's mmproj), which llama-server loads beside
   * the model: counted with the part holding the output. Absent when the card names none or the file
   * is not on this node.
   */
  projectorBytes?: number | undefined;
}

/** Per-launch choices; each defaults to the card's runtime knob, else planner.ts's default. */
export interface PlanOptions {
  exclusions?: readonly NodeId[];
  replicas?: number;
  minNodes?: number;
  contextTokens?: number;
  parallel?: number;
  kvCacheType?: KvCacheType;
  flashAttention?: FlashAttentionMode;
  /** Layers may stay in system RAM when a node's GPUs cannot hold its part (devices.ts); default false. */
  allowSpill?: boolean;
}

/** Where a plan's slot count and context came from: the launch, the card, the planner's default, or what fits. */
export interface Sizing {
  parallel: 'request' | 'card' | 'memory fit';
  contextTokens: 'request' | 'card' | 'default' | 'memory fit';
}

export type PlacementRole = 'full' | 'driver' | 'donor';

/** One GPU's side of a placement (devices.ts DevicePart), as the plan and the dry run carry it. */
export interface PlacedDevice {
  /** The device's index on its node (`--device CUDA<index>` and the like). */
  index: number;
  name: string;
  firstLayer: number;
  layerCount: number;
  holdsOutput: boolean;
  /**
   * Its `--tensor-split` weight: its layers, plus one on the device holding the output. Within a node the
   * node's devices' weights, in index order, are its `--tensor-split`; in a pooled plan every placement's
   * devices in plan order (a CPU placement counting as one device with its `tensorSplit`) are the driver's.
   */
  tensorSplit: number;
  /** Bytes of VRAM the planner expects it to take, and the free VRAM it was admitted against. */
  bytes: number;
  freeBytes: number;
  fits: boolean;
}

export interface Placement {
  nodeId: NodeId;
  role: PlacementRole;
  /** The backend tag the node runs it with. */
  backend: string;
  /** Layers held, in llama.cpp's device order, and their fraction of the model's layers. */
  layerShare: { firstLayer: number; layerCount: number; fraction: number };
  holdsOutput: boolean;
  /** Pooled only: this node's `--tensor-split` weight (its layers, plus one for the output on the driver). */
  tensorSplit?: number;
  /** Free system RAM it was admitted against. */
  freeBytes: number;
  /** What it takes from system RAM: on a GPU backend the host side only (runner, embeddings, spilled layers). */
  estimate: MemoryEstimate;
  /** Largest context per sequence that fits this node's share. */
  contextCeiling: number;
  /** The GPUs it runs on, in index order; empty on a CPU backend. */
  devices: PlacedDevice[];
  /** `-ngl`: layers on this node's GPUs, plus one when the output head is offloaded; null on a CPU backend. */
  gpuLayers: number | null;
  /** Layers of its share left in system RAM on a GPU backend (only with allowSpill). */
  spilledLayers: number;
  /** Bytes it takes out of the node's RAM (the host part, plus the devices' on unified memory). */
  ramBytes: number;
}

export interface RefusalState {
  /** Re-placements after memory refusals so far. */
  hops: number;
  /** Whether the last one was the single-node fallback (after which a refusal is terminal). */
  fellBack: boolean;
}

export interface Plan {
  modelId: string;
  shape: 'single' | 'replicas' | 'pooled';
  /** single: one; replicas: one per copy; pooled: donors in device order, then the driver last. */
  placements: Placement[];
  contextTokens: number;
  /** Smallest ceiling over the placements: the window the instance may serve, the same everywhere. */
  contextCeiling: number;
  parallel: number;
  kvCacheType: KvCacheType;
  flashAttention: FlashAttentionMode;
  sizing: Sizing;
  /** Single-stream decode estimate (speed.ts); for replicas, the slowest copy; null where the model has none. */
  predictedDecodeTokPerS: number | null;
  /**
   * With no figure because some part runs where nothing was measured (a GPU): the most the parts that were
   * measured allow (speed.ts upperBoundTokPerS), else null.
   */
  decodeUpperBoundTokPerS: number | null;
  /** Whether layers may stay in system RAM when GPUs cannot hold them (PlanOptions.allowSpill). */
  allowSpill: boolean;
  speedArithmetic: string[];
  warnings: string[];
  exclusions: NodeId[];
  replicas: number;
  minNodes: number;
  refusal: RefusalState;
}

export type PlanResult = { ok: true; plan: Plan } | { ok: false; error: PlacementError };

/** A request with every default resolved. */
export interface Request {
  contextTokens: number;
  parallel: number;
  replicas: number;
  minNodes: number;
  kvCacheType: KvCacheType;
  flashAttention: FlashAttentionMode;
  sizing: Sizing;
  exclusions: NodeId[];
  allowSpill: boolean;
  /** The draft to count (PlanInput.draft); absent when the card names none or its facts are unknown. */
  draft: GgufFacts | undefined;
  /** The projector's bytes to count (PlanInput.projectorBytes). */
  projectorBytes: number | undefined;
}

/** A node that can run the card, with the backend it would use. */
export interface Candidate {
  node: KnownNode;
  backend: BackendChoice;
  /** The node's GPUs the backend runs on (nodes.ts devicesFor); empty on a CPU backend. */
  devices: PlannerGpu[];
}

export function candidateOf(node: KnownNode, backend: BackendChoice): Candidate {
  return { node, backend, devices: devicesFor(node, backend.tag) };
}

export function fail(error: PlacementError): PlanResult {
  return { ok: false, error };
}

export function memoryOptions(request: Request): MemoryOptions {
  return {
    contextTokens: request.contextTokens,
    sequences: request.parallel,
    kvCacheType: request.kvCacheType,
    flashAttention: request.flashAttention,
    ...(request.draft !== undefined ? { draft: request.draft } : {}),
    ...(request.projectorBytes !== undefined ? { projectorBytes: request.projectorBytes } : {}),
  };
}

/** memoryOptions for a part run by `backend`: only llama-server loads a draft or a projector (the in-process engine and ggml-rpc-server do not). */
export function partOptions(request: Request, backend: string): MemoryOptions {
  const options = memoryOptions(request);
  if (engineOf(backend) === 'llama_server') return options;
  const { draft: _draft, projectorBytes: _projector, ...withoutCompanions } = options;
  return withoutCompanions;
}

export function describeAsk(card: ModelCard, request: Request): string {
  const seqs = request.parallel === 1 ? '1 sequence' : `${request.parallel} sequences`;
  return `${card.id} at ${request.contextTokens} tokens × ${seqs}`;
}

export function shortfallOf(nodeId: NodeId, role: NodeShortfall['role'], freeBytes: number, estimate: MemoryEstimate, devices: readonly DevicePart[] = []): NodeShortfall {
  return {
    nodeId,
    role,
    neededBytes: requiredFreeBytes(estimate),
    freeBytes,
    estimate,
    ...(devices.length > 0 ? { devices: devices.map((d) => ({ index: d.index, neededBytes: requiredFreeBytes(d.estimate), freeBytes: d.freeBytes, estimate: d.estimate })) } : {}),
  };
}

export function fitShortfall(nodeId: NodeId, role: NodeShortfall['role'], node: KnownNode, fit: NodeFit): NodeShortfall {
  return shortfallOf(nodeId, role, node.freeBytes, fit.host, fit.devices);
}

/** Whether the node (its RAM or any of its GPUs) lacks what the estimate needs. */
export function isShort(s: NodeShortfall): boolean {
  return s.neededBytes > s.freeBytes || (s.devices ?? []).some((d) => d.neededBytes > d.freeBytes);
}

export function describeShortfalls(list: readonly NodeShortfall[]): string {
  return list
    .map((s) => {
      const ram = `${formatBytes(s.neededBytes)}, has ${formatBytes(s.freeBytes)}`;
      if (s.devices === undefined) return `${s.nodeId} (${s.role}) needs ${ram}`;
      const gpus = s.devices.map((d) => `GPU ${d.index} needs ${formatBytes(d.neededBytes)} of VRAM, has ${formatBytes(d.freeBytes)}`).join(', ');
      return `${s.nodeId} (${s.role}) ${gpus}; RAM needs ${ram}`;
    })
    .join('; ');
}

/** The refusal's hint when a GPU node could have spilled layers to RAM but was not allowed to. */
export function spillHint(request: Request, shortfalls: readonly NodeShortfall[]): string {
  return !request.allowSpill && shortfalls.some((s) => s.devices !== undefined) ? ' (layers that do not fit a GPU may stay in system RAM with allow_spill / --allow-spill)' : '';
}

export function buildPlan(input: PlanInput, request: Request, shape: Plan['shape'], placements: Placement[], speed: SpeedPrediction, warnings: string[]): Plan {
  if (request.contextTokens > input.facts.trainedContext) {
    warnings.push(`the context asked for (${request.contextTokens}) is beyond the ${input.facts.trainedContext} tokens the model was trained on`);
  }
  const speculative = input.card.runtime.speculative;
  if (speculative !== undefined && request.draft === undefined && placements.some((p) => engineOf(p.backend) === 'llama_server')) {
    warnings.push(
      `the draft ${speculative.draft} is not on this node, so its weights and KV cache are not counted in this plan (the node serving the model fetches it at launch): run \`shoal models pull ${speculative.draft}\` and place again for a fit that counts it`,
    );
  }
  if (input.card.projector !== undefined && request.projectorBytes === undefined) {
    warnings.push(`the projector of ${input.card.id} is not on this node, so its bytes are not counted in this plan: run \`shoal models pull ${input.card.id}\` and place again for a fit that counts it`);
  }
  return {
    modelId: input.card.id,
    shape,
    placements,
    contextTokens: request.contextTokens,
    contextCeiling: Math.min(...placements.map((p) => p.contextCeiling)),
    parallel: request.parallel,
    kvCacheType: request.kvCacheType,
    flashAttention: request.flashAttention,
    sizing: request.sizing,
    predictedDecodeTokPerS: speed.tokPerS,
    decodeUpperBoundTokPerS: speed.upperBoundTokPerS,
    allowSpill: request.allowSpill,
    speedArithmetic: speed.arithmetic,
    warnings,
    exclusions: request.exclusions,
    replicas: request.replicas,
    minNodes: request.minNodes,
    refusal: { hops: 0, fellBack: false },
  };
}

export function placedDevices(fit: NodeFit): PlacedDevice[] {
  return fit.devices.map((d) => ({
    index: d.index,
    name: d.name,
    firstLayer: d.share.firstLayer,
    layerCount: d.share.layerCount,
    holdsOutput: d.share.holdsOutput,
    tensorSplit: d.tensorSplit,
    bytes: d.estimate.totalBytes,
    freeBytes: d.freeBytes,
    fits: d.fits,
  }));
}

/** The placement's GPU fields from its fit. */
export function fitFields(fit: NodeFit): Pick<Placement, 'devices' | 'gpuLayers' | 'spilledLayers' | 'ramBytes' | 'estimate'> {
  return { devices: placedDevices(fit), gpuLayers: fit.gpuLayers, spilledLayers: fit.spilledLayers, ramBytes: fit.ramBytes, estimate: fit.host };
}

/** The full copy's fit on a candidate (RAM on a CPU backend, its GPUs otherwise). */
export function fullFit(input: PlanInput, request: Request, c: Candidate): NodeFit {
  return fitOnNode(input.facts, fullShare(input.facts), c.node, c.devices, partOptions(request, c.backend.tag), { entry: true, allowSpill: request.allowSpill });
}

/** Largest context per sequence at which the share still fits the node with the layout `fit` chose. */
export function ceilingOf(input: PlanInput, request: Request, c: Candidate, share: LayerShare, fit: NodeFit, entry: boolean): number {
  const { facts } = input;
  const options = partOptions(request, c.backend.tag);
  if (fit.gpuLayers === null) return contextCeiling(facts, c.node.freeBytes, request.parallel, { share, kvCacheType: request.kvCacheType, flashAttention: request.flashAttention, draft: options.draft, projectorBytes: options.projectorBytes });
  return deviceContextCeiling(facts, share, c.node, c.devices, share.layerCount - fit.spilledLayers, request.parallel, options, entry);
}

export function fullPlacement(input: PlanInput, request: Request, c: Candidate, fit: NodeFit): Placement {
  const { facts } = input;
  return {
    nodeId: c.node.nodeId,
    role: 'full',
    backend: c.backend.tag,
    layerShare: { firstLayer: 0, layerCount: facts.blockCount, fraction: 1 },
    holdsOutput: true,
    freeBytes: c.node.freeBytes,
    contextCeiling: ceilingOf(input, request, c, fullShare(facts), fit, true),
    ...fitFields(fit),
  };
}

export function singleSpeed(facts: GgufFacts, c: Candidate): SpeedPrediction {
  return predictDecode(facts, [{ share: fullShare(facts), backend: c.backend.tag, memoryBandwidthBytesPerS: c.node.memoryBandwidthBytesPerS, donor: false }]);
}

/** The options a plan was made with, so a re-placement can start from them. */
export function optionsOf(plan: Plan): Required<PlanOptions> {
  return {
    exclusions: plan.exclusions,
    replicas: plan.replicas,
    minNodes: plan.minNodes,
    contextTokens: plan.contextTokens,
    parallel: plan.parallel,
    kvCacheType: plan.kvCacheType,
    flashAttention: plan.flashAttention,
    allowSpill: plan.allowSpill,
  };
}

/**
 * `--tensor-split` in llama.cpp's device order: for a pooled plan every placement in plan order (the
 * `--rpc` donors as listed, then the driver), each GPU of it as its own device and a CPU part as one; for
 * a copy on several GPUs of one node, its devices' weights; null where one device holds it all.
 */
export function tensorSplitArg(plan: Plan): string | null {
  if (plan.shape === 'pooled') return tensorSplitOf(plan.placements);
  const devices = plan.placements[0]?.devices ?? [];
  return devices.length > 1 ? devices.map((d) => d.tensorSplit).join(',') : null;
}

/**
 * The same over plain parts (a plan's placements, or an instance's from state), so the engine side builds
 * the identical argument: each part's devices' weights where it has devices, else its own weight.
 */
export function tensorSplitOf(parts: readonly { tensorSplit?: number | null; devices?: readonly { tensorSplit: number }[] }[]): string {
  return parts.flatMap((p) => (p.devices !== undefined && p.devices.length > 0 ? p.devices.map((d) => d.tensorSplit) : [p.tensorSplit ?? 0])).join(',');
}
