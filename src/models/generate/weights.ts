// Weight recipes for the random llama models. Most weights are seeded uniform noise, but the first
// four residual channels are wired by hand so that a random model still behaves like a chat model:
//
//   BIAS   constant in every token embedding and never written by a layer, so after the final
//          RMSNorm it is a steady positive value; output.weight rows use it as a per-token logit
//          offset (byte/control tokens pushed down, optionally EOS pushed up).
//   MARK   set in the embeddings of BOS and <|im_start|> only.
//   TURN   written by one layer-0 "turn head" that attends to the latest MARK token while it is
//          recent and to nearby ordinary tokens afterwards (an ALiBi-like recency score built from a
//          slow RoPE frequency pair), so it is ~1 at the start of a turn and falls to ~0 about
//          TURN_SPAN_TOKENS later. Pulling EOS down by it makes EOS arrive a set number of tokens
//          into each turn, whatever the prompt length.
//   GUARD  set in the embeddings of byte/control tokens, so EOS can be vetoed right after the
//          "assistant\n" header (a reply always has some text before it ends), and so a line can
//          start with a word that has no leading space.
//
// All values come from one xoshiro stream per tensor, consumed in row-major order, so the bytes do
// not depend on chunk sizes and are identical on every machine.

import { Xoshiro128 } from './prng.js';
import { SPACE_MARKER, SpecialToken, TokenType, wordIds, type Vocab } from './vocab.js';

const Channel = { BIAS: 0, MARK: 1, TURN: 2, GUARD: 3 } as const;
const FIRST_CONTENT_CHANNEL = 4;

export interface ModelShape {
  seed: number;
  vocabSize: number;
  embeddingLength: number;
  blockCount: number;
  headCount: number;
  headCountKv: number;
  feedForwardLength: number;
  ropeFreqBase: number;
  eosBias: 'suppressed' | 'natural';
  /** Trailing blocks that write nothing to the residual (random-model.ts `inertBlocks`). */
  inertBlocks?: number;
}

/** Fills `row` (row `index` of a tensor) in place from `rng`, which visits the tensor's rows in order. */
export type RowFill = (row: Float32Array, index: number, rng: Xoshiro128) => void;

export interface TensorRecipe {
  name: string;
  /** ggml order, fastest first: [row length, row count]. */
  dims: [number] | [number, number];
  /** Norm weights stay f32 whatever the model's type, as llama.cpp's converters keep 1-D tensors. */
  isNorm: boolean;
  fill: RowFill;
}

// Gains, tuned empirically so greedy output is varied printable text: attention scores spread by a
// few units (so RoPE and context matter) and block writes comparable to the embeddings (so the layers
// are not negligible), with a final residual RMS near FINAL_RESIDUAL_RMS at any depth.
export const EMBED_STD = 1;
export const BIAS_VALUE = 1;
export const MARK_VALUE = 4;
export const GUARD_VALUE = 4;
export const QK_GAIN = 2.5;
export const V_GAIN = 1;
export const O_GAIN = 2;
export const FFN_IN_GAIN = 1.5;
export const FFN_DOWN_GAIN = 1;
/** Spread of the random (content) logits. */
export const LOGIT_STD = 3;
// output_norm gains for the hand-wired channels: the big factors live in f32 norm weights rather
// than in output.weight, where they would coarsen the quantization of their whole block.
export const OUT_NORM_BIAS = 8;
export const OUT_NORM_TURN = 4;
export const OUT_NORM_GUARD = 4;
/** Measured with a reference forward pass over 2- to 40-layer models. */
export const FINAL_RESIDUAL_RMS = 2.5;

/** How fast the turn head's score falls with distance, per token. */
export const TURN_SLOPE = 0.4;
/** Tokens after a MARK token at which the turn head lets go of it. */
export const TURN_SPAN_TOKENS = 24;
// The recency score is b*sin(distance*theta) of one RoPE pair: the pair must turn slowly enough that
// the sine keeps rising over a long reply (here for 400+ tokens), yet not so slowly that f16 rounding
// of the big rotated K values blurs distances by more than a fraction of a token.
export const TURN_MAX_THETA = 1 / 256;

// Logit offsets. Content logits reach about +10 (3.3 sigma over a 1k vocab, 4 sigma over 32k).
export const SUPPRESSED_LOGITS = -20;
/** Favors whole words over word fragments, so greedy output reads as words separated by spaces. */
export const WHOLE_WORD_LOGITS = 1;
/** Pieces without a leading space would glue onto the previous word; keep them rarer. */
export const UNSPACED_LOGITS = -4;
/** ...except whole words right after a newline or control token (GUARD), so a reply starts with a word. */
export const BARE_WORD_AFTER_BREAK_LOGITS = 12;
export const EOS_LOGITS = 20;
/** EOS pull at TURN = 1: EOS wins once the turn head's hold drops below about (20 - 10) / 40. */
export const EOS_TURN_PULL_LOGITS = -40;
export const EOS_VETO_LOGITS = -30;

const SQRT3 = Math.sqrt(3);
const LN2 = 0.6931471805599453;

/** ln(x) for x > 0 from basic IEEE operations only: Math.log may differ between platforms. */
export function portableLn(x: number): number {
  let exponent = 0;
  let m = x;
  while (m >= 2) {
    m /= 2;
    exponent++;
  }
  while (m < 1) {
    m *= 2;
    exponent--;
  }
  // ln(m) = 2 atanh((m - 1) / (m + 1)); the ratio is below 1/3, so the series converges fast.
  const s = (m - 1) / (m + 1);
  let sum = 0;
  let power = s;
  for (let n = 1; n < 80; n += 2) {
    sum += power / n;
    power *= s * s;
  }
  return 2 * sum + exponent * LN2;
}

/** e^x from basic IEEE operations only. */
export function portableExp(x: number): number {
  const k = Math.round(x / LN2);
  const r = x - k * LN2;
  let term = 1;
  let sum = 1;
  for (let n = 1; n < 30; n++) {
    term = (term * r) / n;
    sum += term;
  }
  for (let i = 0; i < Math.abs(k); i++) sum = k > 0 ? sum * 2 : sum / 2;
  return sum;
}

export function uniformFill(std: number): RowFill {
  const amplitude = std * SQRT3;
  return (row, _index, rng) => {
    for (let i = 0; i < row.length; i++) row[i] = rng.nextSigned() * amplitude;
  };
}

/** Uniform init with standard deviation gain/sqrt(fanIn), the usual scale for a linear layer. */
export function linearFill(fanIn: number, gain: number): RowFill {
  return uniformFill(gain / Math.sqrt(fanIn));
}

export function constantFill(values: (channel: number) => number): RowFill {
  return (row) => {
    for (let i = 0; i < row.length; i++) row[i] = values(i);
  };
}

function clearReserved(row: Float32Array): void {
  row.fill(0, 0, FIRST_CONTENT_CHANNEL);
}

/** RMS of an embedding row whose content channels have EMBED_STD and whose wired channels hold `wired`. */
function embeddingRms(d: number, wired: readonly number[]): number {
  const wiredSquares = wired.reduce((sum, v) => sum + v * v, 0);
  return Math.sqrt(((d - FIRST_CONTENT_CHANNEL) * EMBED_STD ** 2 + wiredSquares) / d);
}

/** Where the turn head lives and the weights that wire it (see the header comment). */
interface TurnHead {
  head: number;
  kvHead: number;
  /** Index within a head of the RoPE pair (2p, 2p + 1) carrying the recency score. */
  pair: number;
  queryWeight: number;
  keyBiasWeight: number;
  keyMarkWeight: number;
}

function turnHead(shape: ModelShape): TurnHead {
  const d = shape.embeddingLength;
  const headDim = d / shape.headCount;
  // ggml rotates pair p of a head at position n by n * base^(-2p / headDim); take the fastest pair
  // that is still slow enough.
  const pairs = headDim / 2;
  const thetaOf = (p: number): number => portableExp((-2 * p * portableLn(shape.ropeFreqBase)) / headDim);
  let pair = 0;
  while (pair < pairs - 1 && thetaOf(pair) > TURN_MAX_THETA) pair++;
  const theta = thetaOf(pair);
  // Query and key both read BIAS (1 / rms after attn_norm); their product sets the slope:
  // score = q * k * sin(distance * theta) / sqrt(headDim) ~ TURN_SLOPE * distance.
  const ordinaryRms = embeddingRms(d, [BIAS_VALUE]);
  const scale = Math.sqrt((TURN_SLOPE * Math.sqrt(headDim)) / theta) * ordinaryRms;
  // A marker's MARK key component offsets its own recency penalty until TURN_SPAN_TOKENS.
  const keyMarkWeight = (scale * BIAS_VALUE * TURN_SPAN_TOKENS * theta) / MARK_VALUE;
  return {
    head: shape.headCount - 1,
    // ggml maps query head h to kv head h / (headCount / headCountKv): the last query head reads
    // the last kv head.
    kvHead: shape.headCountKv - 1,
    pair,
    queryWeight: scale,
    keyBiasWeight: scale,
    keyMarkWeight,
  };
}

export function tensorRecipes(shape: ModelShape, vocab: Vocab): TensorRecipe[] {
  const d = shape.embeddingLength;
  const nonContent = (id: number): boolean => vocab.types[id] !== TokenType.NORMAL;
  const isMarker = (id: number): boolean => id === SpecialToken.BOS || id === SpecialToken.IM_START;

  const embedNoise = uniformFill(EMBED_STD);
  const tokenEmbd: RowFill = (row, id, rng) => {
    embedNoise(row, id, rng);
    clearReserved(row);
    row[Channel.BIAS] = BIAS_VALUE;
    if (isMarker(id)) row[Channel.MARK] = MARK_VALUE;
    if (nonContent(id)) row[Channel.GUARD] = GUARD_VALUE;
  };

  // After output_norm, a wired channel of the last position is about its residual value times its
  // norm gain over the final residual RMS; these units turn logit offsets into output.weight entries.
  // TURN at full hold is the marker's normalized MARK value (the turn head's V reads MARK).
  const markerRms = embeddingRms(d, [BIAS_VALUE, MARK_VALUE, GUARD_VALUE]);
  const biasUnit = (BIAS_VALUE * OUT_NORM_BIAS) / FINAL_RESIDUAL_RMS;
  const guardUnit = (GUARD_VALUE * OUT_NORM_GUARD) / FINAL_RESIDUAL_RMS;
  const turnUnit = ((MARK_VALUE / markerRms) * OUT_NORM_TURN) / FINAL_RESIDUAL_RMS;

  const outputNoise = linearFill(d, LOGIT_STD);
  const eosIds = new Set<number>([SpecialToken.IM_END, SpecialToken.EOS]);
  const words = wordIds(vocab);
  const output: RowFill = (row, id, rng) => {
    outputNoise(row, id, rng);
    clearReserved(row);
    if (shape.eosBias === 'natural' && eosIds.has(id)) {
      // No content weights: the EOS logit is then a function of the wired channels alone.
      row.fill(0);
      // </s> sits one logit below <|im_end|> so the chat terminator is what normally ends a reply.
      row[Channel.BIAS] = (EOS_LOGITS - (id === SpecialToken.EOS ? 1 : 0)) / biasUnit;
      row[Channel.TURN] = EOS_TURN_PULL_LOGITS / turnUnit;
      row[Channel.GUARD] = EOS_VETO_LOGITS / guardUnit;
    } else if (nonContent(id)) {
      row[Channel.BIAS] = SUPPRESSED_LOGITS / biasUnit;
    } else if (words.spaced.has(id)) {
      row[Channel.BIAS] = WHOLE_WORD_LOGITS / biasUnit;
    } else if (!(vocab.tokens[id] as string).startsWith(SPACE_MARKER)) {
      row[Channel.BIAS] = UNSPACED_LOGITS / biasUnit;
      if (words.bare.has(id)) row[Channel.GUARD] = BARE_WORD_AFTER_BREAK_LOGITS / guardUnit;
    }
  };

  const outputNorm = constantFill((channel) => {
    if (channel === Channel.BIAS) return OUT_NORM_BIAS;
    if (channel === Channel.TURN) return OUT_NORM_TURN;
    if (channel === Channel.GUARD) return OUT_NORM_GUARD;
    return channel === Channel.MARK ? 0 : 1;
  });

  const recipes: TensorRecipe[] = [
    { name: 'token_embd.weight', dims: [d, shape.vocabSize], isNorm: false, fill: tokenEmbd },
    { name: 'output_norm.weight', dims: [d], isNorm: true, fill: outputNorm },
    { name: 'output.weight', dims: [d, shape.vocabSize], isNorm: false, fill: output },
  ];
  const turn = turnHead(shape);
  for (let block = 0; block < shape.blockCount; block++) {
    recipes.push(...blockRecipes(block, shape, block === 0 ? turn : undefined));
  }
  return recipes;
}

function blockRecipes(block: number, shape: ModelShape, turn: TurnHead | undefined): TensorRecipe[] {
  const d = shape.embeddingLength;
  const ff = shape.feedForwardLength;
  const headDim = d / shape.headCount;
  const kvLength = headDim * shape.headCountKv;
  const groupSize = shape.headCount / shape.headCountKv;
  const prefix = `blk.${block}.`;
  const ones = constantFill(() => 1);
  // Each block's residual writes shrink with depth so that the final residual RMS, which scales
  // every wired channel after output_norm, is about the same for 2 layers as for 40. Inert blocks do
  // not count: the working blocks then hold the same bytes as those of the model without them.
  const workingBlocks = shape.blockCount - (shape.inertBlocks ?? 0);
  const residualGain = 1 / Math.sqrt(workingBlocks);
  const inert = block >= workingBlocks;

  const qNoise = linearFill(d, QK_GAIN);
  const attnQ: RowFill = (row, index, rng) => {
    qNoise(row, index, rng);
    if (!turn) return;
    const head = Math.floor(index / headDim);
    const within = index % headDim;
    if (head === turn.head) {
      row.fill(0);
      if (within === 2 * turn.pair + 1) row[Channel.BIAS] = turn.queryWeight;
    } else if (Math.floor(head / groupSize) === turn.kvHead && (within >> 1) === turn.pair) {
      // Heads sharing the turn head's keys ignore its (large) wired pair.
      row.fill(0);
    }
  };

  const kNoise = linearFill(d, QK_GAIN);
  const attnK: RowFill = (row, index, rng) => {
    kNoise(row, index, rng);
    if (!turn || Math.floor(index / headDim) !== turn.kvHead) return;
    const within = index % headDim;
    if (within === 2 * turn.pair) {
      row.fill(0);
      row[Channel.BIAS] = turn.keyBiasWeight;
    } else if (within === 2 * turn.pair + 1) {
      row.fill(0);
      row[Channel.MARK] = turn.keyMarkWeight;
    }
  };

  const vNoise = linearFill(d, V_GAIN);
  const attnV: RowFill = (row, index, rng) => {
    vNoise(row, index, rng);
    if (turn && index === turn.kvHead * headDim) {
      row.fill(0);
      row[Channel.MARK] = 1;
    }
  };

  const turnColumn = turn ? turn.head * headDim : -1;
  const oNoise = linearFill(d, O_GAIN * residualGain);
  const attnOutput: RowFill = (row, index, rng) => {
    oNoise(row, index, rng);
    if (inert) {
      row.fill(0);
      return;
    }
    if (turn) row[turnColumn] = 0;
    if (index < FIRST_CONTENT_CHANNEL) {
      row.fill(0);
      if (turn && index === Channel.TURN) row[turnColumn] = 1;
    }
  };

  const downNoise = linearFill(ff, FFN_DOWN_GAIN * residualGain);
  const ffnDown: RowFill = (row, index, rng) => {
    downNoise(row, index, rng);
    if (inert || index < FIRST_CONTENT_CHANNEL) row.fill(0);
  };

  return [
    { name: `${prefix}attn_norm.weight`, dims: [d], isNorm: true, fill: ones },
    { name: `${prefix}attn_q.weight`, dims: [d, d], isNorm: false, fill: attnQ },
    { name: `${prefix}attn_k.weight`, dims: [d, kvLength], isNorm: false, fill: attnK },
    { name: `${prefix}attn_v.weight`, dims: [d, kvLength], isNorm: false, fill: attnV },
    { name: `${prefix}attn_output.weight`, dims: [d, d], isNorm: false, fill: attnOutput },
    { name: `${prefix}ffn_norm.weight`, dims: [d], isNorm: true, fill: ones },
    { name: `${prefix}ffn_gate.weight`, dims: [d, ff], isNorm: false, fill: linearFill(d, FFN_IN_GAIN) },
    { name: `${prefix}ffn_up.weight`, dims: [d, ff], isNorm: false, fill: linearFill(d, FFN_IN_GAIN) },
    { name: `${prefix}ffn_down.weight`, dims: [ff, d], isNorm: false, fill: ffnDown },
  ];
}
