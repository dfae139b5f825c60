// The pooled shape: no single node holds the model (or min_nodes asks for a split), so a llama-server
// driver (the node with most free memory) pools donors running ggml-rpc-server (the next most), as few
// as fit. Layers are split in proportion to each node's room after its fixed costs (split.ts), and the
// predicted speed is compared with serving from one node so the caller hears when splitting is slower.

import { canPool } from '../models/cards/card.js';
import { placementError, type NodeShortfall } from './errors.js';
import { contextCeiling } from './memory.js';
import { byMemoryThenPreference, chooseBackend, type KnownNode } from './nodes.js';
import { buildPlan, describeAsk, describeShortfalls, fail, memoryOptions, shortfallOf, singleSpeed, type Candidate, type Placement, type PlanInput, type PlanResult, type Request } from './plan.js';
import { predictDecode, type SpeedPart, type SpeedPrediction } from './speed.js';
import { proportionalSplit, tensorSplitWeights, type SplitPart } from './split.js';

function minDefined(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}

/** What a split costs against one node: a fitting one, else one that fits with less context. */
function splitWarning(input: PlanInput, request: Request, pooled: SpeedPrediction, fitting: readonly Candidate[], candidates: readonly Candidate[]): string | null {
  const { facts } = input;
  const alone = (fitting.length > 0 ? fitting : candidates)
    .map((c) => ({ c, speed: singleSpeed(facts, c), ceiling: contextCeiling(facts, c.node.freeBytes, request.parallel, { kvCacheType: request.kvCacheType, flashAttention: request.flashAttention }) }))
    .filter((x) => x.ceiling > 0)
    .sort((a, b) => (b.speed.tokPerS ?? 0) - (a.speed.tokPerS ?? 0))[0];
  // Without both figures there is nothing to compare.
  if (alone?.speed.tokPerS == null || pooled.tokPerS === null || alone.speed.tokPerS <= pooled.tokPerS) return null;
  const speeds = `~${pooled.tokPerS.toFixed(1)} tok/s split against ~${alone.speed.tokPerS.toFixed(1)} tok/s on ${alone.c.node.nodeId} alone`;
  if (fitting.length > 0) return `the split is predicted slower than one node: ${speeds} (min_nodes ${request.minNodes} forces the split)`;
  return `the split is predicted slower than one node: ${speeds}, which fits the model with up to ${alone.ceiling} tokens of context (asked for ${request.contextTokens})`;
}

function pooledPlacements(input: PlanInput, request: Request, members: readonly Candidate[], parts: readonly SplitPart[]): Placement[] {
  const { facts } = input;
  const weights = tensorSplitWeights(parts);
  return parts.map((part, i) => {
    const c = members[i]!;
    const holdsOutput = part.share.holdsOutput;
    return {
      nodeId: c.node.nodeId,
      role: holdsOutput ? 'driver' : 'donor',
      backend: c.backend.tag,
      layerShare: { firstLayer: part.share.firstLayer, layerCount: part.share.layerCount, fraction: part.share.layerCount / facts.blockCount },
      holdsOutput,
      tensorSplit: weights[i]!,
      freeBytes: c.node.freeBytes,
      estimate: part.estimate,
      contextCeiling: contextCeiling(facts, c.node.freeBytes, request.parallel, { share: part.share, kvCacheType: request.kvCacheType, flashAttention: request.flashAttention }),
    };
  });
}

export function planPooled(input: PlanInput, request: Request, known: readonly KnownNode[], candidates: readonly Candidate[], fitting: readonly Candidate[], singles: NodeShortfall[]): PlanResult {
  const { card, facts } = input;
  const ask = describeAsk(card, request);
  const noSingle = singles.length > 0 ? `no node can hold ${ask}: ${describeShortfalls(singles)}` : `no node can hold ${ask}`;
  if (!canPool(card.compatible_backends)) {
    if (request.minNodes > 1) {
      return fail(placementError('TOPOLOGY_GAP', `min_nodes ${request.minNodes} needs a split, and ${card.id} allows none (its card lists no llama_server-* and rpc-* backends)`));
    }
    return fail(placementError('MEMORY_SHORTFALL', `${noSingle}; the card allows no split (it lists no llama_server-* and rpc-* backends)`, { single: singles }));
  }
  const drivers = known.flatMap((node) => {
    const backend = chooseBackend(card, node, 'llama_server');
    return backend ? [{ node, backend }] : [];
  });
  drivers.sort(byMemoryThenPreference);
  const driver = drivers[0];
  const donors = driver === undefined ? [] : known.flatMap((node) => {
    const backend = node.nodeId === driver.node.nodeId ? null : chooseBackend(card, node, 'rpc');
    return backend ? [{ node, backend }] : [];
  });
  donors.sort(byMemoryThenPreference);
  const widest = driver === undefined ? 0 : 1 + donors.length;
  const narrowest = Math.max(2, request.minNodes);
  if (widest < narrowest) {
    const able = `${drivers.length} node(s) can drive a split (llama_server) and ${donors.length} more can donate (rpc)`;
    if (request.minNodes > 1) return fail(placementError('TOPOLOGY_GAP', `min_nodes ${request.minNodes} needs that many nodes in one split; ${able}`));
    return fail(placementError('MEMORY_SHORTFALL', `${noSingle}; no split is possible: ${able}`, { single: singles }));
  }
  let lastTried: NodeShortfall[] = [];
  let lastReason = '';
  for (let k = narrowest; k <= widest; k++) {
    // Device order: donors first, driver last (split.ts).
    const members = [...donors.slice(0, k - 1), driver!];
    const split = proportionalSplit(facts, members.map((m) => ({ freeBytes: m.node.freeBytes })), memoryOptions(request));
    if (split.ok) {
      const placements = pooledPlacements(input, request, members, split.parts);
      const driverLink = driver!.node.linkBytesPerS;
      const speedParts: SpeedPart[] = members.map((m, i) => ({
        share: split.parts[i]!.share,
        backend: m.backend.tag,
        memoryBandwidthBytesPerS: m.node.memoryBandwidthBytesPerS,
        linkBytesPerS: minDefined(m.node.linkBytesPerS, driverLink),
        donor: i < members.length - 1,
      }));
      const speed = predictDecode(facts, speedParts);
      const warning = splitWarning(input, request, speed, fitting, candidates);
      return { ok: true, plan: buildPlan(input, request, 'pooled', placements, speed, warning ? [warning] : []) };
    }
    lastReason = split.reason;
    lastTried = split.parts.map((part, i) => shortfallOf(members[i]!.node.nodeId, part.share.holdsOutput ? 'driver' : 'donor', members[i]!.node.freeBytes, part.estimate));
  }
  const overs = lastTried.filter((s) => s.neededBytes > s.freeBytes);
  // With min_nodes forcing the split, a node may well hold it alone: say what was asked instead.
  const lead = fitting.length > 0 ? `min_nodes ${request.minNodes} asks to split ${ask}` : noSingle;
  return fail(
    placementError('MEMORY_SHORTFALL', `${lead}; a split over all ${widest} usable nodes does not fit either (${lastReason}): ${describeShortfalls(overs.length > 0 ? overs : lastTried)}`, {
      single: singles,
      pooled: lastTried,
    }),
  );
}
