// The placement planner: card + GGUF facts + the cluster's nodes in, a plan or a typed error out. Pure.
//
// Shapes, in order of preference:
// - single: one node holds the whole model (the one with most free memory, then best backend rank);
// - replicas: N distinct nodes, each holding a full copy;
// - pooled: no node can hold it (or min_nodes asks for more): a llama-server driver (most free memory)
//   plus ggml-rpc-server donors (next most), as few as fit, layers split in proportion to what each
//   node has left after its fixed costs (split.ts).
// On a GPU backend a part is admitted per device against free VRAM and for its host side against RAM
// (devices.ts); a node's GPU tag outranks the card's unranked CPU tags (nodes.ts chooseBackend), a copy
// wholly on GPUs is preferred to one that spilled layers to RAM (only with allowSpill), and the plan
// carries per node and device the layers, bytes, fit, `-ngl` and tensor split.
// Every plan stamps its inputs (exclusions, replicas, min_nodes, context, slots, KV type) so a re-placement
// (replan.ts) honours them rather than searching the whole cluster again.
//
// Sizing, when neither the launch nor the card sets it: slots (`parallel`) are as many as fit at the chosen
// context, up to DEFAULT_MAX_PARALLEL, in the shape and over the nodes one slot would get (more slots never
// justify a split or a wider one);
// the context is DEFAULT_CONTEXT_TOKENS, lowered in 256-token steps towards MIN_FITTED_CONTEXT_TOKENS only
// when nothing fits at the default at all.

import { placementError, type PlacementError } from './errors.js';
import { CONTEXT_STEP_TOKENS, DEFAULT_KV_CACHE_TYPE, isQuantizedKv, KV_QUANT_BLOCK_ELEMENTS } from './memory.js';
import { byMemoryThenPreference, chooseBackend, isKnown, type ClusterNode, type KnownNode } from './nodes.js';
import type { NodeFit } from './devices.js';
import {
  buildPlan,
  candidateOf,
  describeAsk,
  describeShortfalls,
  fail,
  fitShortfall,
  fullFit,
  fullPlacement,
  singleSpeed,
  spillHint,
  type Candidate,
  type Placement,
  type PlanInput,
  type PlanOptions,
  type PlanResult,
  type Request,
} from './plan.js';
import { planPooled } from './pooled.js';

export { optionsOf, tensorSplitArg, tensorSplitOf } from './plan.js';
export type { PlacedDevice, Placement, PlacementRole, Plan, PlanInput, PlanOptions, PlanResult, RefusalState, Sizing } from './plan.js';

/** Context per sequence admitted when the card sets none (capped at the trained context). */
export const DEFAULT_CONTEXT_TOKENS = 4096;
/** Slots a placement gets, memory permitting, when neither the launch nor the card sets them: a household's chat UI, agent and editor at once. */
export const DEFAULT_MAX_PARALLEL = 16;
/** An unset context is lowered to fit no further than this (or the trained context, if smaller). */
export const MIN_FITTED_CONTEXT_TOKENS = 2048;
/** More replicas than this is a mistake in the request, not a deployment. */
export const MAX_REPLICAS = 64;

function resolveRequest(input: PlanInput, options: PlanOptions): Request | PlacementError {
  const { card, facts } = input;
  const request: Request = {
    contextTokens: options.contextTokens ?? card.runtime.context_size ?? Math.min(DEFAULT_CONTEXT_TOKENS, facts.trainedContext),
    // Unset, planSized fits it; 1 until then, the slot count every fit starts from.
    parallel: options.parallel ?? card.runtime.parallel ?? 1,
    replicas: options.replicas ?? 1,
    minNodes: options.minNodes ?? card.runtime.min_nodes,
    kvCacheType: options.kvCacheType ?? card.runtime.kv_cache_type ?? DEFAULT_KV_CACHE_TYPE,
    flashAttention: options.flashAttention ?? card.runtime.flash_attention ?? 'auto',
    sizing: {
      parallel: options.parallel !== undefined ? 'request' : card.runtime.parallel !== undefined ? 'card' : 'memory fit',
      contextTokens: options.contextTokens !== undefined ? 'request' : card.runtime.context_size !== undefined ? 'card' : 'default',
    },
    exclusions: [...new Set(options.exclusions ?? [])].sort(),
    allowSpill: options.allowSpill ?? false,
    // Facts for a draft the card no longer names would count memory nothing loads.
    draft: card.runtime.speculative !== undefined ? input.draft : undefined,
    projectorBytes: card.projector !== undefined ? input.projectorBytes : undefined,
  };
  for (const key of ['contextTokens', 'parallel', 'replicas', 'minNodes'] as const) {
    if (!Number.isInteger(request[key]) || request[key] < 1) {
      return placementError('INVALID_REQUEST', `${key} must be a positive integer, got ${request[key]}`);
    }
  }
  if (request.replicas > MAX_REPLICAS) return placementError('INVALID_REQUEST', `at most ${MAX_REPLICAS} replicas, asked for ${request.replicas}`);
  if (isQuantizedKv(request.kvCacheType) && request.flashAttention === 'off') {
    return placementError('INVALID_REQUEST', `a ${request.kvCacheType} KV cache needs flash attention (llama.cpp quantizes V only with it): use flash_attention auto or on, or kv_cache_type f16`);
  }
  if (isQuantizedKv(request.kvCacheType) && (facts.keyLength % KV_QUANT_BLOCK_ELEMENTS !== 0 || facts.valueLength % KV_QUANT_BLOCK_ELEMENTS !== 0)) {
    return placementError(
      'INVALID_REQUEST',
      `a ${request.kvCacheType} KV cache stores blocks of ${KV_QUANT_BLOCK_ELEMENTS} values, and ${card.id}'s attention heads are ${facts.keyLength} (K) and ${facts.valueLength} (V) wide: use kv_cache_type f16`,
    );
  }
  if (request.replicas > 1 && request.minNodes > 1) {
    return placementError('INVALID_REQUEST', `replicas of a split are not supported: ask for ${request.replicas} replicas or min_nodes ${request.minNodes}, not both`);
  }
  return request;
}

/** Plans over nodes whose resources are known and not excluded. */
function planOver(input: PlanInput, request: Request, known: readonly KnownNode[]): PlanResult {
  const { card, facts } = input;
  const candidates: Candidate[] = known.flatMap((node) => {
    const backend = chooseBackend(card, node);
    return backend ? [candidateOf(node, backend)] : [];
  });
  candidates.sort(byMemoryThenPreference);
  if (candidates.length === 0) {
    return fail(placementError('TOPOLOGY_GAP', `no node offers a backend ${card.id} can run on (${card.compatible_backends.join(', ')})`));
  }
  const fits = new Map(candidates.map((c) => [c, fullFit(input, request, c)]));
  const fitOf = (c: Candidate): NodeFit => fits.get(c)!;
  // A copy wholly on its GPUs before one that spilled layers to RAM (stable: otherwise the order above).
  const fitting = candidates.filter((c) => fitOf(c).fits).sort((a, b) => Number(fitOf(a).spilledLayers > 0) - Number(fitOf(b).spilledLayers > 0));
  const singles = candidates.filter((c) => !fitOf(c).fits).map((c) => fitShortfall(c.node.nodeId, 'full', c.node, fitOf(c)));

  if (request.replicas > 1) {
    if (candidates.length < request.replicas) {
      return fail(placementError('TOPOLOGY_GAP', `${request.replicas} replicas need ${request.replicas} nodes that can run ${card.id}; ${candidates.length} can`));
    }
    if (fitting.length < request.replicas) {
      return fail(
        placementError('MEMORY_SHORTFALL', `${request.replicas} replicas of ${describeAsk(card, request)} need ${request.replicas} nodes with room; ${fitting.length} have it: ${describeShortfalls(singles)}${spillHint(request, singles)}`, { single: singles }),
      );
    }
    const chosen = fitting.slice(0, request.replicas);
    const speeds = chosen.map((c) => singleSpeed(facts, c));
    // A copy without a figure makes the slowest unknown: none is shown rather than a guess.
    const slowest = speeds.reduce((a, b) => (a.tokPerS === null ? a : b.tokPerS === null || b.tokPerS < a.tokPerS ? b : a));
    const placements = chosen.map((c) => fullPlacement(input, request, c, fitOf(c)));
    return { ok: true, plan: buildPlan(input, request, 'replicas', placements, slowest, spillWarnings(placements)) };
  }
  const best = fitting[0];
  if (request.minNodes === 1 && best !== undefined) {
    const placement = fullPlacement(input, request, best, fitOf(best));
    return { ok: true, plan: buildPlan(input, request, 'single', [placement], singleSpeed(facts, best), spillWarnings([placement])) };
  }
  return planPooled(input, request, known, candidates, fitting, singles);
}

/** What the plan says of layers left in system RAM (allow_spill): they decode at host-RAM speed. */
function spillWarnings(placements: readonly Placement[]): string[] {
  return placements
    .filter((p) => p.spilledLayers > 0)
    .map((p) => `${p.spilledLayers} of ${p.layerShare.layerCount} layers stay in system RAM on ${p.nodeId} (its GPUs hold ${p.layerShare.layerCount - p.spilledLayers}): they decode at RAM speed (allow_spill)`);
}

/** Contexts to try for an unset one: the default, then 256-token steps down to the fitted minimum. */
function fittedContexts(defaultTokens: number): number[] {
  const floor = Math.min(defaultTokens, MIN_FITTED_CONTEXT_TOKENS);
  const out = [defaultTokens];
  for (let t = Math.floor((defaultTokens - 1) / CONTEXT_STEP_TOKENS) * CONTEXT_STEP_TOKENS; t >= floor; t -= CONTEXT_STEP_TOKENS) out.push(t);
  return out;
}

/** planOver with the unset knobs fitted (see the header); the first refusal when nothing fits. */
function planSized(input: PlanInput, request: Request, known: readonly KnownNode[]): PlanResult {
  const contexts = request.sizing.contextTokens === 'default' ? fittedContexts(request.contextTokens) : [request.contextTokens];
  let firstRefusal: PlanResult | null = null;
  for (const contextTokens of contexts) {
    const sizing = { ...request.sizing, ...(contextTokens !== request.contextTokens ? { contextTokens: 'memory fit' as const } : {}) };
    const at = { ...request, contextTokens, sizing };
    const one = planOver(input, at, known);
    if (!one.ok) {
      firstRefusal ??= one;
      continue;
    }
    if (contextTokens !== request.contextTokens) {
      one.plan.warnings.push(`the context was lowered from the default ${request.contextTokens} to ${contextTokens} tokens per slot to fit; ask for more with context_tokens (it needs more memory or a split)`);
    }
    if (request.sizing.parallel !== 'memory fit') return one;
    for (let parallel = DEFAULT_MAX_PARALLEL; parallel > 1; parallel--) {
      const more = planOver(input, { ...at, parallel }, known);
      if (more.ok && more.plan.shape === one.plan.shape && more.plan.placements.length === one.plan.placements.length) {
        more.plan.warnings.push(...one.plan.warnings.filter((w) => !more.plan.warnings.includes(w)));
        return more;
      }
    }
    return one;
  }
  return firstRefusal!;
}

/**
 * Plans `input.card` over `input.nodes`. Excluded nodes are treated as absent. Nodes that have not
 * reported yet are set aside: a plan that works without them is returned (with a warning); one that
 * does not becomes INFO_PENDING rather than a shortfall the missing reports might cure.
 */
export function planPlacement(input: PlanInput, options: PlanOptions = {}): PlanResult {
  const request = resolveRequest(input, options);
  if ('code' in request) return fail(request);
  const { card } = input;
  if (input.nodes.length === 0) return fail(placementError('TOPOLOGY_GAP', 'the cluster has no nodes'));
  const excluded = new Set<string>(request.exclusions);
  const usable = (node: ClusterNode): boolean => !isKnown(node) || chooseBackend(card, node) !== null;
  const allowed = input.nodes.filter((node) => !excluded.has(node.nodeId));
  if (input.nodes.some(usable) && !allowed.some(usable)) {
    return fail(placementError('ALL_EXCLUDED', `every node that could run ${card.id} is excluded (${request.exclusions.join(', ')})`, { exclusions: request.exclusions }));
  }
  const known = allowed.filter(isKnown);
  const pending = allowed.filter((node) => !isKnown(node)).map((node) => node.nodeId);
  const result = known.length > 0 ? planSized(input, request, known) : null;
  if (pending.length > 0 && (result === null || !result.ok)) {
    const now = result === null ? 'no node has reported yet' : `with the nodes that have: ${result.error.message}`;
    return fail(
      placementError('INFO_PENDING', `${pending.length} node(s) have not reported their resources yet (${pending.join(', ')}); ${now}. Retry in a few seconds.`, {
        pendingNodes: pending,
        ...(result === null ? {} : { causes: [result.error] }),
      }),
    );
  }
  if (result === null) return fail(placementError('TOPOLOGY_GAP', `no node outside the exclusions can run ${card.id} (${card.compatible_backends.join(', ')})`));
  if (!result.ok) return { ok: false, error: { ...result.error, exclusions: request.exclusions } };
  if (pending.length > 0) result.plan.warnings.push(`placed without ${pending.length} node(s) that have not reported yet: ${pending.join(', ')}`);
  return result;
}
