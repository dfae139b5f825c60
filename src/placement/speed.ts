// Predicted single-stream decode speed of what a node serves. Decoding one token reads every weight the
// token passes through once, so a part takes (bytes it reads) / (its memory bandwidth); on top, every
// token pays fixed costs that dominate small models: the engine's graph build, sampling and the node's
// relay of the stream (base), and the threads' synchronisation at each op of each layer (per layer).
// A split runs its parts one after the other, so their times add, and each RPC server adds a hop:
//
//   seconds/token = Σ_parts readFactor × bytesRead(part) / bandwidth(part) + layers × perLayer
//                 + base(driver's engine) + NODE_RELAY_S
//                 + Σ_rpcServers (RPC_HOP_BASE_S + its layers × RPC_HOP_PER_LAYER_S
//                                 + RPC_ROUND_TRIPS_PER_TOKEN × LINK_ROUND_TRIP_S + 2 × embedding × 4 B / link)
//   tok/s = 1 / seconds/token
//
// bytesRead(part) = its layers' bytes, plus for the part holding the output: the output head and final
// norm (and the embedding table when the head is tied to it; otherwise a token reads one embedding row,
// which is nothing). KV reads, which grow with the filled context, are left out: it is a short-context
// estimate. A CPU driver also runs an RPC server for its own share (llama-server stops counting its CPU
// as a device once given --rpc), so a split over N CPU nodes pays N hops.
//
// Calibrated 2026-12-01 on the 2-core reference machine (no GPU, measured bandwidth 38.6 GB/s, 2
// engine threads, load average ≤ 2.1 where marked quiet), generated random-weight models, 64-token
// greedy decodes, medians of 5:
//
//   model (width × layers, type)   bytes     llama-server engine   Shoal node, llama_cpp engine
//   shoal/tiny (64 × 2, f32)       0.84 MB   7758 tok/s (0.129 ms)   226-262 tok/s (~4.1 ms)
//   64 × 16, f32                   2.9 MB    2032 tok/s (0.492 ms)
//   256 × 2, f32                   13 MB     3944 tok/s (0.254 ms)
//   256 × 16, f32                  46 MB      468 tok/s (2.14 ms)
//   200M (1024 × 11, f16)          391 MB    ~110 tok/s (9.1 ms)     55-58 tok/s (~17.5 ms)  (STACK-NOTES)
//
// tiny and 64 × 16 differ by 14 layers and 2 MB: 0.022 ms per layer, leaving 0.063 ms of engine base.
// Through llama-server's HTTP stream tiny served 4840 tok/s (+0.08 ms). The node's relay of that stream
// (node:http to the engine, chat SSE passed through) cost 0.26 ms per token on tiny (2182 tok/s through
// the node against 4997 by hand) and 0.39 ms on 20M f16 (378 against 443), measured 2026-12-03 with
// bench/prediction.ts, sides alternating; 0.8 ms before the relay was made cheaper (docs/PERF-NOTES.md).
// 200M predicts 10.1 + 0.24 + 0.94 = 11.3 ms (88 tok/s) against ~110 measured; node-llama-cpp's
// prebuilt binaries read at ~0.75 of the measured bandwidth and cost ~4 ms per token on top (tiny).
// Under load (a shared machine at load 8) two spinning threads fall 10-40x: no figure here covers that.
// The constants hold for the node's default of one engine thread per physical core: with 1 thread
// node-llama-cpp served tiny at 2661 tok/s (load 13), so its 4 ms is two threads spinning on two cores.
//
// A node that has not measured its bandwidth gets no figure: CPU machines' RAM bandwidth spans more than
// 2x, so a figure from the reference machine's would be a guess shown as a prediction. Likewise a backend
// with no measured costs here (any GPU) gets no figure at all rather than a RAM-bandwidth guess. In a
// mixed split (GPU and CPU parts) the CPU parts' measured time still bounds the figure: the dry run shows
// "at most" that, limited by the slowest measured parts, and never a GPU figure it did not measure.

import type { GgufFacts } from '../models/cards/gguf-facts.js';
import { engineOf } from '../models/cards/card.js';
import { shareWeightsBytes, type LayerShare } from './memory.js';

/** Gigabit Ethernet, when a node has not measured its link. */
export const DEFAULT_LINK_BYTES_PER_S = 125e6;
/**
 * Per-token cost of one RPC server on loopback (a command round trip, then the graph of its share sent
 * and run op by op, so it grows with the layers it holds): 200M f16 all on one server cost 1/93 − 1/110 s
 * = 1.66 ms over 12 layers; shoal/tiny split 1 + 1 layers over two served 1677 tok/s (1 thread, load 10).
 */
export const RPC_HOP_BASE_S = 0.0002;
export const RPC_HOP_PER_LAYER_S = 0.00012;
/** Network round trips one donor adds per token (send the input activations, collect the output). */
export const RPC_ROUND_TRIPS_PER_TOKEN = 2;
/** Round trip of a switched LAN, which the loopback measurement above does not include. */
export const LINK_ROUND_TRIP_S = 0.0003;
/** Activations cross a hop as f32. */
const ACTIVATION_BYTES_PER_VALUE = 4;
/** The node's relay of the engine's stream to the client, per token (main-thread CPU; measured, see the header). */
export const NODE_RELAY_S = 0.0003;

/** The per-token costs of one engine on CPU at the node's default threads (the table above). */
export interface EngineCosts {
  /** Graph build, sampling, the engine's own stream: once per token. */
  baseS: number;
  /** Thread synchronisation of one layer's ops. */
  perLayerS: number;
  /** Seconds per byte read, as a multiple of 1 / measured bandwidth. */
  readFactor: number;
}

/** Engines whose speed the model knows, on CPU only: a GPU backend's speed is not bandwidth-of-RAM bound and is not predicted. */
export const CPU_ENGINE_COSTS: Readonly<Record<string, EngineCosts>> = {
  llama_server: { baseS: 0.000063 + 0.00008, perLayerS: 0.000022, readFactor: 1 },
  llama_cpp: { baseS: 0.004, perLayerS: 0.000022, readFactor: 1 / 0.75 },
  rpc: { baseS: 0, perLayerS: 0.000022, readFactor: 1 },
};

export function bytesReadPerToken(facts: GgufFacts, share: LayerShare): number {
  const layers = shareWeightsBytes(facts, { ...share, holdsOutput: false });
  if (!share.holdsOutput) return layers;
  return layers + facts.outputBytes + (facts.outputTied ? facts.embeddingBytes : 0);
}

export interface SpeedPart {
  share: LayerShare;
  /** The backend tag the part runs on (`llama_server-cpu`, `rpc-cpu`, …). */
  backend: string;
  memoryBandwidthBytesPerS?: number | undefined;
  /** Set on donors: the slower of its link and the driver's. */
  linkBytesPerS?: number | undefined;
  donor: boolean;
}

export interface SpeedPrediction {
  /** null when the model cannot predict this placement (see `unpredictable`). */
  tokPerS: number | null;
  /**
   * Without a figure because some part runs on a backend with no measured costs (a GPU): the parts that
   * were measured still take their time every token, so the split decodes at most this fast (the slowest
   * measured parts bound it). null when there is a figure, or nothing measured to bound it with.
   */
  upperBoundTokPerS: number | null;
  secondsPerToken: number | null;
  /** Why there is no figure, when there is none. */
  unpredictable: string | null;
  arithmetic: string[];
}

function costsOf(backend: string): EngineCosts | null {
  if (!backend.endsWith('-cpu')) return null;
  return CPU_ENGINE_COSTS[engineOf(backend)] ?? null;
}

function none(reason: string): SpeedPrediction {
  return { tokPerS: null, upperBoundTokPerS: null, secondsPerToken: null, unpredictable: reason, arithmetic: [reason] };
}

/**
 * The last part that is not a donor drives: its engine's base cost and the relay are paid once per token.
 * A part on a backend without measured costs (any GPU) leaves no figure; the CPU parts that were measured
 * then bound it from above (upperBoundTokPerS), with the relay, since the token waits for each of them.
 */
export function predictDecode(facts: GgufFacts, parts: readonly SpeedPart[]): SpeedPrediction {
  const driver = parts.find((p) => !p.donor);
  if (driver === undefined) return none('no part drives the model');
  const unmeasured = parts.find((part) => costsOf(part.backend) === null);
  if (unmeasured !== undefined) {
    const reason = `no measured speed model for ${unmeasured.backend}: the speed is not predicted`;
    const measured = parts.filter((part) => costsOf(part.backend) !== null);
    // A bound from a node that never measured its bandwidth would be a guess too.
    if (measured.length === 0 || measured.some((part) => part.memoryBandwidthBytesPerS === undefined)) return none(reason);
    const bound = partsSeconds(facts, measured, parts.length > 1, costsOf(driver.backend)?.readFactor ?? 1);
    const seconds = bound.seconds + NODE_RELAY_S;
    const upper = 1 / seconds;
    return {
      tokPerS: null,
      upperBoundTokPerS: upper,
      secondsPerToken: null,
      unpredictable: reason,
      arithmetic: [reason, ...bound.arithmetic, `the measured parts alone: ${(seconds * 1e3).toFixed(3)} ms/token with the node's relay, so at most ${upper.toFixed(1)} tok/s`],
    };
  }
  if (parts.some((part) => part.memoryBandwidthBytesPerS === undefined)) {
    return none('a node has not measured its memory bandwidth (`shoal doctor` measures it): the speed is not predicted');
  }
  const driverCosts = costsOf(driver.backend)!;
  const { seconds: partSeconds, arithmetic } = partsSeconds(facts, parts, parts.length > 1, driverCosts.readFactor);
  let seconds = partSeconds;
  const fixed = driverCosts.baseS + NODE_RELAY_S;
  seconds += fixed;
  arithmetic.push(`per token: ${engineOf(driver.backend)} ${(driverCosts.baseS * 1e3).toFixed(3)} ms + the node's relay ${(NODE_RELAY_S * 1e3).toFixed(3)} ms`);
  const tokPerS = 1 / seconds;
  arithmetic.push(`${(seconds * 1e3).toFixed(3)} ms/token = ${tokPerS.toFixed(1)} tok/s`);
  return { tokPerS, upperBoundTokPerS: null, secondsPerToken: seconds, unpredictable: null, arithmetic };
}

/** The per-token time of parts whose costs are known: reads, layers and (in a split) their RPC hops. */
function partsSeconds(facts: GgufFacts, parts: readonly SpeedPart[], split: boolean, readFactor: number): { seconds: number; arithmetic: string[] } {
  let seconds = 0;
  const arithmetic: string[] = [];
  const driverCosts = { readFactor };
  for (const part of parts) {
    const costs = costsOf(part.backend)!;
    const bandwidth = part.memoryBandwidthBytesPerS!;
    const read = (driverCosts.readFactor * bytesReadPerToken(facts, part.share)) / bandwidth;
    const layers = part.share.layerCount * costs.perLayerS;
    seconds += read + layers;
    arithmetic.push(
      `${(bytesReadPerToken(facts, part.share) / 1e6).toFixed(1)} MB / ${(bandwidth / 1e9).toFixed(1)} GB/s${driverCosts.readFactor === 1 ? '' : ` × ${driverCosts.readFactor.toFixed(2)}`} = ${(read * 1e3).toFixed(3)} ms` +
        ` + ${part.share.layerCount} layers × ${(costs.perLayerS * 1e3).toFixed(3)} ms`,
    );
    // A CPU driver of a split reaches its own share through an RPC server too.
    if (part.donor || split) {
      const link = part.donor ? (part.linkBytesPerS ?? DEFAULT_LINK_BYTES_PER_S) : Infinity;
      const transfer = (2 * facts.embeddingLength * ACTIVATION_BYTES_PER_VALUE) / link;
      const hop = RPC_HOP_BASE_S + part.share.layerCount * RPC_HOP_PER_LAYER_S + (part.donor ? RPC_ROUND_TRIPS_PER_TOKEN * LINK_ROUND_TRIP_S : 0) + transfer;
      seconds += hop;
      arithmetic.push(`RPC hop${part.donor ? '' : ' (the driver\'s own share, loopback)'} ${(hop * 1e3).toFixed(3)} ms`);
    }
  }
  return { seconds, arithmetic };
}
