// Placement on a live node: gathers the planner's inputs (card, GGUF facts, the members' resources),
// runs the pure planner, and turns plans into PlaceInstance / EndInstance commands. Any node can place;
// the master only checks the decision against the roster (decide.ts).

import { stat } from 'node:fs/promises';
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
import { projectorPath } from '../models/projector-file.js';
import { transcriptionFacts } from './transcription-facts.js';
import { modelsDir } from '../common/paths.js';
import type { PlacementError } from './errors.js';
import type { ClusterNode } from './nodes.js';
import { planPlacement, type Plan, type PlanOptions, type PlanResult } from './planner.js';
import { replanAfterDownloadFailure, replanAfterRefusal } from './replan.js';
import { estimateMemory } from './memory.js';
import { awaitingApproval, memberName, plannedDownloads, type DownloadsPlan } from './downloads.js';
import type { RecordMoment } from '../diagnostics/recorder.js';

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
  /** Layers may stay in system RAM when a node's GPUs cannot hold its part (`launch --allow-spill`). */
  allowSpill?: boolean;
  /** The operator already said yes to the downloads it starts (`launch --yes`): nothing waits. */
  approveDownloads?: boolean;
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
  /** The members that report a complete copy of a model (artifacts telemetry), this node included. */
  holders: (modelId: string) => string[];
  log: Logger;
  /** The node's flight recorder: each placement decision made here is recorded (src/diagnostics/recorder.ts). */
  moments?: RecordMoment;
}

export interface ModelFacts {
  card: ModelCard;
  facts: GgufFacts;
  /** Where the file is on this node, when it is. */
  path: string | null;
  /**
   * The facts of the card's speculative draft (runtime.speculative) when its file is on this node, so
   * placement counts its memory; absent when the card names none or the draft is not here (the plan
   * then says its memory is not counted).
   */
  draft?: GgufFacts;
  /** The bytes of the card's projector file when it is on this node (a vision card), so placement counts them. */
  projectorBytes?: number;
}

function capabilitiesOf(card: ModelCard): ModelCapability[] {
  const out: ModelCapability[] = [];
  if (card.tasks.includes('chat')) out.push('chat');
  if (card.tasks.includes('completion')) out.push('completion');
  if (card.tasks.includes('embeddings')) out.push('embeddings');
  if (card.tasks.includes('transcription')) out.push('transcription');
  if (card.capabilities.tools) out.push('tools');
  if (card.capabilities.vision) out.push('vision');
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
      estimatedBytes: Math.ceil(p.ramBytes),
      ...(p.gpuLayers !== null
        ? { gpuLayers: p.gpuLayers, devices: p.devices.map((d) => ({ index: d.index, layerCount: d.layerCount, tensorSplit: d.tensorSplit, estimatedBytes: Math.ceil(d.bytes) })) }
        : {}),
    })),
    contextTokens: plan.contextTokens,
    parallel: plan.parallel,
    kvCacheType: plan.kvCacheType,
    flashAttention: plan.flashAttention,
    ...(plan.allowSpill ? { allowSpill: true } : {}),
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
      // The layers per device as placed; their names and free VRAM at placement time are not in state.
      devices: (p.devices ?? []).map((d) => ({ index: d.index, name: '', firstLayer: 0, layerCount: d.layerCount, holdsOutput: false, tensorSplit: d.tensorSplit, bytes: d.estimatedBytes, freeBytes: 0, fits: true })),
      gpuLayers: p.gpuLayers ?? null,
      spilledLayers: p.gpuLayers === undefined ? 0 : Math.max(0, p.layerCount - p.gpuLayers),
      ramBytes: p.estimatedBytes,
    })),
    contextTokens: spec.contextTokens,
    contextCeiling: spec.contextTokens,
    parallel: spec.parallel,
    kvCacheType: spec.kvCacheType,
    flashAttention: spec.flashAttention ?? 'auto',
    // A stamped instance's knobs are settled: a re-placement keeps them as if asked for.
    sizing: { parallel: 'request', contextTokens: 'request' },
    predictedDecodeTokPerS: spec.predictedDecodeTokPerS,
    decodeUpperBoundTokPerS: null,
    allowSpill: spec.allowSpill ?? false,
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
    const model = await this.ownFacts(modelId);
    const speculative = model.card.runtime.speculative;
    if (speculative === undefined) return model;
    // A draft that cannot be read costs its count in the plan, not the placement: it is optional at launch too (worker/draft.ts).
    const draft = await this.ownFacts(speculative.draft).catch(() => null);
    return draft === null ? model : { ...model, draft: draft.facts };
  }

  /** modelFacts without the draft (a draft's own card may name one: only the served card's counts). */
  private async ownFacts(modelId: string): Promise<ModelFacts> {
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
      case 'local':
        path = await this.options.downloadedPath(card.id);
        break;
    }
    if (path === null) {
      throw new ShoalError('MODEL_LOADING', `the GGUF of '${modelId}' is not on this node yet, so its size and layers are unknown: run \`shoal models pull ${modelId}\` first`);
    }
    let facts: GgufFacts;
    try {
      facts = card.tasks.includes('transcription') ? transcriptionFacts((await stat(path)).size) : await readGgufFacts(path);
    } catch (error) {
      throw new ShoalError('MODEL_FAILED', `cannot read the GGUF header of '${modelId}' at ${path}: ${errorMessage(error)}`, { cause: error });
    }
    const projectorBytes = await this.projectorBytes(card, path);
    return { card, facts, path, ...(projectorBytes !== null ? { projectorBytes } : {}) };
  }

  /** The size of a vision card's projector file on this node; null without one, or when it is not here (a pull or the launch fetches it). */
  private async projectorBytes(card: ModelCard, modelPath: string): Promise<number | null> {
    const path = await projectorPath(card, modelPath).catch(() => undefined);
    if (path === undefined) return null;
    return (await stat(path).catch(() => null))?.size ?? null;
  }

  async plan(request: PlaceRequest): Promise<{ model: ModelFacts; result: PlanResult }> {
    const model = await this.modelFacts(request.model);
    // The cluster's defaults (settings) stand in for what neither the request nor the card sets.
    const { defaultContextTokens, defaultParallel } = this.options.plane.view().state.settings;
    const contextTokens = request.contextTokens ?? (model.card.runtime.context_size === undefined ? (defaultContextTokens ?? undefined) : undefined);
    const parallel = request.parallel ?? (model.card.runtime.parallel === undefined ? (defaultParallel ?? undefined) : undefined);
    const options: PlanOptions = {
      ...(request.replicas !== undefined ? { replicas: request.replicas } : {}),
      ...(request.minNodes !== undefined ? { minNodes: request.minNodes } : {}),
      ...(contextTokens !== undefined ? { contextTokens } : {}),
      ...(parallel !== undefined ? { parallel } : {}),
      ...(request.kvCacheType !== undefined ? { kvCacheType: request.kvCacheType } : {}),
      ...(request.flashAttention !== undefined ? { flashAttention: request.flashAttention } : {}),
      ...(request.allowSpill !== undefined ? { allowSpill: request.allowSpill } : {}),
      exclusions: this.resolveNodes(request.exclude ?? []),
    };
    const nodes = await this.options.nodes();
    return { model, result: planPlacement({ card: model.card, facts: model.facts, nodes, draft: model.draft, projectorBytes: model.projectorBytes }, options) };
  }

  /** The downloads `plan` would start, judged against the cluster's approval threshold. */
  downloadsFor(plan: Plan, model: ModelFacts): DownloadsPlan {
    const state = this.options.plane.view().state;
    const holders = new Set(this.options.holders(model.card.id));
    // This node's copy is where the facts came from, whether or not its artifacts report lists it yet.
    if (model.path !== null) holders.add(this.options.plane.nodeId);
    return plannedDownloads({
      nodeIds: plan.placements.map((p) => p.nodeId),
      modelBytes: model.facts.fileBytes,
      downloadable: model.card.source.kind !== 'builtin',
      holders,
      approvalBytes: state.settings.downloadApprovalBytes,
      names: (nodeId) => memberName(state, nodeId),
    });
  }

  /** Plans and records an instance; resolves once the master decided it. */
  async place(request: PlaceRequest): Promise<InstanceSpec> {
    await this.options.plane.ensureClusterExists();
    const { model, result } = await this.plan(request);
    if (!result.ok) throw new PlacementFailure(result.error);
    const spec = specFromPlan(result.plan, model.card, newInstanceId(), Date.now());
    // In the spec, so the wait is replicated state: it outlives this node and a master failover.
    const pending = request.approveDownloads === true ? undefined : awaitingApproval(this.downloadsFor(result.plan, model));
    const instance = pending === undefined ? spec : { ...spec, awaitingApproval: pending };
    await this.options.plane.submit({ type: 'PlaceInstance', instance });
    this.recordPlacement(spec, 'placed', null);
    this.options.log.info({ instanceId: spec.instanceId, modelId: spec.modelId, shape: spec.shape, nodes: spec.placements.map((p) => `${p.nodeId}:${p.role}`), awaitingApproval: pending?.length ?? 0 }, pending === undefined ? 'placed an instance' : 'placed an instance; its downloads wait for approval');
    return instance;
  }

  /** An operator's yes to the downloads an instance waits for; resolves once the master decided it. */
  async approve(instanceId: string): Promise<InstanceSpec> {
    const instance = this.options.plane.view().state.instances[instanceId as InstanceId];
    if (instance === undefined) throw new ShoalError('NOT_FOUND', `no instance '${instanceId}': list them with \`shoal models ls\``);
    await this.options.plane.submit({ type: 'ApproveDownloads', instanceId: instance.instanceId });
    const { createdIdx: _idx, awaitingApproval: _approved, ...spec } = instance;
    this.options.log.info({ instanceId, modelId: instance.modelId }, 'downloads approved');
    return spec;
  }

  /** Records that this node's full part of `instanceId` now runs on `backend` (after the worker moved it); resolves once the master decided it. */
  async movePart(instanceId: InstanceId, backend: string): Promise<void> {
    await this.options.plane.submit({ type: 'MovePart', instanceId, nodeId: this.options.plane.nodeId, backend });
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
   * re-placement exists. Submits one EndInstance either way, except for a lost node when nothing can
   * hold the instance now: it keeps its place (and comes back with its node), and this resolves false
   * so the caller tries again later, when a node that can hold it may have appeared.
   */
  async replace(instance: InstanceState, nodeId: NodeId, why: 'refused' | 'download-failed' | 'lost'): Promise<boolean> {
    let model: ModelFacts;
    try {
      model = await this.modelFacts(instance.modelId);
    } catch (error) {
      await this.submitEnd(instance, 'failed', `could not re-place after ${why} on ${nodeId}: ${errorMessage(error)}`, null);
      return true;
    }
    // The instance being replaced gives its memory back: count its parts as free where they are.
    const released = new Map<string, number>();
    for (const p of instance.placements) released.set(p.nodeId, (released.get(p.nodeId) ?? 0) + p.estimatedBytes);
    const nodes = (await this.options.nodes())
      .filter((n) => why !== 'lost' || n.nodeId !== nodeId)
      .map((n) => (n.freeBytes === null ? n : { ...n, freeBytes: n.freeBytes + (released.get(n.nodeId) ?? 0) }));
    const input = { card: model.card, facts: model.facts, nodes, draft: model.draft, projectorBytes: model.projectorBytes };
    const previous = planFromSpec(instance, model.facts);
    const result =
      why === 'refused'
        ? replanAfterRefusal(previous, nodeId, input)
        : why === 'download-failed'
          ? replanAfterDownloadFailure(previous, nodeId, input)
          : planPlacement(input, { exclusions: instance.exclusions, replicas: instance.replicas, minNodes: instance.minNodes, contextTokens: instance.contextTokens, parallel: instance.parallel, kvCacheType: instance.kvCacheType, flashAttention: instance.flashAttention ?? 'auto' });
    if (!result.ok) {
      if (why === 'lost') return false;
      await this.submitEnd(instance, 'failed', `${why} on ${nodeId}, and it cannot be re-placed: ${result.error.message}`, null);
      return true;
    }
    const planned = specFromPlan(result.plan, model.card, newInstanceId(), Date.now());
    // A successor of one still waiting for approval waits too, for the downloads its own plan needs.
    const pending = instance.awaitingApproval === undefined ? undefined : awaitingApproval(this.downloadsFor(result.plan, model));
    const successor = pending === undefined ? planned : { ...planned, awaitingApproval: pending };
    await this.submitEnd(instance, 'replaced', `${why} on ${nodeId}: re-placed as ${successor.instanceId}`, successor);
    this.recordPlacement(successor, `re-placed after ${why} on ${nodeId}`, instance.instanceId);
    return true;
  }

  /** The replica on a lost node leaves a replicated instance; the others keep serving untouched. */
  async dropReplica(instance: InstanceState, nodeId: NodeId): Promise<void> {
    const message = `${memberName(this.options.plane.view().state, nodeId)} was lost: its replica left the instance; the others keep serving`;
    this.options.log.warn({ instanceId: instance.instanceId, nodeId }, message);
    await this.options.plane.submit({ type: 'DropReplica', instanceId: instance.instanceId, nodeId, message: clip(message) });
  }

  /**
   * One more replica for an instance below its count, on a node that holds none of it (a spare, or
   * the lost node back), with the instance's own context and slots. Resolves false when no node fits
   * now, or when the one that would needs a download above the approval threshold (repairs never
   * start those unasked); the caller tries again later.
   */
  async addReplica(instance: InstanceState): Promise<boolean> {
    const model = await this.modelFacts(instance.modelId);
    const holders = new Set<NodeId>(instance.placements.map((p) => p.nodeId));
    const nodes = (await this.options.nodes()).filter((n) => !holders.has(n.nodeId as NodeId));
    const result = planPlacement(
      { card: model.card, facts: model.facts, nodes, draft: model.draft, projectorBytes: model.projectorBytes },
      { exclusions: instance.exclusions, replicas: 1, minNodes: 1, contextTokens: instance.contextTokens, parallel: instance.parallel, kvCacheType: instance.kvCacheType, flashAttention: instance.flashAttention ?? 'auto' },
    );
    if (!result.ok) return false;
    const part = specFromPlan(result.plan, model.card, instance.instanceId, Date.now()).placements[0];
    if (result.plan.shape !== 'single' || part === undefined || part.role !== 'full') return false;
    if (this.downloadsFor(result.plan, model).needsApproval) {
      this.options.log.info({ instanceId: instance.instanceId, nodeId: part.nodeId }, 'a replica could be re-added there, but its download needs approval: place it again to approve');
      return false;
    }
    await this.options.plane.submit({ type: 'AddReplica', instanceId: instance.instanceId, placement: part });
    this.options.log.info({ instanceId: instance.instanceId, nodeId: part.nodeId }, `re-added a replica on ${memberName(this.options.plane.view().state, part.nodeId)}`);
    return true;
  }

  /** One placement decision as a node moment: ids and counts only, so it stays small. */
  private recordPlacement(spec: InstanceSpec, why: string, replaces: string | null): void {
    const nodes = spec.placements.map((p) => p.nodeId);
    this.options.moments?.('placement', `${why}: ${spec.modelId} as ${spec.shape} on ${nodes.length} node(s)`, {
      instanceId: spec.instanceId,
      model: spec.modelId,
      shape: spec.shape,
      nodes: nodes.join(','),
      nodeCount: nodes.length,
      replaces,
    });
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
