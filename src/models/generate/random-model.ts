// Deterministic random-weight llama models: the same spec always produces a byte-identical GGUF file,
// so tests and benchmarks can run real llama.cpp inference without downloading a model.

import { z } from 'zod';
import { Xoshiro128 } from './prng.js';
import { buildVocab, MIN_VOCAB_SIZE, SpecialToken, type Vocab } from './vocab.js';
import { tensorRecipes, type TensorRecipe } from './weights.js';
import { BEHAVIOUR_CONTENT_CHANNEL, BEHAVIOUR_HEADS, BEHAVIOUR_TAGS, behaviourTensorRecipes, behaviourContextLimit, THINK_CLOSE_TAG, THINK_OPEN_TAG } from './behaviours.js';
import { encodeInto, ggmlByteSize, GgmlType } from '../gguf/quantize.js';
import { gv, writeGguf, type GgufTensor, type GgufValue } from '../gguf/writer.js';

export class GgufSpecError extends Error {
  readonly code = 'GGUF_SPEC_INVALID';
  override name = 'GgufSpecError';
}

/**
 * Version of the generator's recipes, for names of cached files: bump when the bytes a spec produces
 * change (any spec, including the built-in ones).
 */
export const GENERATOR_VERSION = 1;

const QUANT_BLOCK = 32;

const positiveInt = z.number().int().positive();

export const RandomModelSpecSchema = z
  .strictObject({
    name: z.string().min(1).max(200),
    seed: z.number().int().min(0).max(0xffffffff),
    vocabSize: z.number().int().min(MIN_VOCAB_SIZE).max(1_000_000),
    // The first four residual channels are hand-wired (see weights.ts); 32 leaves room for content.
    embeddingLength: positiveInt.min(32),
    blockCount: positiveInt.max(1024),
    headCount: positiveInt,
    headCountKv: positiveInt,
    feedForwardLength: positiveInt,
    contextLength: positiveInt,
    ropeFreqBase: z.number().positive(),
    rmsEps: z.number().positive().max(1),
    tensorType: z.enum(['f32', 'f16', 'q8_0', 'q4_0']),
    eosBias: z.enum(['suppressed', 'natural']).optional(),
    // What greedy chat replies do beyond text then EOS (see behaviours.ts); absent means 'plain', and
    // is how plain specs are written so that their serialized form never changes.
    behaviour: z.enum(['plain', 'think', 'tools']).optional(),
    // Trailing blocks that write nothing to the residual stream (zero attention output and FFN down
    // projections): the model computes like a deeper one but predicts exactly what the model without
    // them predicts, which makes it a target whose draft (the same spec minus these blocks) is always
    // right. Absent means 0, so existing specs serialize as before.
    inertBlocks: z.number().int().min(1).max(1023).optional(),
  })
  .superRefine((spec, ctx) => {
    const issue = (path: string, message: string): void => {
      ctx.addIssue({ code: 'custom', path: [path], message });
    };
    if (spec.embeddingLength % spec.headCount !== 0) {
      issue('headCount', `embeddingLength ${spec.embeddingLength} is not divisible by headCount ${spec.headCount}`);
    } else if ((spec.embeddingLength / spec.headCount) % 2 !== 0) {
      issue('headCount', 'head dimension (embeddingLength / headCount) must be even for RoPE');
    }
    if (spec.headCount % spec.headCountKv !== 0) {
      issue('headCountKv', `headCount ${spec.headCount} is not divisible by headCountKv ${spec.headCountKv}`);
    }
    if (spec.tensorType === 'q8_0' || spec.tensorType === 'q4_0') {
      // Quantized rows are stored in blocks of 32; every matrix row is embeddingLength or feedForwardLength long.
      for (const key of ['embeddingLength', 'feedForwardLength'] as const) {
        if (spec[key] % QUANT_BLOCK !== 0) {
          issue(key, `${key} ${spec[key]} must be a multiple of ${QUANT_BLOCK} for ${spec.tensorType}`);
        }
      }
    }
    if (spec.inertBlocks !== undefined) {
      if (spec.inertBlocks >= spec.blockCount) issue('inertBlocks', `inertBlocks ${spec.inertBlocks} must leave at least one working block of ${spec.blockCount}`);
      if (spec.behaviour !== undefined && spec.behaviour !== 'plain') issue('inertBlocks', `inertBlocks works with plain models only, not behaviour '${spec.behaviour}'`);
    }
    if (spec.behaviour !== undefined && spec.behaviour !== 'plain') {
      const behaviour = spec.behaviour;
      if (spec.eosBias !== 'natural') issue('eosBias', `behaviour '${behaviour}' ends its replies: eosBias must be 'natural'`);
      const heads = BEHAVIOUR_HEADS[behaviour];
      if (spec.blockCount < heads.length) issue('blockCount', `behaviour '${behaviour}' needs at least ${heads.length} blocks`);
      const perLayer = Math.max(...heads);
      if (spec.headCountKv < perLayer) issue('headCountKv', `behaviour '${behaviour}' needs at least ${perLayer} kv heads`);
      if (spec.embeddingLength < 2 * BEHAVIOUR_CONTENT_CHANNEL) {
        issue('embeddingLength', `behaviour '${behaviour}' needs embeddingLength >= ${2 * BEHAVIOUR_CONTENT_CHANNEL}`);
      }
      if ((spec.embeddingLength / spec.headCount) % 2 === 0 && behaviourContextLimit(spec) < spec.contextLength) {
        const limit = behaviourContextLimit(spec);
        issue('contextLength', `behaviour '${behaviour}' measures distances correctly up to ${limit} tokens with this ropeFreqBase and head size`);
      }
      const minVocab = MIN_VOCAB_SIZE + BEHAVIOUR_TAGS[behaviour].length;
      if (spec.vocabSize < minVocab) issue('vocabSize', `behaviour '${behaviour}' needs vocabSize >= ${minVocab}`);
    }
  });

export type RandomModelSpec = z.infer<typeof RandomModelSpecSchema>;

/** Validates a spec, throwing GgufSpecError with every problem listed. */
export function parseModelSpec(input: unknown): RandomModelSpec {
  const result = RandomModelSpecSchema.safeParse(input);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || 'spec'}: ${i.message}`);
    throw new GgufSpecError(`invalid model spec: ${problems.join('; ')}`);
  }
  return result.data;
}

export function countParams(spec: RandomModelSpec): number {
  const d = spec.embeddingLength;
  const kv = (d / spec.headCount) * spec.headCountKv;
  const perBlock = 2 * d + 2 * d * d + 2 * d * kv + 3 * d * spec.feedForwardLength;
  return 2 * spec.vocabSize * d + d + spec.blockCount * perBlock;
}

const MAX_VOCAB = 32000;
const MIN_VOCAB = 512;
// Layers per model width of common small llamas (1024 wide, 12 deep); keeps the picked shape sane.
const WIDTH_PER_LAYER = 85;

/**
 * A spec with roughly `params` parameters: width, depth and vocab are scaled together like common
 * llama shapes (~200M gives 1024 wide, 11 layers, 32000 vocab, 2816 ff), all multiples of 32.
 */
export function modelSpecForParams(params: number, overrides: Partial<RandomModelSpec> = {}): RandomModelSpec {
  if (!Number.isFinite(params) || params <= 0) throw new GgufSpecError(`parameter count must be positive, got ${params}`);
  let best: { spec: RandomModelSpec; score: number } | undefined;
  // Widths step by 128 past 256 so head counts (64-wide heads) stay even and GQA can halve them.
  for (let d = 64; d <= 16384; d += d < 256 ? 64 : 128) {
    const headDim = d < 128 ? 16 : d < 256 ? 32 : 64;
    const headCount = d / headDim;
    const headCountKv = headCount % 2 === 0 ? headCount / 2 : headCount;
    // Keep the two embedding matrices to about a third of the model, as small llamas do.
    const vocabSize = Math.max(MIN_VOCAB, Math.min(MAX_VOCAB, Math.floor(params / (6 * d) / 32) * 32));
    const feedForwardLength = Math.ceil((d * 11) / 4 / QUANT_BLOCK) * QUANT_BLOCK;
    const spec: RandomModelSpec = {
      name: `shoal-random-${formatCount(params)}`,
      seed: 0,
      vocabSize,
      embeddingLength: d,
      blockCount: 1,
      headCount,
      headCountKv,
      feedForwardLength,
      contextLength: 4096,
      ropeFreqBase: 10000,
      rmsEps: 1e-5,
      tensorType: 'f16',
    };
    const perBlock = countParams({ ...spec, blockCount: 2 }) - countParams(spec);
    spec.blockCount = Math.max(1, Math.round((params - countParams(spec) + perBlock) / perBlock));
    const error = Math.abs(countParams(spec) - params) / params;
    const aspect = Math.max((spec.blockCount * WIDTH_PER_LAYER) / d, d / (spec.blockCount * WIDTH_PER_LAYER));
    // Hitting the count matters most; among shapes within 10% prefer the usual depth/width ratio.
    const score = error > 0.1 ? 1000 + error : aspect;
    if (!best || score < best.score) best = { spec, score };
  }
  return parseModelSpec({ ...(best as { spec: RandomModelSpec }).spec, ...overrides });
}

/** A target and its draft for speculative decoding: greedy outputs agree token for token. */
export interface SpeculativePair {
  target: RandomModelSpec;
  draft: RandomModelSpec;
}

/**
 * A deep target and a shallow draft of one shape: the target is the draft plus `inertBlocks` blocks
 * that write nothing, so the draft's every proposal is accepted while the target still pays for its
 * full depth. Same seed, vocab and tokenizer, so the two files share every working tensor's bytes.
 */
export function speculativePairSpecs(draft: RandomModelSpec, inertBlocks: number): SpeculativePair {
  const valid = parseModelSpec(draft);
  if (valid.inertBlocks !== undefined) throw new GgufSpecError('the draft spec of a speculative pair must have no inertBlocks of its own');
  const target = parseModelSpec({ ...valid, name: `${valid.name}-target`, blockCount: valid.blockCount + inertBlocks, inertBlocks });
  return { target, draft: valid };
}

export function formatCount(count: number): string {
  for (const [suffix, scale] of [['B', 1e9], ['M', 1e6], ['k', 1e3]] as const) {
    if (count >= scale) return `${Number((count / scale).toFixed(count >= 10 * scale ? 0 : 1))}${suffix}`;
  }
  return String(count);
}

const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * ChatML for a reasoning model: the generation prompt opens a think block, and an assistant message
 * with `reasoning_content` renders it in one, as Qwen3's template does. That rendering is what lets
 * node-llama-cpp's template reader see the think segment and that it opens at the reply's start.
 */
const CHATML_THINK_TEMPLATE =
  "{%- for message in messages -%}" +
  "{%- if message['role'] == 'assistant' and message['reasoning_content'] is defined and message['reasoning_content'] -%}" +
  `{{ '<|im_start|>assistant\\n${THINK_OPEN_TAG}\\n' + message['reasoning_content'] + '\\n${THINK_CLOSE_TAG}\\n\\n' + message['content'] + '<|im_end|>\\n' }}` +
  "{%- else -%}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}{%- endif -%}" +
  "{%- endfor -%}" +
  `{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n${THINK_OPEN_TAG}\\n' }}{%- endif -%}`;

const TENSOR_TYPES = { f32: GgmlType.F32, f16: GgmlType.F16, q8_0: GgmlType.Q8_0, q4_0: GgmlType.Q4_0 } as const;
// llama_ftype values for general.file_type.
const FILE_TYPES = { f32: 0, f16: 1, q4_0: 2, q8_0: 7 } as const;

function metadata(spec: RandomModelSpec, vocab: Vocab): Array<[string, GgufValue]> {
  const headDim = spec.embeddingLength / spec.headCount;
  return [
    ['general.architecture', gv.string('llama')],
    ['general.name', gv.string(spec.name)],
    ['general.alignment', gv.u32(32)],
    ['general.file_type', gv.u32(FILE_TYPES[spec.tensorType])],
    ['llama.context_length', gv.u32(spec.contextLength)],
    ['llama.embedding_length', gv.u32(spec.embeddingLength)],
    ['llama.block_count', gv.u32(spec.blockCount)],
    ['llama.feed_forward_length', gv.u32(spec.feedForwardLength)],
    ['llama.attention.head_count', gv.u32(spec.headCount)],
    ['llama.attention.head_count_kv', gv.u32(spec.headCountKv)],
    ['llama.rope.dimension_count', gv.u32(headDim)],
    ['llama.rope.freq_base', gv.f32(spec.ropeFreqBase)],
    ['llama.attention.layer_norm_rms_epsilon', gv.f32(spec.rmsEps)],
    ['llama.vocab_size', gv.u32(spec.vocabSize)],
    ['tokenizer.ggml.model', gv.string('llama')],
    ['tokenizer.ggml.tokens', gv.strings(vocab.tokens)],
    ['tokenizer.ggml.scores', gv.f32s(vocab.scores)],
    ['tokenizer.ggml.token_type', gv.i32s(vocab.types)],
    ['tokenizer.ggml.bos_token_id', gv.u32(SpecialToken.BOS)],
    ['tokenizer.ggml.eos_token_id', gv.u32(SpecialToken.IM_END)],
    ['tokenizer.ggml.unknown_token_id', gv.u32(SpecialToken.UNK)],
    ['tokenizer.ggml.padding_token_id', gv.u32(SpecialToken.UNK)],
    ['tokenizer.ggml.add_bos_token', gv.bool(true)],
    ['tokenizer.ggml.add_eos_token', gv.bool(false)],
    // llama.cpp would otherwise insert a space before every text fragment (after each special token
    // too), so "<|im_start|>user" would be read as "<|im_start|> user".
    ['tokenizer.ggml.add_space_prefix', gv.bool(false)],
    ['tokenizer.chat_template', gv.string(spec.behaviour === 'think' ? CHATML_THINK_TEMPLATE : CHATML_TEMPLATE)],
  ];
}

// Rows are generated and encoded this many elements at a time: big enough to amortize the write
// calls, small enough that generating a 400 MB model stays at a few MB of memory.
const CHUNK_ELEMENTS = 1 << 18;

function tensorFromRecipe(recipe: TensorRecipe, type: GgmlType, seed: number): GgufTensor {
  const [rowLength, rowCount = 1] = recipe.dims;
  return {
    name: recipe.name,
    dims: recipe.dims,
    type,
    *data() {
      const rng = new Xoshiro128(seed, recipe.name);
      const rowsPerChunk = Math.max(1, Math.floor(CHUNK_ELEMENTS / rowLength));
      const values = new Float32Array(rowsPerChunk * rowLength);
      const bytes = new Uint8Array(ggmlByteSize(type, values.length));
      for (let first = 0; first < rowCount; first += rowsPerChunk) {
        const rows = Math.min(rowsPerChunk, rowCount - first);
        for (let r = 0; r < rows; r++) {
          recipe.fill(values.subarray(r * rowLength, (r + 1) * rowLength), first + r, rng);
        }
        const length = encodeInto(type, values.subarray(0, rows * rowLength), bytes);
        yield bytes.subarray(0, length);
      }
    },
  };
}

export interface GenerateOptions {
  signal?: AbortSignal;
  onProgress?: (bytesWritten: number, totalBytes: number) => void;
}

/** Writes the model for `spec` to `outPath` atomically; returns the file size in bytes. */
export async function generateRandomModel(spec: RandomModelSpec, outPath: string, opts: GenerateOptions = {}): Promise<number> {
  const valid = parseModelSpec(spec);
  const behaviour = valid.behaviour ?? 'plain';
  const vocab = buildVocab(valid.vocabSize, behaviour === 'plain' ? [] : BEHAVIOUR_TAGS[behaviour]);
  const matrixType = TENSOR_TYPES[valid.tensorType];
  const shape = { ...valid, eosBias: valid.eosBias ?? 'suppressed', inertBlocks: valid.inertBlocks ?? 0 };
  const recipes = behaviour === 'plain' ? tensorRecipes(shape, vocab) : behaviourTensorRecipes(shape, behaviour, vocab);
  const tensors = recipes.map((recipe) =>
    tensorFromRecipe(recipe, recipe.isNorm ? GgmlType.F32 : matrixType, valid.seed),
  );
  return writeGguf(outPath, { metadata: metadata(valid, vocab), tensors }, opts);
}
