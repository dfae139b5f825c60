// Predicted decode speed. Decoding one token reads every weight the token passes through once, so a
// node's part takes (bytes it reads) / (its memory bandwidth); a split runs its parts one after the
// other, so their times add, and each donor adds an RPC hop:
//
//   seconds/token = Σ_parts bytesRead(part) / bandwidth(part)
//                 + donors × (RPC_HOP_OVERHEAD_S + RPC_ROUND_TRIPS_PER_TOKEN × LINK_ROUND_TRIP_S
//                             + 2 × embedding × 4 B / link)
//   tok/s = 1 / seconds/token
//
// bytesRead(part) = its layers' bytes, plus for the part holding the output: the output head and final
// norm (and the embedding table when the head is tied to it; otherwise a token reads one embedding row,
// which is nothing). It ignores KV reads, which grow with the filled context: it is a short-context,
// memory-bound estimate. Checked against docs/STACK-NOTES.md (200M f16, 2 cores, 31 GB/s): it predicts ~92 tok/s
// where llama-server measured ~110; through one RPC hop the measured slowdown was 1.7-2.2 ms per token.

import type { GgufFacts } from '../models/cards/gguf-facts.js';
import { shareWeightsBytes, type LayerShare } from './memory.js';

/** Memory read bandwidth measured on the 2-core reference machines (docs/STACK-NOTES.md); used when a node has none. */
export const DEFAULT_MEMORY_BANDWIDTH_BYTES_PER_S = 31e9;
/** Gigabit Ethernet, when a node has not measured its link. */
export const DEFAULT_LINK_BYTES_PER_S = 125e6;
/** Per-token cost of one RPC donor on loopback (graph serialization, synchronisation): 1/93 − 1/110 s measured. */
export const RPC_HOP_OVERHEAD_S = 0.002;
/** Network round trips one donor adds per token (send the input activations, collect the output). */
export const RPC_ROUND_TRIPS_PER_TOKEN = 2;
/** Round trip of a switched LAN, which the loopback measurement above does not include. */
export const LINK_ROUND_TRIP_S = 0.0003;
/** Activations cross a hop as f32. */
const ACTIVATION_BYTES_PER_VALUE = 4;

export function bytesReadPerToken(facts: GgufFacts, share: LayerShare): number {
  const layers = shareWeightsBytes(facts, { ...share, holdsOutput: false });
  if (!share.holdsOutput) return layers;
  return layers + facts.outputBytes + (facts.outputTied ? facts.embeddingBytes : 0);
}

export interface SpeedPart {
  share: LayerShare;
  memoryBandwidthBytesPerS?: number | undefined;
  /** Set on donors: the slower of its link and the driver's. */
  linkBytesPerS?: number | undefined;
  donor: boolean;
}

export interface SpeedPrediction {
  tokPerS: number;
  secondsPerToken: number;
  /** True when some part had no measured bandwidth and the default was assumed. */
  assumedBandwidth: boolean;
  arithmetic: string[];
}

export function predictDecode(facts: GgufFacts, parts: readonly SpeedPart[]): SpeedPrediction {
  let seconds = 0;
  let assumedBandwidth = false;
  const arithmetic: string[] = [];
  for (const part of parts) {
    const bandwidth = part.memoryBandwidthBytesPerS ?? DEFAULT_MEMORY_BANDWIDTH_BYTES_PER_S;
    if (part.memoryBandwidthBytesPerS === undefined) assumedBandwidth = true;
    const bytes = bytesReadPerToken(facts, part.share);
    seconds += bytes / bandwidth;
    arithmetic.push(`${(bytes / 1e6).toFixed(1)} MB / ${(bandwidth / 1e9).toFixed(1)} GB/s = ${((bytes / bandwidth) * 1e3).toFixed(3)} ms`);
    if (part.donor) {
      const link = part.linkBytesPerS ?? DEFAULT_LINK_BYTES_PER_S;
      const transfer = (2 * facts.embeddingLength * ACTIVATION_BYTES_PER_VALUE) / link;
      const hop = RPC_HOP_OVERHEAD_S + RPC_ROUND_TRIPS_PER_TOKEN * LINK_ROUND_TRIP_S + transfer;
      seconds += hop;
      arithmetic.push(`RPC hop ${(hop * 1e3).toFixed(3)} ms`);
    }
  }
  const tokPerS = seconds > 0 ? 1 / seconds : Infinity;
  arithmetic.push(`${(seconds * 1e3).toFixed(3)} ms/token = ${tokPerS.toFixed(1)} tok/s`);
  return { tokPerS, secondsPerToken: seconds, assumedBandwidth, arithmetic };
}
