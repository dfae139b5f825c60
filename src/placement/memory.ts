// Memory admission: how many bytes a model (or one node's share of it) needs at a given context, and
// the largest context that fits a node. Pure arithmetic over GGUF facts; every estimate carries its
// own breakdown so a refusal can show the numbers that decided it.
//
//   total = weights(share)
//         + KV        = Σ_layers (key_length + value_length) × kv_heads(layer) × bytes_per_element × cells
//                       cells = roundUp(context, 256) × sequences
//         + output workspace (share holding the output head only) = vocab × 512 × 4
//         + attention scores (flash attention off only) = cells × 512 × heads × 4
//         + overhead  = 10% × weights(share)
//         + floor     = 256 MiB
//         + draft (the card's runtime.speculative, on the part holding the output) =
//                       its weights + its KV (f16, the same cells) + its logits (vocab × min(512, sequences) × 4)
//                       + attention scores (flash attention off only) + 10% × its weights
//         + projector (a vision card's mmproj, on the part holding the output) = its file's bytes + 10%
//   admitted when total + 64 MiB < free (strictly).
//
// Why each term, from llama.cpp (commit bundled with node-llama-cpp, llama-kv-cache.cpp, llama-context.cpp):
// - KV: each layer allocates K of n_embd_k_gqa × kv_size and V of n_embd_v_gqa × kv_size elements,
//   where n_embd_k_gqa = key_length × n_head_kv(layer): the KV heads, not the query heads (GQA).
//   n_ctx is padded to 256 cells; a sequence only owns a full window when the cache holds
//   window × sequences cells (unified or not), which is what node-llama-cpp allocates for `sequences`.
//   Measured: a 200M llama (11 layers, 8 KV heads of 64, 4096 cells, f16) reports 88.00 MiB = this formula.
// - Output workspace: with flash attention (llama.cpp's `auto` turns it on for CPU, CUDA, Metal) the
//   compute buffer is dominated by one micro-batch of f32 logits, vocab × n_ubatch(512) × 4 bytes.
//   Measured on the same model (vocab 32000): compute buffer 66.5 MiB, of which 62.5 MiB is this term.
//   Without flash attention (`flash_attention = "off"`) the attention scores add cells × 512 × heads × 4
//   bytes (one layer's f32 KQ matrix at a time, reused across layers), counted as `attention scores`.
// - Overhead 10% of the weights: allocator and alignment slack, per-layer activations, the GPU backend's
//   own context, growing with the model. It is a margin, not a measurement, and errs towards refusing.
// - Floor 256 MiB: the runner process itself (a bare node-llama-cpp runner measured 113 MiB RSS) plus the
//   non-logit compute buffer, which small models would otherwise under-count.
// - Draft (pinned llama-server, common/speculative.cpp common_base_params_to_speculative): the draft gets
//   its own context with the target's n_ctx, n_parallel and flash attention but its own cache type, whose
//   default is f16 (Shoal passes no `--spec-draft-type-k`), and `n_outputs_max = n_parallel`, so its
//   compute graph is reserved for that many rows of logits (llama-context.cpp), not a micro-batch. It
//   lives in the llama-server process, so it pays no floor of its own. It sits with the output: in RAM
//   on a CPU part (and on a GPU part that spilled, whose output stays in RAM), on the device holding the
//   output otherwise, its token embeddings on the host as llama.cpp keeps every input layer.
// - Projector (llama.cpp mtmd, loaded by llama-server's own process from `--mmproj`): its weights are
//   the file's bytes (a GGUF is its tensors and a small header); 10% stands for its compute buffer,
//   which mtmd reserves for one image at the projector's own resolution. It is counted where the draft
//   is (with the output: the single part, or the driver of a split). The compute buffer of a real
//   projector was not measured here (only the generated one, whose buffer is a few hundred kB).

import { formatBytes } from '../common/format-bytes.js';
import type { FlashAttentionMode } from '../models/cards/card.js';
import type { GgufFacts } from '../models/cards/gguf-facts.js';

const MiB = 1024 * 1024;

export const KV_CACHE_TYPES = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0'] as const;
export type KvCacheType = (typeof KV_CACHE_TYPES)[number];
export const DEFAULT_KV_CACHE_TYPE: KvCacheType = 'f16';
/** The draft's cache type: llama-server's default for it, whatever the target's (see the header). */
export const DRAFT_KV_CACHE_TYPE: KvCacheType = 'f16';

/** Values per block of a quantized cache: llama.cpp refuses one whose head width it does not divide. */
export const KV_QUANT_BLOCK_ELEMENTS = 32;

/** llama.cpp stores a quantized V cache only with flash attention on. */
export function isQuantizedKv(type: KvCacheType): boolean {
  return type === 'q8_0' || type === 'q4_0';
}

/** Bytes per cached element; quantized types store 32 elements in a 34- (q8_0) or 18-byte (q4_0) block. */
export const KV_BYTES_PER_ELEMENT: Readonly<Record<KvCacheType, number>> = { f32: 4, f16: 2, bf16: 2, q8_0: 34 / 32, q4_0: 18 / 32 };

/** llama.cpp pads a context to a multiple of this many cells; ceilings are multiples of it too. */
export const CONTEXT_STEP_TOKENS = 256;
/** llama.cpp's default micro-batch (n_ubatch): the rows of logits the compute buffer holds at once. */
export const MICRO_BATCH_TOKENS = 512;
const LOGIT_BYTES = 4;
export const OVERHEAD_FRACTION = 0.1;
export const OVERHEAD_FLOOR_BYTES = 256 * MiB;
/**
 * What a GPU costs before the first layer: the backend's own context on the card (a CUDA context with its
 * kernels and cuBLAS workspace is ~300-500 MiB per process as nvidia-smi reports it; Vulkan and Metal less)
 * plus the non-logit compute buffer. A margin, not a measurement here (no GPU on the reference machine),
 * erring towards refusing, like OVERHEAD_FLOOR_BYTES for the CPU.
 */
export const DEVICE_FLOOR_BYTES = 512 * MiB;
/** Kept free beyond the estimate: free-memory readings move between the sample and the load. */
export const FIT_MARGIN_BYTES = 64 * MiB;

/** Contiguous layers held by one node; the node holding the output also holds embeddings and head. */
export interface LayerShare {
  firstLayer: number;
  layerCount: number;
  holdsOutput: boolean;
}

export function fullShare(facts: GgufFacts): LayerShare {
  return { firstLayer: 0, layerCount: facts.blockCount, holdsOutput: true };
}

export interface MemoryOptions {
  /** Tokens of context per sequence. */
  contextTokens: number;
  sequences: number;
  kvCacheType?: KvCacheType;
  /** Absent means auto, which llama.cpp turns on for the backends Shoal runs. */
  flashAttention?: FlashAttentionMode;
  /**
   * The GGUF facts of the draft model llama-server loads beside this one (the card's
   * runtime.speculative), counted on the part that holds the output; absent: none is loaded.
   */
  draft?: GgufFacts | undefined;
  /** The bytes of the projector file llama-server loads beside a vision model, counted with the draft; absent: none. */
  projectorBytes?: number | undefined;
}

export interface MemoryEstimate {
  share: LayerShare;
  contextTokens: number;
  sequences: number;
  kvCacheType: KvCacheType;
  kvCells: number;
  weightsBytes: number;
  kvBytes: number;
  outputWorkspaceBytes: number;
  attentionScoresBytes: number;
  overheadBytes: number;
  floorBytes: number;
  /** The speculative draft's share of this part (weights, KV, logits, overhead); 0 without one. */
  draftBytes: number;
  /** The vision projector's weights and compute margin on this part; 0 without one. */
  projectorBytes: number;
  totalBytes: number;
  /** The arithmetic, one line per term, for refusals and the dry-run preview. */
  arithmetic: string[];
}

function checkShare(facts: GgufFacts, share: LayerShare): void {
  const { firstLayer, layerCount } = share;
  if (!Number.isInteger(firstLayer) || !Number.isInteger(layerCount) || firstLayer < 0 || layerCount < 0 || firstLayer + layerCount > facts.blockCount) {
    throw new RangeError(`layer share ${firstLayer}+${layerCount} is outside the model's ${facts.blockCount} layers`);
  }
}

export function shareWeightsBytes(facts: GgufFacts, share: LayerShare): number {
  checkShare(facts, share);
  let bytes = share.holdsOutput ? facts.embeddingBytes + facts.outputBytes : 0;
  for (let l = share.firstLayer; l < share.firstLayer + share.layerCount; l++) bytes += facts.layerBytes[l]!;
  return bytes;
}

/** KV bytes one cell (one token of one sequence) costs across the share's layers; fractional for quantized caches. */
export function kvBytesPerCell(facts: GgufFacts, share: LayerShare, kvCacheType: KvCacheType = DEFAULT_KV_CACHE_TYPE): number {
  checkShare(facts, share);
  let elements = 0;
  for (let l = share.firstLayer; l < share.firstLayer + share.layerCount; l++) {
    elements += (facts.keyLength + facts.valueLength) * facts.kvHeadsPerLayer[l]!;
  }
  return elements * KV_BYTES_PER_ELEMENT[kvCacheType];
}

export function roundUpToStep(tokens: number): number {
  return Math.ceil(tokens / CONTEXT_STEP_TOKENS) * CONTEXT_STEP_TOKENS;
}

/**
 * How much of the draft a part holds: all of it (in RAM with the output), what goes on the device
 * holding the output (everything but the token embeddings, plus their copy when its head is tied),
 * only its token embeddings (the host side of a GPU part), or none.
 */
type DraftSide = 'all' | 'device' | 'embeddings' | 'none';

/** Which fixed tensors a part holds besides its layers, and the floor it pays (see estimateDevice, estimateHost). */
interface PartTerms {
  embeddings: boolean;
  output: boolean;
  /** A GPU holding the output of a tied model gets its own copy of the embedding table (llama.cpp duplicates it). */
  tiedCopy: boolean;
  floorBytes: number;
  draft: DraftSide;
}

/** The draft's bytes on one side of a part, with its arithmetic line (see the header). */
function draftTerm(draft: GgufFacts, side: DraftSide, kvCells: number, options: MemoryOptions): { bytes: number; line: string } | null {
  if (side === 'none') return null;
  const all = fullShare(draft);
  if (side === 'embeddings') {
    const overhead = Math.ceil(draft.embeddingBytes * OVERHEAD_FRACTION);
    return { bytes: draft.embeddingBytes + overhead, line: `draft ${formatBytes(draft.embeddingBytes + overhead)} = its token embeddings ${formatBytes(draft.embeddingBytes)} + ${OVERHEAD_FRACTION * 100}%` };
  }
  const weights =
    side === 'all' ? shareWeightsBytes(draft, all) : shareWeightsBytes(draft, { ...all, holdsOutput: false }) + draft.outputBytes + (draft.outputTied ? draft.embeddingBytes : 0);
  const kv = Math.ceil(kvBytesPerCell(draft, all, DRAFT_KV_CACHE_TYPE) * kvCells);
  const logitRows = Math.min(MICRO_BATCH_TOKENS, options.sequences);
  const logits = (draft.vocabSize ?? 0) * logitRows * LOGIT_BYTES;
  const scores = options.flashAttention === 'off' ? kvCells * MICRO_BATCH_TOKENS * draft.headCount * LOGIT_BYTES : 0;
  const overhead = Math.ceil(weights * OVERHEAD_FRACTION);
  const bytes = weights + kv + logits + scores + overhead;
  const parts = [
    `weights ${formatBytes(weights)}${side === 'device' ? ' (without its token embeddings)' : ''}`,
    `KV ${formatBytes(kv)} (${DRAFT_KV_CACHE_TYPE}, ${kvCells} cells)`,
    `logits ${formatBytes(logits)} (${logitRows} rows)`,
    ...(scores > 0 ? [`attention scores ${formatBytes(scores)}`] : []),
    `overhead ${formatBytes(overhead)}`,
  ];
  return { bytes, line: `draft ${formatBytes(bytes)} = ${parts.join(' + ')}` };
}

function estimateTerms(facts: GgufFacts, share: LayerShare, options: MemoryOptions, terms: PartTerms): MemoryEstimate {
  const { contextTokens, sequences } = options;
  if (!Number.isInteger(contextTokens) || contextTokens < 1) throw new RangeError(`context must be a positive integer, got ${contextTokens}`);
  if (!Number.isInteger(sequences) || sequences < 1) throw new RangeError(`sequences must be a positive integer, got ${sequences}`);
  const kvCacheType = options.kvCacheType ?? DEFAULT_KV_CACHE_TYPE;
  const layerWeights = shareWeightsBytes(facts, { ...share, holdsOutput: false });
  const weightsBytes =
    layerWeights + (terms.embeddings ? facts.embeddingBytes : 0) + (terms.output ? facts.outputBytes + (terms.tiedCopy && facts.outputTied ? facts.embeddingBytes : 0) : 0);
  const kvCells = roundUpToStep(contextTokens) * sequences;
  const perCell = kvBytesPerCell(facts, share, kvCacheType);
  const kvBytes = Math.ceil(perCell * kvCells);
  const outputWorkspaceBytes = terms.output ? (facts.vocabSize ?? 0) * MICRO_BATCH_TOKENS * LOGIT_BYTES : 0;
  const attentionScoresBytes = options.flashAttention === 'off' && share.layerCount > 0 ? kvCells * MICRO_BATCH_TOKENS * facts.headCount * LOGIT_BYTES : 0;
  const overheadBytes = Math.ceil(weightsBytes * OVERHEAD_FRACTION);
  const floorBytes = terms.floorBytes;
  const draft = options.draft === undefined ? null : draftTerm(options.draft, terms.draft, kvCells, options);
  const draftBytes = draft?.bytes ?? 0;
  const projectorFile = terms.draft === 'all' || terms.draft === 'device' ? (options.projectorBytes ?? 0) : 0;
  const projectorBytes = projectorFile + Math.ceil(projectorFile * OVERHEAD_FRACTION);
  const totalBytes = weightsBytes + kvBytes + outputWorkspaceBytes + attentionScoresBytes + overheadBytes + floorBytes + draftBytes + projectorBytes;
  const layers = share.layerCount === 0 ? 'no layers' : `layers ${share.firstLayer}-${share.firstLayer + share.layerCount - 1}`;
  const extras = terms.embeddings && terms.output ? ' + embeddings and output head' : terms.embeddings ? ' + embeddings' : terms.output ? ' + output head' : '';
  const arithmetic = [
    `weights ${formatBytes(weightsBytes)} (${layers}${extras})`,
    `KV ${formatBytes(kvBytes)} = ${formatBytes(perCell)}/token (${kvCacheType}) × ${roundUpToStep(contextTokens)} tokens × ${sequences} sequence${sequences === 1 ? '' : 's'}`,
    ...(outputWorkspaceBytes > 0 ? [`output workspace ${formatBytes(outputWorkspaceBytes)} = vocab ${facts.vocabSize} × ${MICRO_BATCH_TOKENS} × ${LOGIT_BYTES} B`] : []),
    ...(attentionScoresBytes > 0 ? [`attention scores ${formatBytes(attentionScoresBytes)} = ${kvCells} cells × ${MICRO_BATCH_TOKENS} × ${facts.headCount} heads × ${LOGIT_BYTES} B (flash attention off)`] : []),
    `overhead ${formatBytes(overheadBytes)} = ${OVERHEAD_FRACTION * 100}% of weights`,
    `${floorBytes === DEVICE_FLOOR_BYTES ? 'device floor' : 'floor'} ${formatBytes(floorBytes)}`,
    ...(draft !== null ? [draft.line] : []),
    ...(projectorBytes > 0 ? [`projector ${formatBytes(projectorBytes)} = its file ${formatBytes(projectorFile)} + ${OVERHEAD_FRACTION * 100}%`] : []),
    `total ${formatBytes(totalBytes)}`,
  ];
  return { share, contextTokens, sequences, kvCacheType, kvCells, weightsBytes, kvBytes, outputWorkspaceBytes, attentionScoresBytes, overheadBytes, floorBytes, draftBytes, projectorBytes, totalBytes, arithmetic };
}

/** A part in system RAM on a CPU backend: its layers, and embeddings plus output head when it holds the output. */
export function estimateMemory(facts: GgufFacts, share: LayerShare, options: MemoryOptions): MemoryEstimate {
  return estimateTerms(facts, share, options, { embeddings: share.holdsOutput, output: share.holdsOutput, tiedCopy: false, floorBytes: OVERHEAD_FLOOR_BYTES, draft: share.holdsOutput ? 'all' : 'none' });
}

/**
 * The layers one GPU holds (and the output head, on the device that holds it): weights, their KV (llama.cpp
 * keeps each layer's cache on the layer's device), the logits workspace with the output, 10% overhead and
 * DEVICE_FLOOR_BYTES. Token embeddings never land on a GPU: llama.cpp keeps the input layer on the CPU.
 */
export function estimateDevice(facts: GgufFacts, share: LayerShare, options: MemoryOptions): MemoryEstimate {
  return estimateTerms(facts, share, options, { embeddings: false, output: share.holdsOutput, tiedCopy: true, floorBytes: DEVICE_FLOOR_BYTES, draft: share.holdsOutput ? 'device' : 'none' });
}

/**
 * What a part on a GPU backend still takes from system RAM: the runner (OVERHEAD_FLOOR_BYTES), the token
 * embeddings when it is the model's entry (`embeddings`), and the layers spilled to the CPU (`share`, the
 * first ones: llama.cpp offloads the last `-ngl` layers) with their KV, plus the output head when it is not
 * offloaded (`share.holdsOutput`).
 */
export function estimateHost(facts: GgufFacts, share: LayerShare, options: MemoryOptions, embeddings: boolean): MemoryEstimate {
  // The output left in RAM (a spilled part) keeps the whole draft there with it; else only its embeddings.
  const draft: DraftSide = share.holdsOutput ? 'all' : embeddings ? 'embeddings' : 'none';
  return estimateTerms(facts, share, options, { embeddings, output: share.holdsOutput, tiedCopy: false, floorBytes: OVERHEAD_FLOOR_BYTES, draft });
}

/** An exact fit thrashes rather than runs, so admission is strict and keeps a margin. */
export function admits(estimate: MemoryEstimate, freeBytes: number): boolean {
  return estimate.totalBytes + FIT_MARGIN_BYTES < freeBytes;
}

/** Bytes a node needs free for `estimate` to be admitted (the smallest free figure that admits it, less one). */
export function requiredFreeBytes(estimate: MemoryEstimate): number {
  return estimate.totalBytes + FIT_MARGIN_BYTES + 1;
}

export interface CeilingOptions {
  share?: LayerShare;
  kvCacheType?: KvCacheType;
  flashAttention?: FlashAttentionMode;
  /** The draft loaded beside the model (MemoryOptions.draft). */
  draft?: GgufFacts | undefined;
  /** The projector loaded beside the model (MemoryOptions.projectorBytes). */
  projectorBytes?: number | undefined;
}

/**
 * The largest context per sequence, a multiple of 256 no larger than the trained context (rounded
 * down to 256, or 256 for a model trained on less), for which the share is admitted with `parallel`
 * sequences on `freeBytes`; 0 when not even 256 tokens fit. Computed once from static inputs and
 * stamped on the instance so every node and every request sees the same window.
 */
export function contextCeiling(facts: GgufFacts, freeBytes: number, parallel: number, options: CeilingOptions = {}): number {
  const share = options.share ?? fullShare(facts);
  const kvCacheType = options.kvCacheType ?? DEFAULT_KV_CACHE_TYPE;
  const cap = Math.max(CONTEXT_STEP_TOKENS, Math.floor(facts.trainedContext / CONTEXT_STEP_TOKENS) * CONTEXT_STEP_TOKENS);
  const at = (tokens: number): MemoryEstimate =>
    estimateMemory(facts, share, {
      contextTokens: tokens,
      sequences: parallel,
      kvCacheType,
      ...(options.flashAttention !== undefined ? { flashAttention: options.flashAttention } : {}),
      ...(options.draft !== undefined ? { draft: options.draft } : {}),
      ...(options.projectorBytes !== undefined ? { projectorBytes: options.projectorBytes } : {}),
    });
  const smallest = at(CONTEXT_STEP_TOKENS);
  const perToken = (at(2 * CONTEXT_STEP_TOKENS).totalBytes - smallest.totalBytes) / CONTEXT_STEP_TOKENS;
  const fixedBytes = smallest.totalBytes - perToken * CONTEXT_STEP_TOKENS;
  // Every context-dependent term is linear in it, so solve for it, then step down past any rounding of the ceil.
  const room = freeBytes - FIT_MARGIN_BYTES - fixedBytes - 1;
  let tokens = perToken === 0 ? cap : Math.min(cap, Math.floor(room / perToken / CONTEXT_STEP_TOKENS) * CONTEXT_STEP_TOKENS);
  while (tokens >= CONTEXT_STEP_TOKENS && !admits(at(tokens), freeBytes)) tokens -= CONTEXT_STEP_TOKENS;
  return tokens >= CONTEXT_STEP_TOKENS && admits(at(tokens), freeBytes) ? tokens : 0;
}
