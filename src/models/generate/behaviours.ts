// Weight recipes for the random models with a chat behaviour beyond "text, then EOS": a reasoning
// model (`think`) and a tool-eager model (`tools`). The plain models keep their recipes in weights.ts
// (their bytes are pinned); these reuse its gains, noise and logit offsets but lay out more hand-wired
// residual channels, each written by an attention head that looks for particular tag tokens:
//
//   BIAS, MARK, TURN, GUARD  as in weights.ts: a constant; the marker flag (BOS and <|im_start|>,
//          plus <think> and </think> for think); the turn head's "a marker is recent" hold, which
//          makes EOS (and </think>) arrive a set number of tokens after the latest marker; and the
//          flag of byte, control and tag tokens, which marks the first token of a reply.
//   THINK_OPENED, THINK_CLOSED (think)  a "latest marker" head: which marker came last in this
//          turn. <think> is written only at the start of a reply whose prompt did not open the block
//          (so the model also works behind a plain ChatML prompt), </think> only while the block is
//          open, EOS only once it is closed: a reply is reasoning, </think> once, answer, EOS.
//   TOOLS (tools)        1 when a <tools> token is anywhere in the context: this head has no recency
//          and uses the slowest RoPE pair, which barely turns over the whole context.
//   RESP_SINCE (tools)   a latest-marker head over <|im_start|>, </tool_response>, <tool_call> and
//          `{`, reading 1 for </tool_response>: at a user turn's <|im_end|> it says whether that turn
//          ended with a tool result.
//   LAST_RESP (tools)    a layer-1 head that reads RESP_SINCE at the most recent <|im_end|>: 1 when
//          the turn before the reply was a tool result. <tool_call> takes the first token of a reply
//          when TOOLS is on and LAST_RESP is off, and loses everywhere else.
//   IN_CALL (tools)      the RESP_SINCE head's second output: 1 while the latest marker is
//          <tool_call> or `{`. Inside a call, where Shoal's grammar picks the tokens that may follow,
//          `"`, `}` and `]` win whenever allowed, so the call's JSON closes within a few tokens
//          (strings come out empty) and the grammar then ends the reply with EOS.
//
// A wired head uses one slow RoPE pair: with q = (0, Q) and k = (R, B) the score is
// (B Q cos(d theta) - R Q sin(d theta)) / sqrt(headDim) at distance d, a bonus B for flagged keys
// minus a recency penalty growing by ~R Q theta / sqrt(headDim) per token (valid while d theta < pi,
// which bounds the context length). Tokens that carry a key flag (markers, tags, and for tools
// <|im_end|> and `{`) have no random content channels, so their normalized embeddings, and with them
// every key score and head output, are known exactly here.

import { SPACE_MARKER, SpecialToken, TokenType, wordIds, type Vocab } from './vocab.js';
import {
  BARE_WORD_AFTER_BREAK_LOGITS,
  BIAS_VALUE,
  constantFill,
  EMBED_STD,
  EOS_LOGITS,
  EOS_TURN_PULL_LOGITS,
  EOS_VETO_LOGITS,
  FFN_DOWN_GAIN,
  FFN_IN_GAIN,
  FINAL_RESIDUAL_RMS,
  GUARD_VALUE,
  linearFill,
  LOGIT_STD,
  MARK_VALUE,
  O_GAIN,
  OUT_NORM_BIAS,
  portableExp,
  portableLn,
  QK_GAIN,
  SUPPRESSED_LOGITS,
  TURN_MAX_THETA,
  TURN_SLOPE,
  TURN_SPAN_TOKENS,
  uniformFill,
  UNSPACED_LOGITS,
  V_GAIN,
  WHOLE_WORD_LOGITS,
  type ModelShape,
  type RowFill,
  type TensorRecipe,
} from './weights.js';

export type Behaviour = 'think' | 'tools';

export const THINK_OPEN_TAG = '<think>';
export const THINK_CLOSE_TAG = '</think>';
export const TOOLS_OPEN_TAG = '<tools>';
export const TOOLS_CLOSE_TAG = '</tools>';
export const TOOL_CALL_OPEN_TAG = '<tool_call>';
export const TOOL_CALL_CLOSE_TAG = '</tool_call>';
export const TOOL_RESPONSE_OPEN_TAG = '<tool_response>';
export const TOOL_RESPONSE_CLOSE_TAG = '</tool_response>';

/** USER_DEFINED tokens each behaviour adds at the end of the vocab, in id order. */
export const BEHAVIOUR_TAGS: Readonly<Record<Behaviour, readonly string[]>> = {
  think: [THINK_OPEN_TAG, THINK_CLOSE_TAG],
  tools: [TOOLS_OPEN_TAG, TOOLS_CLOSE_TAG, TOOL_CALL_OPEN_TAG, TOOL_CALL_CLOSE_TAG, TOOL_RESPONSE_OPEN_TAG, TOOL_RESPONSE_CLOSE_TAG],
};

/** Wired attention heads per layer (index = layer) of each behaviour: each needs a kv head of its own. */
export const BEHAVIOUR_HEADS: Readonly<Record<Behaviour, readonly number[]>> = {
  think: [2],
  tools: [3, 1],
};

const Channel = {
  BIAS: 0,
  MARK: 1,
  TURN: 2,
  GUARD: 3,
  THINK_OPEN_FLAG: 4,
  THINK_CLOSE_FLAG: 5,
  THINK_OPENED: 6,
  THINK_CLOSED: 7,
  TOOLS_FLAG: 8,
  TOOLS: 9,
  RESP_FLAG: 10,
  RESP_SINCE: 11,
  END_FLAG: 12,
  LAST_RESP: 13,
  CALL_FLAG: 14,
  JSON_FLAG: 15,
  IN_CALL: 16,
} as const;
type Channel = (typeof Channel)[keyof typeof Channel];
/** Channels below this are wired; embeddingLength must leave room for content above it. */
export const BEHAVIOUR_CONTENT_CHANNEL = 20;

const FLAG_VALUE = 4;

/** Tokens after <think> at which </think> is written, and after </think> at which EOS is. */
const THINK_SPAN_TOKENS = 20;
/** How strongly a latest-marker head prefers the more recent of two markers, per token between them. */
const LATEST_SLOPE = 0.5;
/** A marker's score over an ordinary token at the same distance: the head sees markers ~150 tokens back. */
const LATEST_BONUS = 80;
/** The <tools> head has no recency: the tag outscores any number of ordinary tokens. */
const PRESENCE_BONUS = 24;
/** Query weight of the presence head, which has no recency term to balance it against. */
const PRESENCE_QUERY = 4;
/** The layer-1 head finds the latest <|im_end|>, a few tokens before the reply's first token (it sees ~12 back). */
const LAST_END_SLOPE = 2;
const LAST_END_BONUS = 24;
/**
 * RMS of the residual entering layer 1 (embedding plus layer 0's writes), measured with a reference
 * forward pass: ~1.4 at a turn's <|im_end|>, ~1.5 at the last prompt token. It scales the LAST_RESP
 * head's keys, query and value.
 */
const LAYER1_END_RMS = 1.4;
const LAYER1_QUERY_RMS = 1.5;

/** Output-norm gain of the head outputs and flags that feed logits; each is 1 at full strength. */
const OUT_NORM_STATE = 16;
const OUT_NORM_GUARD = 4;

// Logit offsets at full strength of their channel (the plain ones are in weights.ts). Content logits
// reach about +10, and +20 for a bare word at a reply's first token.
/** <think> = base + GUARD - THINK_OPENED: ~+30 at a reply's first token unless the prompt opened the block. */
const THINK_OPEN_LOGITS = -10;
const THINK_OPEN_AT_BREAK_LOGITS = 40;
const THINK_OPEN_WHEN_OPENED_LOGITS = -80;
/** </think> is written like tiny-eos's EOS, and never again once THINK_CLOSED. */
const THINK_CLOSE_LOGITS = EOS_LOGITS;
const THINK_CLOSE_WHEN_CLOSED_LOGITS = -60;
/** EOS is held down by this much until THINK_CLOSED. */
const EOS_BEFORE_THINK_CLOSE_LOGITS = -40;
/** <tool_call> = base + GUARD + TOOLS - LAST_RESP - CALL_FLAG: ~+30 only at a reply's first token. */
const TOOL_CALL_LOGITS = -50;
const TOOL_CALL_AT_BREAK_LOGITS = 40;
const TOOL_CALL_TOOLS_LOGITS = 40;
const TOOL_CALL_AFTER_RESULT_LOGITS = -80;
const TOOL_CALL_REPEAT_LOGITS = -80;
/**
 * Inside a tool call the JSON closers outscore any content token, `"` the most (so a string the
 * grammar has opened closes at once, rather than taking in `}` or `]`).
 */
const JSON_OPEN = '{';
const JSON_CLOSER_LOGITS: Readonly<Record<string, number>> = { '"': 36, '}': 30, ']': 30 };
/** ...and EOS gains on them once TURN lets go, so a call generated without a grammar still ends. */
const EOS_IN_CALL_LOGITS = 20;

type Wiring = Partial<Record<Channel, number>>;

function entries(wiring: Wiring): Array<[number, number]> {
  return Object.entries(wiring).map(([channel, value]) => [Number(channel), value]);
}

/** One output of a wired head: V dimension `i` reads `value`; its result, divided by `fullValue`, goes to `out`. */
interface HeadOutput {
  value: Wiring;
  out: Channel;
  /** The (normalized) value the head reads when it attends fully to the token that sets it. */
  fullValue: number;
}

/** One hand-wired attention head: see the header comment. Scores are attention logits. */
interface WiredHead {
  layer: number;
  /** Recency penalty per token of distance (0: none, and the head uses the slowest RoPE pair). */
  slope: number;
  /** Key weights per channel, as the score bonus a key token carrying the channel gets and its normalized value there. */
  bonuses: Array<{ channel: Channel; score: number; normalized: number }>;
  /** Expected rms of the query's input and of an ordinary key's: they set the recency weights. */
  queryRms: number;
  keyRms: number;
  outputs: HeadOutput[];
}

interface PlacedHead extends WiredHead {
  head: number;
  kvHead: number;
  pair: number;
  queryWeight: number;
  recencyWeight: number;
  bonusWeights: Wiring;
}

type RopeShape = Pick<ModelShape, 'embeddingLength' | 'headCount' | 'ropeFreqBase'>;

function thetaOf(shape: RopeShape, pair: number): number {
  const headDim = shape.embeddingLength / shape.headCount;
  return portableExp((-2 * pair * portableLn(shape.ropeFreqBase)) / headDim);
}

/**
 * The RoPE pair of a wired head. Recency heads take, as weights.ts does, the fastest pair slow enough
 * that sin(distance * theta) keeps rising over a long context, yet fast enough that f16 rounding of
 * the big rotated keys stays a fraction of a token. A head without recency takes the slowest pair,
 * whose cos(distance * theta), the factor on its bonus, must stay near 1 over the whole context.
 */
function pairFor(shape: RopeShape, slope: number): number {
  const pairs = shape.embeddingLength / shape.headCount / 2;
  if (slope === 0) return pairs - 1;
  let pair = 0;
  while (pair < pairs - 1 && thetaOf(shape, pair) > TURN_MAX_THETA) pair++;
  return pair;
}

/**
 * The context length the wired heads measure correctly: a recency head's penalty sin(distance * theta)
 * stays positive up to pi / theta, and a head without recency keeps most of its bonus while
 * distance * theta stays under 1 radian.
 */
export function behaviourContextLimit(shape: RopeShape): number {
  return Math.floor(Math.min(Math.PI / thetaOf(shape, pairFor(shape, 1)), 1 / thetaOf(shape, pairFor(shape, 0))));
}

/** Places each layer's heads on the last query head of the last kv groups, one group each, and turns scores into weights. */
function placeHeads(shape: ModelShape, heads: readonly WiredHead[]): PlacedHead[] {
  const headDim = shape.embeddingLength / shape.headCount;
  const groupSize = shape.headCount / shape.headCountKv;
  const perLayer = new Map<number, number>();
  return heads.map((wired) => {
    const slot = perLayer.get(wired.layer) ?? 0;
    perLayer.set(wired.layer, slot + 1);
    const kvHead = shape.headCountKv - 1 - slot;
    if (kvHead < 0) throw new Error(`layer ${wired.layer} needs more than ${shape.headCountKv} kv heads`);
    const pair = pairFor(shape, wired.slope);
    const theta = thetaOf(shape, pair);
    // The normalized query Q and recency key R split the product the slope needs evenly.
    const q = wired.slope > 0 ? Math.sqrt((wired.slope * Math.sqrt(headDim)) / theta) : PRESENCE_QUERY;
    const r = wired.slope > 0 ? (wired.slope * Math.sqrt(headDim)) / (theta * q) : 0;
    const bonusWeights: Wiring = {};
    for (const bonus of wired.bonuses) bonusWeights[bonus.channel] = (bonus.score * Math.sqrt(headDim)) / (q * bonus.normalized);
    return {
      ...wired,
      head: kvHead * groupSize + groupSize - 1,
      kvHead,
      pair,
      queryWeight: (q * wired.queryRms) / BIAS_VALUE,
      recencyWeight: (r * wired.keyRms) / BIAS_VALUE,
      bonusWeights,
    };
  });
}

export function behaviourTensorRecipes(shape: ModelShape, behaviour: Behaviour, vocab: Vocab): TensorRecipe[] {
  const d = shape.embeddingLength;
  const think = behaviour === 'think';
  const tools = behaviour === 'tools';
  const idOf = (tag: string): number => vocab.tokens.lastIndexOf(tag);
  const tags = {
    thinkOpen: think ? idOf(THINK_OPEN_TAG) : -1,
    thinkClose: think ? idOf(THINK_CLOSE_TAG) : -1,
    tools: tools ? idOf(TOOLS_OPEN_TAG) : -1,
    toolCall: tools ? idOf(TOOL_CALL_OPEN_TAG) : -1,
    toolResponseClose: tools ? idOf(TOOL_RESPONSE_CLOSE_TAG) : -1,
    jsonOpen: tools ? idOf(JSON_OPEN) : -1,
  };
  const jsonClosers = new Map(tools ? Object.entries(JSON_CLOSER_LOGITS).map(([piece, logits]) => [idOf(piece), logits]) : []);
  const nonContent = (id: number): boolean => vocab.types[id] !== TokenType.NORMAL;

  // The wired channels of each token's embedding. Tokens with a key flag get no content noise.
  const wiringOf = (id: number): Wiring => {
    const wired: Wiring = { [Channel.BIAS]: BIAS_VALUE };
    const markers = [SpecialToken.BOS, SpecialToken.IM_START, tags.thinkOpen, tags.thinkClose] as number[];
    if (markers.includes(id)) wired[Channel.MARK] = MARK_VALUE;
    if (nonContent(id)) wired[Channel.GUARD] = GUARD_VALUE;
    if (id === tags.thinkOpen) wired[Channel.THINK_OPEN_FLAG] = FLAG_VALUE;
    if (id === tags.thinkClose) wired[Channel.THINK_CLOSE_FLAG] = FLAG_VALUE;
    if (id === tags.tools) wired[Channel.TOOLS_FLAG] = FLAG_VALUE;
    if (id === tags.toolResponseClose) wired[Channel.RESP_FLAG] = FLAG_VALUE;
    if (tools && id === SpecialToken.IM_END) wired[Channel.END_FLAG] = FLAG_VALUE;
    if (id === tags.toolCall) wired[Channel.CALL_FLAG] = FLAG_VALUE;
    if (id === tags.jsonOpen) wired[Channel.JSON_FLAG] = FLAG_VALUE;
    return wired;
  };
  const keyed = (id: number): boolean => Object.keys(wiringOf(id)).length > (nonContent(id) ? 2 : 1);
  const rmsOfToken = (id: number): number => {
    const squares = entries(wiringOf(id)).reduce((sum, [, v]) => sum + v * v, 0);
    const content = keyed(id) ? 0 : (d - BEHAVIOUR_CONTENT_CHANNEL) * EMBED_STD ** 2;
    return Math.sqrt((content + squares) / d);
  };
  const normalized = (id: number, channel: Channel): number => (wiringOf(id)[channel] ?? 0) / rmsOfToken(id);
  const ordinaryRms = Math.sqrt(((d - BEHAVIOUR_CONTENT_CHANNEL) * EMBED_STD ** 2 + BIAS_VALUE ** 2) / d);
  const markMarker = normalized(SpecialToken.IM_START, Channel.MARK);

  // Every marker gets the same key score and turn value as <|im_start|>: the think tags, whose
  // embeddings carry one more flag (so a smaller normalized MARK), make up the difference through it.
  const thinkTags = think
    ? [
        { id: tags.thinkOpen, flag: Channel.THINK_OPEN_FLAG },
        { id: tags.thinkClose, flag: Channel.THINK_CLOSE_FLAG },
      ]
    : [];
  const markerBonuses = (score: number): WiredHead['bonuses'] => [
    { channel: Channel.MARK, score, normalized: markMarker },
    ...thinkTags.map(({ id, flag }) => ({
      channel: flag,
      score: score * (1 - normalized(id, Channel.MARK) / markMarker),
      normalized: normalized(id, flag),
    })),
  ];
  const markerValue: Wiring = { [Channel.MARK]: 1 };
  for (const { id, flag } of thinkTags) markerValue[flag] = (markMarker - normalized(id, Channel.MARK)) / normalized(id, flag);

  const wired: WiredHead[] = [
    {
      layer: 0,
      slope: TURN_SLOPE,
      bonuses: markerBonuses(TURN_SLOPE * (think ? THINK_SPAN_TOKENS : TURN_SPAN_TOKENS)),
      queryRms: ordinaryRms,
      keyRms: ordinaryRms,
      outputs: [{ value: markerValue, out: Channel.TURN, fullValue: markMarker }],
    },
  ];
  if (think) {
    const flagAtTag = normalized(tags.thinkClose, Channel.THINK_CLOSE_FLAG);
    wired.push({
      layer: 0,
      slope: LATEST_SLOPE,
      bonuses: markerBonuses(LATEST_BONUS),
      queryRms: ordinaryRms,
      keyRms: ordinaryRms,
      outputs: [
        { value: { [Channel.THINK_OPEN_FLAG]: 1, [Channel.THINK_CLOSE_FLAG]: 1 }, out: Channel.THINK_OPENED, fullValue: flagAtTag },
        { value: { [Channel.THINK_CLOSE_FLAG]: 1 }, out: Channel.THINK_CLOSED, fullValue: flagAtTag },
      ],
    });
  }
  if (tools) {
    const toolsFlag = normalized(tags.tools, Channel.TOOLS_FLAG);
    wired.push({
      layer: 0,
      slope: 0,
      bonuses: [{ channel: Channel.TOOLS_FLAG, score: PRESENCE_BONUS, normalized: toolsFlag }],
      queryRms: ordinaryRms,
      keyRms: ordinaryRms,
      outputs: [{ value: { [Channel.TOOLS_FLAG]: 1 }, out: Channel.TOOLS, fullValue: toolsFlag }],
    });
    // The latest of <|im_start|>, </tool_response>, <tool_call> and `{`.
    const respFlag = normalized(tags.toolResponseClose, Channel.RESP_FLAG);
    const callFlag = normalized(tags.toolCall, Channel.CALL_FLAG);
    const jsonFlag = normalized(tags.jsonOpen, Channel.JSON_FLAG);
    wired.push({
      layer: 0,
      slope: LATEST_SLOPE,
      bonuses: [
        ...markerBonuses(LATEST_BONUS),
        { channel: Channel.RESP_FLAG, score: LATEST_BONUS, normalized: respFlag },
        { channel: Channel.CALL_FLAG, score: LATEST_BONUS, normalized: callFlag },
        { channel: Channel.JSON_FLAG, score: LATEST_BONUS, normalized: jsonFlag },
      ],
      queryRms: ordinaryRms,
      keyRms: ordinaryRms,
      outputs: [
        { value: { [Channel.RESP_FLAG]: 1 }, out: Channel.RESP_SINCE, fullValue: respFlag },
        { value: { [Channel.CALL_FLAG]: 1 / callFlag, [Channel.JSON_FLAG]: 1 / jsonFlag }, out: Channel.IN_CALL, fullValue: 1 },
      ],
    });
    // RESP_SINCE is 1 at full strength in the residual; layer 1 sees it divided by the residual rms.
    wired.push({
      layer: 1,
      slope: LAST_END_SLOPE,
      bonuses: [{ channel: Channel.END_FLAG, score: LAST_END_BONUS, normalized: FLAG_VALUE / LAYER1_END_RMS }],
      queryRms: LAYER1_QUERY_RMS,
      keyRms: LAYER1_QUERY_RMS,
      outputs: [{ value: { [Channel.RESP_SINCE]: 1 }, out: Channel.LAST_RESP, fullValue: 1 / LAYER1_END_RMS }],
    });
  }
  const heads = placeHeads(shape, wired);

  const embedNoise = uniformFill(EMBED_STD);
  const tokenEmbd: RowFill = (row, id, rng) => {
    embedNoise(row, id, rng);
    row.fill(0, 0, keyed(id) ? d : BEHAVIOUR_CONTENT_CHANNEL);
    for (const [channel, value] of entries(wiringOf(id))) row[channel] = value;
  };

  // Logit units: a channel at full strength, after output_norm, at the last position.
  const biasUnit = (BIAS_VALUE * OUT_NORM_BIAS) / FINAL_RESIDUAL_RMS;
  const guardUnit = (GUARD_VALUE * OUT_NORM_GUARD) / FINAL_RESIDUAL_RMS;
  const stateUnit = OUT_NORM_STATE / FINAL_RESIDUAL_RMS;
  const flagUnit = (FLAG_VALUE * OUT_NORM_STATE) / FINAL_RESIDUAL_RMS;
  const stateChannels = new Set<number>([
    Channel.TURN,
    Channel.THINK_OPENED,
    Channel.THINK_CLOSED,
    Channel.TOOLS,
    Channel.LAST_RESP,
    Channel.CALL_FLAG,
    Channel.IN_CALL,
  ]);
  const outputNorm = constantFill((channel) => {
    if (channel >= BEHAVIOUR_CONTENT_CHANNEL) return 1;
    if (channel === Channel.BIAS) return OUT_NORM_BIAS;
    if (channel === Channel.GUARD) return OUT_NORM_GUARD;
    return stateChannels.has(channel) ? OUT_NORM_STATE : 0;
  });

  const outputNoise = linearFill(d, LOGIT_STD);
  const words = wordIds(vocab);
  const output: RowFill = (row, id, rng) => {
    outputNoise(row, id, rng);
    row.fill(0, 0, BEHAVIOUR_CONTENT_CHANNEL);
    const logits = (offsets: Array<[Channel, number, number]>): void => {
      // No content weights: the logit is a function of the wired channels alone.
      row.fill(0);
      for (const [channel, offset, unit] of offsets) row[channel] = offset / unit;
    };
    if (id === SpecialToken.IM_END || id === SpecialToken.EOS) {
      // As tiny-eos, </s> one logit below <|im_end|>; think holds both down until </think>.
      logits([
        [Channel.BIAS, EOS_LOGITS - (id === SpecialToken.EOS ? 1 : 0) + (think ? EOS_BEFORE_THINK_CLOSE_LOGITS : 0), biasUnit],
        [Channel.TURN, EOS_TURN_PULL_LOGITS, stateUnit],
        [Channel.GUARD, EOS_VETO_LOGITS, guardUnit],
        ...(think ? [[Channel.THINK_CLOSED, -EOS_BEFORE_THINK_CLOSE_LOGITS, stateUnit] as [Channel, number, number]] : []),
        ...(tools ? [[Channel.IN_CALL, EOS_IN_CALL_LOGITS, stateUnit] as [Channel, number, number]] : []),
      ]);
    } else if (id === tags.thinkOpen) {
      logits([
        [Channel.BIAS, THINK_OPEN_LOGITS, biasUnit],
        [Channel.GUARD, THINK_OPEN_AT_BREAK_LOGITS, guardUnit],
        [Channel.THINK_OPENED, THINK_OPEN_WHEN_OPENED_LOGITS, stateUnit],
      ]);
    } else if (id === tags.thinkClose) {
      logits([
        [Channel.BIAS, THINK_CLOSE_LOGITS, biasUnit],
        [Channel.TURN, EOS_TURN_PULL_LOGITS, stateUnit],
        [Channel.GUARD, EOS_VETO_LOGITS, guardUnit],
        [Channel.THINK_CLOSED, THINK_CLOSE_WHEN_CLOSED_LOGITS, stateUnit],
      ]);
    } else if (id === tags.toolCall) {
      logits([
        [Channel.BIAS, TOOL_CALL_LOGITS, biasUnit],
        [Channel.GUARD, TOOL_CALL_AT_BREAK_LOGITS, guardUnit],
        [Channel.TOOLS, TOOL_CALL_TOOLS_LOGITS, stateUnit],
        [Channel.LAST_RESP, TOOL_CALL_AFTER_RESULT_LOGITS, stateUnit],
        [Channel.CALL_FLAG, TOOL_CALL_REPEAT_LOGITS, flagUnit],
      ]);
    } else if (nonContent(id)) {
      row[Channel.BIAS] = SUPPRESSED_LOGITS / biasUnit;
    } else if (jsonClosers.has(id)) {
      row[Channel.BIAS] = UNSPACED_LOGITS / biasUnit;
      row[Channel.IN_CALL] = (jsonClosers.get(id) as number) / stateUnit;
    } else if (words.spaced.has(id)) {
      row[Channel.BIAS] = WHOLE_WORD_LOGITS / biasUnit;
    } else if (!(vocab.tokens[id] as string).startsWith(SPACE_MARKER)) {
      row[Channel.BIAS] = UNSPACED_LOGITS / biasUnit;
      if (words.bare.has(id)) row[Channel.GUARD] = BARE_WORD_AFTER_BREAK_LOGITS / guardUnit;
    }
  };

  const recipes: TensorRecipe[] = [
    { name: 'token_embd.weight', dims: [d, shape.vocabSize], isNorm: false, fill: tokenEmbd },
    { name: 'output_norm.weight', dims: [d], isNorm: true, fill: outputNorm },
    { name: 'output.weight', dims: [d, shape.vocabSize], isNorm: false, fill: output },
  ];
  for (let block = 0; block < shape.blockCount; block++) {
    recipes.push(...blockRecipes(block, shape, heads.filter((h) => h.layer === block)));
  }
  return recipes;
}

function blockRecipes(block: number, shape: ModelShape, heads: PlacedHead[]): TensorRecipe[] {
  const d = shape.embeddingLength;
  const ff = shape.feedForwardLength;
  const headDim = d / shape.headCount;
  const kvLength = headDim * shape.headCountKv;
  const groupSize = shape.headCount / shape.headCountKv;
  const prefix = `blk.${block}.`;
  const ones = constantFill(() => 1);
  const residualGain = 1 / Math.sqrt(shape.blockCount);
  const byHead = new Map(heads.map((h) => [h.head, h]));
  const byKvHead = new Map(heads.map((h) => [h.kvHead, h]));
  // Output columns: head h's V dimension i lands in column h * headDim + i.
  const wiredColumns = heads.flatMap((h) => h.outputs.map((output, i) => ({ column: h.head * headDim + i, output })));

  const qNoise = linearFill(d, QK_GAIN);
  const attnQ: RowFill = (row, index, rng) => {
    qNoise(row, index, rng);
    const head = Math.floor(index / headDim);
    const within = index % headDim;
    const wired = byHead.get(head);
    if (wired) {
      row.fill(0);
      if (within === 2 * wired.pair + 1) row[Channel.BIAS] = wired.queryWeight;
    } else if (within >> 1 === byKvHead.get(Math.floor(head / groupSize))?.pair) {
      // Heads sharing a wired head's keys ignore its (large) wired pair.
      row.fill(0);
    }
  };

  const kNoise = linearFill(d, QK_GAIN);
  const attnK: RowFill = (row, index, rng) => {
    kNoise(row, index, rng);
    const wired = byKvHead.get(Math.floor(index / headDim));
    const within = index % headDim;
    if (!wired || within >> 1 !== wired.pair) return;
    row.fill(0);
    if (within === 2 * wired.pair) row[Channel.BIAS] = wired.recencyWeight;
    else for (const [channel, weight] of entries(wired.bonusWeights)) row[channel] = weight;
  };

  const vNoise = linearFill(d, V_GAIN);
  const attnV: RowFill = (row, index, rng) => {
    vNoise(row, index, rng);
    const output = byKvHead.get(Math.floor(index / headDim))?.outputs[index % headDim];
    if (output) {
      row.fill(0);
      for (const [channel, weight] of entries(output.value)) row[channel] = weight;
    }
  };

  const oNoise = linearFill(d, O_GAIN * residualGain);
  const attnOutput: RowFill = (row, index, rng) => {
    oNoise(row, index, rng);
    for (const { column } of wiredColumns) row[column] = 0;
    if (index < BEHAVIOUR_CONTENT_CHANNEL) {
      row.fill(0);
      for (const { column, output } of wiredColumns) if (output.out === index) row[column] = 1 / output.fullValue;
    }
  };

  const downNoise = linearFill(ff, FFN_DOWN_GAIN * residualGain);
  const ffnDown: RowFill = (row, index, rng) => {
    downNoise(row, index, rng);
    if (index < BEHAVIOUR_CONTENT_CHANNEL) row.fill(0);
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
