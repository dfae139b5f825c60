// The pooled shape: no single node holds the model (or min_nodes asks for a split), so a llama-server
// driver (the node with most free memory) pools donors running ggml-rpc-server (the next most), as few
// as fit. Layers are split in proportion to each node's room after its fixed costs (split.ts), and the
// predicted speed is compared with serving from one node so the caller hears when splitting is slower.
// A member on a GPU backend takes part per device (each of its GPUs is a unit of the split, in index
// order) and pays its host side (runner; the driver also the embeddings) in RAM; a mixed split of GPU
// and CPU members gets no figure, only the bound its measured CPU parts set (speed.ts).

import { canPool } from '../models/cards/card.js';
import type { DevicePart, NodeFit } from './devices.js';
import { placementError, type NodeShortfall } from './errors.js';
import { admits, contextCeiling, estimateHost, FIT_MARGIN_BYTES, type LayerShare, type MemoryEstimate } from './memory.js';
import { byMemoryThenPreference, chooseBackend, type KnownNode } from './nodes.js';
import {
  buildPlan,
  candidateOf,
  ceilingOf,
  describeAsk,
  describeShortfalls,
  fail,
  fitFields,
  fitShortfall,
  isShort,
  memoryOptions,
  partOptions,
  singleSpeed,
  spillHint,
  type Candidate,
  type Placement,
  type PlanInput,
  type PlanResult,
  type Request,
} from './plan.js';
import { predictDecode, type SpeedPart, type SpeedPrediction } from './speed.js';
import { proportionalSplit, tensorSplitWeights, type SplitNode, type SplitPart } from './split.js';

function minDefined(a: number | undefined, b: number | undefined): number | undefined {
  if (a === undefined) return b;
  if (b === undefined) return a;
  return Math.min(a, b);
}

/** What a split costs against one node: a fitting one, else one that fits with less context. */
function splitWarning(input: PlanInput, request: Request, pooled: SpeedPrediction, fitting: readonly Candidate[], candidates: readonly Candidate[]): string | null {
  const { facts } = input;
  const alone = (fitting.length > 0 ? fitting : candidates)
    .map((c) => ({
      c,
      speed: singleSpeed(facts, c),
      ceiling: contextCeiling(facts, c.node.freeBytes, request.parallel, { kvCacheType: request.kvCacheType, flashAttention: request.flashAttention, draft: partOptions(request, c.backend.tag).draft, projectorBytes: partOptions(request, c.backend.tag).projectorBytes }),
    }))
    .filter((x) => x.ceiling > 0)
    .sort((a, b) => (b.speed.tokPerS ?? 0) - (a.speed.tokPerS ?? 0))[0];
  // Without both figures there is nothing to compare; a split with a GPU part compares by the most its measured parts allow.
  const split = pooled.tokPerS ?? pooled.upperBoundTokPerS;
  if (alone?.speed.tokPerS == null || split === null || alone.speed.tokPerS <= split) return null;
  const splitFigure = pooled.tokPerS !== null ? `~${split.toFixed(1)} tok/s split` : `at most ~${split.toFixed(1)} tok/s split (its measured CPU parts alone)`;
  const speeds = `${splitFigure} against ~${alone.speed.tokPerS.toFixed(1)} tok/s on ${alone.c.node.nodeId} alone`;
  if (fitting.length > 0) return `the split is predicted slower than one node: ${speeds} (min_nodes ${request.minNodes} forces the split)`;
  return `the split is predicted slower than one node: ${speeds}, which fits the model with up to ${alone.ceiling} tokens of context (asked for ${request.contextTokens})`;
}

/** One member's side of a split over units: its units' parts, and its host side on a GPU backend. */
interface MemberPart {
  share: LayerShare;
  fit: NodeFit;
}

/**
 * The split's units in device order: each member's RAM (a CPU backend) or each of its GPUs. A GPU
 * member's host pays the runner (and on the driver the embeddings) first; on unified memory a device is
 * offered only the RAM left after that.
 */
function unitsOf(input: PlanInput, request: Request, members: readonly Candidate[]): { units: SplitNode[]; hosts: (MemoryEstimate | null)[] } {
  const hosts = members.map((m, i) => (m.devices.length === 0 ? null : estimateHost(input.facts, { firstLayer: 0, layerCount: 0, holdsOutput: false }, memoryOptions(request), i === members.length - 1)));
  const units = members.flatMap((m, i) => {
    if (m.devices.length === 0) return [{ freeBytes: m.node.freeBytes }];
    const ramLeft = m.node.freeBytes - hosts[i]!.totalBytes - FIT_MARGIN_BYTES;
    return m.devices.map((d) => ({ freeBytes: d.unifiedMemory ? Math.max(0, Math.min(d.freeBytes, ramLeft)) : d.freeBytes, device: true }));
  });
  return { units, hosts };
}

/** The units' parts regrouped per member (each member's units are contiguous in device order). */
function memberParts(members: readonly Candidate[], parts: readonly SplitPart[], units: readonly SplitNode[], hosts: readonly (MemoryEstimate | null)[]): MemberPart[] {
  const weights = tensorSplitWeights(parts);
  let at = 0;
  return members.map((m, i) => {
    const count = m.devices.length === 0 ? 1 : m.devices.length;
    const own = parts.slice(at, at + count);
    const ownUnits = units.slice(at, at + count);
    const ownWeights = weights.slice(at, at + count);
    at += count;
    const share: LayerShare = { firstLayer: own[0]!.share.firstLayer, layerCount: own.reduce((sum, p) => sum + p.share.layerCount, 0), holdsOutput: own[own.length - 1]!.share.holdsOutput };
    const host = hosts[i];
    if (host === null || host === undefined) {
      const part = own[0]!;
      return { share, fit: { devices: [], host: part.estimate, hostFits: part.admitted, gpuLayers: null, spilledLayers: 0, ramBytes: part.estimate.totalBytes, fits: part.admitted, reason: part.admitted ? null : 'system RAM' } };
    }
    const devices: DevicePart[] = own.map((part, j) => ({
      index: m.devices[j]!.index,
      name: m.devices[j]!.name,
      share: part.share,
      tensorSplit: ownWeights[j]!,
      estimate: part.estimate,
      freeBytes: ownUnits[j]!.freeBytes,
      fits: part.admitted,
    }));
    const hostFits = admits(host, m.node.freeBytes);
    const unified = m.devices.some((d) => d.unifiedMemory);
    const deviceBytes = devices.reduce((sum, d) => sum + d.estimate.totalBytes, 0);
    const fits = hostFits && devices.every((d) => d.fits);
    return {
      share,
      fit: {
        devices,
        host,
        hostFits,
        gpuLayers: share.layerCount + (share.holdsOutput ? 1 : 0),
        spilledLayers: 0,
        ramBytes: host.totalBytes + (unified ? deviceBytes : 0),
        fits,
        reason: fits ? null : [...devices.filter((d) => !d.fits).map((d) => `GPU ${d.index}`), ...(hostFits ? [] : ['system RAM'])].join(', '),
      },
    };
  });
}

function pooledPlacements(input: PlanInput, request: Request, members: readonly Candidate[], parts: readonly MemberPart[]): Placement[] {
  const { facts } = input;
  return parts.map((part, i) => {
    const c = members[i]!;
    const holdsOutput = part.share.holdsOutput;
    const tensorSplit = part.fit.devices.length === 0 ? part.share.layerCount + (holdsOutput ? 1 : 0) : part.fit.devices.reduce((sum, d) => sum + d.tensorSplit, 0);
    return {
      nodeId: c.node.nodeId,
      role: holdsOutput ? 'driver' : 'donor',
      backend: c.backend.tag,
      layerShare: { firstLayer: part.share.firstLayer, layerCount: part.share.layerCount, fraction: part.share.layerCount / facts.blockCount },
      holdsOutput,
      tensorSplit,
      freeBytes: c.node.freeBytes,
      contextCeiling: ceilingOf(input, request, c, part.share, part.fit, holdsOutput),
      ...fitFields(part.fit),
    };
  });
}

export function planPooled(input: PlanInput, request: Request, known: readonly KnownNode[], candidates: readonly Candidate[], fitting: readonly Candidate[], singles: NodeShortfall[]): PlanResult {
  const { card, facts } = input;
  const ask = describeAsk(card, request);
  const noSingle = singles.length > 0 ? `no node can hold ${ask}: ${describeShortfalls(singles)}${spillHint(request, singles)}` : `no node can hold ${ask}`;
  if (!canPool(card.compatible_backends)) {
    if (request.minNodes > 1) {
      return fail(placementError('TOPOLOGY_GAP', `min_nodes ${request.minNodes} needs a split, and ${card.id} allows none (its card lists no llama_server-* and rpc-* backends)`));
    }
    return fail(placementError('MEMORY_SHORTFALL', `${noSingle}; the card allows no split (it lists no llama_server-* and rpc-* backends)`, { single: singles }));
  }
  const drivers = known.flatMap((node) => {
    const backend = chooseBackend(card, node, 'llama_server');
    return backend ? [candidateOf(node, backend)] : [];
  });
  drivers.sort(byMemoryThenPreference);
  const driver = drivers[0];
  const donors = driver === undefined ? [] : known.flatMap((node) => {
    const backend = node.nodeId === driver.node.nodeId ? null : chooseBackend(card, node, 'rpc');
    return backend ? [candidateOf(node, backend)] : [];
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
    const { units, hosts } = unitsOf(input, request, members);
    const split = proportionalSplit(facts, units, memoryOptions(request));
    const parts = memberParts(members, split.parts, units, hosts);
    const hostsShort = parts.filter((p) => !p.fit.hostFits).length;
    if (split.ok && hostsShort === 0) {
      const placements = pooledPlacements(input, request, members, parts);
      const driverLink = driver!.node.linkBytesPerS;
      const speedParts: SpeedPart[] = members.map((m, i) => ({
        share: parts[i]!.share,
        backend: m.backend.tag,
        memoryBandwidthBytesPerS: m.node.memoryBandwidthBytesPerS,
        linkBytesPerS: minDefined(m.node.linkBytesPerS, driverLink),
        donor: i < members.length - 1,
      }));
      const speed = predictDecode(facts, speedParts);
      const warning = splitWarning(input, request, speed, fitting, candidates);
      return { ok: true, plan: buildPlan(input, request, 'pooled', placements, speed, warning ? [warning] : []) };
    }
    lastReason = split.ok ? `${hostsShort} of ${members.length} nodes would be over their system RAM` : split.reason;
    lastTried = parts.map((part, i) => fitShortfall(members[i]!.node.nodeId, part.share.holdsOutput ? 'driver' : 'donor', members[i]!.node, part.fit));
  }
  const overs = lastTried.filter(isShort);
  // With min_nodes forcing the split, a node may well hold it alone: say what was asked instead.
  const lead = fitting.length > 0 ? `min_nodes ${request.minNodes} asks to split ${ask}` : noSingle;
  return fail(
    placementError('MEMORY_SHORTFALL', `${lead}; a split over all ${widest} usable nodes does not fit either (${lastReason}): ${describeShortfalls(overs.length > 0 ? overs : lastTried)}`, {
      single: singles,
      pooled: lastTried,
    }),
  );
}
