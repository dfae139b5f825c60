// The shapes a plan takes and the helpers the planner's parts share: pure data and arithmetic.

import { formatBytes } from '../common/format-bytes.js';
import type { NodeId } from '../common/ids.js';
import type { FlashAttentionMode, ModelCard } from '../models/cards/card.js';
import type { GgufFacts } from '../models/cards/gguf-facts.js';
import type { NodeShortfall, PlacementError } from './errors.js';
import { contextCeiling, fullShare, requiredFreeBytes, type KvCacheType, type MemoryEstimate, type MemoryOptions } from './memory.js';
import type { BackendChoice, ClusterNode, KnownNode } from './nodes.js';
import { predictDecode, type SpeedPrediction } from './speed.js';

export interface PlanInput {
  card: ModelCard;
  facts: GgufFacts;
  nodes: readonly ClusterNode[];
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
}

/** Where a plan's slot count and context came from: the launch, the card, the planner's default, or what fits. */
export interface Sizing {
  parallel: 'request' | 'card' | 'memory fit';
  contextTokens: 'request' | 'card' | 'default' | 'memory fit';
}

export type PlacementRole = 'full' | 'driver' | 'donor';

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
  freeBytes: number;
  estimate: MemoryEstimate;
  /** Largest context per sequence that fits this node's share. */
  contextCeiling: number;
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
}

/** A node that can run the card, with the backend it would use. */
export interface Candidate {
  node: KnownNode;
  backend: BackendChoice;
}

export function fail(error: PlacementError): PlanResult {
  return { ok: false, error };
}

export function memoryOptions(request: Request): MemoryOptions {
  return { contextTokens: request.contextTokens, sequences: request.parallel, kvCacheType: request.kvCacheType, flashAttention: request.flashAttention };
}

export function describeAsk(card: ModelCard, request: Request): string {
  const seqs = request.parallel === 1 ? '1 sequence' : `${request.parallel} sequences`;
  return `${card.id} at ${request.contextTokens} tokens × ${seqs}`;
}

export function shortfallOf(nodeId: NodeId, role: NodeShortfall['role'], freeBytes: number, estimate: MemoryEstimate): NodeShortfall {
  return { nodeId, role, neededBytes: requiredFreeBytes(estimate), freeBytes, estimate };
}

export function describeShortfalls(list: readonly NodeShortfall[]): string {
  return list.map((s) => `${s.nodeId} (${s.role}) needs ${formatBytes(s.neededBytes)}, has ${formatBytes(s.freeBytes)}`).join('; ');
}

export function buildPlan(input: PlanInput, request: Request, shape: Plan['shape'], placements: Placement[], speed: SpeedPrediction, warnings: string[]): Plan {
  if (request.contextTokens > input.facts.trainedContext) {
    warnings.push(`the context asked for (${request.contextTokens}) is beyond the ${input.facts.trainedContext} tokens the model was trained on`);
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
    speedArithmetic: speed.arithmetic,
    warnings,
    exclusions: request.exclusions,
    replicas: request.replicas,
    minNodes: request.minNodes,
    refusal: { hops: 0, fellBack: false },
  };
}

export function fullPlacement(input: PlanInput, request: Request, c: Candidate, estimate: MemoryEstimate): Placement {
  const { facts } = input;
  return {
    nodeId: c.node.nodeId,
    role: 'full',
    backend: c.backend.tag,
    layerShare: { firstLayer: 0, layerCount: facts.blockCount, fraction: 1 },
    holdsOutput: true,
    freeBytes: c.node.freeBytes,
    estimate,
    contextCeiling: contextCeiling(facts, c.node.freeBytes, request.parallel, { kvCacheType: request.kvCacheType, flashAttention: request.flashAttention }),
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
  };
}

/** `--tensor-split` for a pooled plan, in llama.cpp's device order (the `--rpc` donors as listed, then the driver). */
export function tensorSplitArg(plan: Plan): string | null {
  if (plan.shape !== 'pooled') return null;
  return plan.placements.map((p) => p.tensorSplit ?? 0).join(',');
}
