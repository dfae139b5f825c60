// Placement on a live node: gathers the planner's inputs (card, GGUF facts, the members' resources),
// runs the pure planner, and turns plans into PlaceInstance / EndInstance commands. Any node can place;
// the master only checks the decision against the roster (decide.ts).

import { errorMessage, ShoalError } from '../common/errors.js';
import { newInstanceId, type InstanceId, type NodeId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import type { ModelCapability } from '../wire/capability.js';
import type { Command } from '../master/state/commands.js';
import type { InstanceEndReason, InstanceSpec, InstanceState } from '../master/state/instances.js';
import { MAX_INSTANCE_WARNINGS, INSTANCE_TEXT_MAX_CHARS } from '../master/state/instances.js';
import type { ClusterState } from '../master/state/state.js';
import { resolveBuiltinModel } from '../models/builtin-store.js';
import type { CardKvCacheType, FlashAttentionMode, ModelCard } from '../models/cards/card.js';
import { loadCatalog } from '../models/cards/catalog.js';
import { readGgufFacts, type GgufFacts } from '../models/cards/gguf-facts.js';
import { modelsDir } from '../common/paths.js';
import type { PlacementError } from './errors.js';
import type { ClusterNode } from './nodes.js';
import { planPlacement, type Plan, type PlanOptions, type PlanResult } from './planner.js';
import { replanAfterDownloadFailure, replanAfterRefusal } from './replan.js';
import { estimateMemory } from './memory.js';

/** A placement the planner refused, with its typed reason for the HTTP body and the CLI. */
export class PlacementFailure extends ShoalError {
  constructor(readonly placement: PlacementError) {
    super('PLACEMENT_FAILED', `cannot place: ${placement.message}`);
  }
}

export interface PlaceRequest {
  model: string;
  replicas?: number;
  exclude?: string[];
  minNodes?: number;
  contextTokens?: number;
  parallel?: number;
  kvCacheType?: CardKvCacheType;
  flashAttention?: FlashAttentionMode;
}

export interface PlacementPlane {
  readonly nodeId: NodeId;
  view(): { state: ClusterState };
  submit(command: Command): Promise<{ idx: number }>;
  ensureClusterExists(): Promise<unknown>;
}

export interface PlacementServiceOptions {
  dataDir: string;
  plane: PlacementPlane;
  /** The members as placement sees them now (active, connected, with fresh resources). */
  nodes: () => Promise<ClusterNode[]>;
  /** A model file on this node's disk, for an id whose card is a hub download; null when not there. */
  downloadedPath: (modelId: string) => Promise<string | null>;
  log: Logger;
}

export interface ModelFacts {
  card: ModelCard;
  facts: GgufFacts;
  /** Where the file is on this node, when it is. */
  path: string | null;
}

function capabilitiesOf(card: ModelCard): ModelCapability[] {
  const out: ModelCapability[] = [];
  if (card.tasks.includes('chat')) out.push('chat');
  if (card.tasks.includes('completion')) out.push('completion');
  if (card.tasks.includes('embeddings')) out.push('embeddings');
  if (card.capabilities.tools) out.push('tools');
  return out;
}

function clip(text: string): string {
  return text.length <= INSTANCE_TEXT_MAX_CHARS ? text : `${text.slice(0, INSTANCE_TEXT_MAX_CHARS - 1)}…`;
}

/** A plan as replicated state keeps it. */
export function specFromPlan(plan: Plan, card: ModelCard, instanceId: InstanceId, nowMs: number): InstanceSpec {
  return {
    instanceId,
    modelId: card.id,
    shape: plan.shape,
    placements: plan.placements.map((p) => ({
      nodeId: p.nodeId,
      role: p.role,
      backend: p.backend,
      firstLayer: p.layerShare.firstLayer,
      layerCount: p.layerShare.layerCount,
      holdsOutput: p.holdsOutput,
      tensorSplit: p.tensorSplit ?? null,
      estimatedBytes: Math.ceil(p.estimate.totalBytes),
    })),
    contextTokens: plan.contextTokens,
    parallel: plan.parallel,
    kvCacheType: plan.kvCacheType,
    flashAttention: plan.flashAttention,
    capabilities: capabilitiesOf(card),
    exclusions: plan.exclusions,
    replicas: plan.replicas,
    minNodes: plan.minNodes,
    refusal: plan.refusal,
    // 0: no prediction (speed.ts has no model for the placement's backend).
    predictedDecodeTokPerS: plan.predictedDecodeTokPerS ?? 0,
    warnings: plan.warnings.slice(0, MAX_INSTANCE_WARNINGS).map(clip),
    createdAtMs: nowMs,
  };
}

/** The plan an instance was made from, rebuilt from state, so replan.ts can continue its chain. */
export function planFromSpec(spec: InstanceSpec, facts: GgufFacts): Plan {
  return {
    modelId: spec.modelId,
    shape: spec.shape,
    placements: spec.placements.map((p) => ({
      nodeId: p.nodeId,
      role: p.role,
      backend: p.backend,
      layerShare: { firstLayer: p.firstLayer, layerCount: p.layerCount, fraction: facts.blockCount > 0 ? p.layerCount / facts.blockCount : 1 },
      holdsOutput: p.holdsOutput,
      ...(p.tensorSplit !== null ? { tensorSplit: p.tensorSplit } : {}),
      freeBytes: 0,
      estimate: estimateMemory(facts, { firstLayer: p.firstLayer, layerCount: p.layerCount, holdsOutput: p.holdsOutput }, { contextTokens: spec.contextTokens, sequences: spec.parallel, kvCacheType: spec.kvCacheType, flashAttention: spec.flashAttention ?? 'auto' }),
      contextCeiling: spec.contextTokens,
    })),
    contextTokens: spec.contextTokens,
    contextCeiling: spec.contextTokens,
    parallel: spec.parallel,
    kvCacheType: spec.kvCacheType,
    flashAttention: spec.flashAttention ?? 'auto',
    // A stamped instance's knobs are settled: a re-placement keeps them as if asked for.
    sizing: { parallel: 'request', contextTokens: 'request' },
    predictedDecodeTokPerS: spec.predictedDecodeTokPerS,
    speedArithmetic: [],
    warnings: spec.warnings,
    exclusions: spec.exclusions,
    replicas: spec.replicas,
    minNodes: spec.minNodes,
    refusal: spec.refusal,
  };
}

export class PlacementService {
  constructor(private readonly options: PlacementServiceOptions) {}

  /** The card and GGUF facts of a model this node knows; typed errors say what to do when it cannot. */
  async modelFacts(modelId: string): Promise<ModelFacts> {
    const catalog = await loadCatalog(this.options.dataDir);
    const entry = catalog.entries.get(modelId);
    if (!entry) {
      const known = [...catalog.entries.keys()];
      throw new ShoalError('MODEL_NOT_FOUND', `no model card '${modelId}' on this node (known: ${known.join(', ')}): add it with \`shoal models add <repo>\``, { param: 'model' });
    }
    const { card } = entry;
    let path: string | null;
    switch (card.source.kind) {
      case 'builtin': {
        const resolved = await resolveBuiltinModel(card.source.spec, modelsDir(this.options.dataDir));
        path = resolved?.path ?? null;
        break;
      }
      case 'file':
        path = card.source.path;
        break;
      case 'huggingface':
        path = await this.options.downloadedPath(card.id);
        break;
    }
    if (path === null) {
      throw new ShoalError('MODEL_LOADING', `the GGUF of '${modelId}' is not on this node yet, so its size and layers are unknown: run \`shoal models pull ${modelId}\` first`);
    }
    try {
      return { card, facts: await readGgufFacts(path), path };
    } catch (error) {
      throw new ShoalError('MODEL_FAILED', `cannot read the GGUF header of '${modelId}' at ${path}: ${errorMessage(error)}`, { cause: error });
    }
  }

  async plan(request: PlaceRequest): Promise<{ model: ModelFacts; result: PlanResult }> {
    const model = await this.modelFacts(request.model);
    const options: PlanOptions = {
      ...(request.replicas !== undefined ? { replicas: request.replicas } : {}),
      ...(request.minNodes !== undefined ? { minNodes: request.minNodes } : {}),
      ...(request.contextTokens !== undefined ? { contextTokens: request.contextTokens } : {}),
      ...(request.parallel !== undefined ? { parallel: request.parallel } : {}),
      ...(request.kvCacheType !== undefined ? { kvCacheType: request.kvCacheType } : {}),
      ...(request.flashAttention !== undefined ? { flashAttention: request.flashAttention } : {}),
      exclusions: this.resolveNodes(request.exclude ?? []),
    };
    const nodes = await this.options.nodes();
    return { model, result: planPlacement({ card: model.card, facts: model.facts, nodes }, options) };
  }

  /** Plans and records an instance; resolves once the master decided it. */
  async place(request: PlaceRequest): Promise<InstanceSpec> {
    await this.options.plane.ensureClusterExists();
    const { model, result } = await this.plan(request);
    if (!result.ok) throw new PlacementFailure(result.error);
    const spec = specFromPlan(result.plan, model.card, newInstanceId(), Date.now());
    await this.options.plane.submit({ type: 'PlaceInstance', instance: spec });
    this.options.log.info({ instanceId: spec.instanceId, modelId: spec.modelId, shape: spec.shape, nodes: spec.placements.map((p) => `${p.nodeId}:${p.role}`) }, 'placed an instance');
    return spec;
  }

  async end(instanceId: string, reason: InstanceEndReason, message: string): Promise<void> {
    if (this.options.plane.view().state.instances[instanceId as InstanceId] === undefined) {
      throw new ShoalError('NOT_FOUND', `no instance '${instanceId}': list them with \`shoal models ls\``);
    }
    await this.options.plane.submit({ type: 'EndInstance', instanceId: instanceId as InstanceId, reason, message: clip(message), successor: null });
  }

  /**
   * Re-places an instance after something went wrong on `nodeId` (bounded, see replan.ts): its memory
   * guard refused, its download failed, or it was lost. Ends the instance with a reason when no
   * re-placement exists. Submits one EndInstance either way.
   */
  async replace(instance: InstanceState, nodeId: NodeId, why: 'refused' | 'download-failed' | 'lost'): Promise<void> {
    let model: ModelFacts;
    try {
      model = await this.modelFacts(instance.modelId);
    } catch (error) {
      await this.submitEnd(instance, 'failed', `could not re-place after ${why} on ${nodeId}: ${errorMessage(error)}`, null);
      return;
    }
    // The instance being replaced gives its memory back: count its parts as free where they are.
    const released = new Map<string, number>();
    for (const p of instance.placements) released.set(p.nodeId, (released.get(p.nodeId) ?? 0) + p.estimatedBytes);
    const nodes = (await this.options.nodes())
      .filter((n) => why !== 'lost' || n.nodeId !== nodeId)
      .map((n) => (n.freeBytes === null ? n : { ...n, freeBytes: n.freeBytes + (released.get(n.nodeId) ?? 0) }));
    const input = { card: model.card, facts: model.facts, nodes };
    const previous = planFromSpec(instance, model.facts);
    const result =
      why === 'refused'
        ? replanAfterRefusal(previous, nodeId, input)
        : why === 'download-failed'
          ? replanAfterDownloadFailure(previous, nodeId, input)
          : planPlacement(input, { exclusions: instance.exclusions, replicas: instance.replicas, minNodes: instance.minNodes, contextTokens: instance.contextTokens, parallel: instance.parallel, kvCacheType: instance.kvCacheType, flashAttention: instance.flashAttention ?? 'auto' });
    if (!result.ok) {
      await this.submitEnd(instance, why === 'lost' ? 'node-lost' : 'failed', `${why} on ${nodeId}, and it cannot be re-placed: ${result.error.message}`, null);
      return;
    }
    const successor = specFromPlan(result.plan, model.card, newInstanceId(), Date.now());
    await this.submitEnd(instance, 'replaced', `${why} on ${nodeId}: re-placed as ${successor.instanceId}`, successor);
  }

  private async submitEnd(instance: InstanceState, reason: InstanceEndReason, message: string, successor: InstanceSpec | null): Promise<void> {
    this.options.log.warn({ instanceId: instance.instanceId, reason, successor: successor?.instanceId ?? null }, message);
    await this.options.plane.submit({ type: 'EndInstance', instanceId: instance.instanceId, reason, message: clip(message), successor });
  }

  /** Node ids, names or nicknames → node ids; unknown ones are a typed error rather than ignored. */
  private resolveNodes(selectors: string[]): NodeId[] {
    const members = Object.values(this.options.plane.view().state.members);
    return selectors.map((selector) => {
      const match = members.find((m) => m.nodeId === selector || m.name === selector || m.nickname === selector);
      if (!match) throw new ShoalError('BAD_REQUEST', `--exclude '${selector}' names no member (use a node id, name or nickname from \`shoal status\`)`);
      return match.nodeId;
    });
  }
}
