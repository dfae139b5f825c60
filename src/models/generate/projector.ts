// Deterministic random-weight vision projectors (llama.cpp "mmproj" GGUFs): a tiny CLIP-style ViT and
// the LLaVA MLP projector (`clip.projector_type = "mlp"`), the simplest kind llama.cpp's clip loader
// (tools/mtmd/clip.cpp) accepts. Paired with a generated text model of the same embedding length,
// llama-server started with `--mmproj` serves images end to end without a download: the answers are
// random text, but every stage (decode, resize, patch embedding, the encoder, the projection into the
// text model's embedding space) really runs.
//
// What the loader needs, read from clip.cpp (load_hparams, load_tensors) and models/llava.cpp:
//   keys     clip.has_vision_encoder, clip.projector_type, clip.vision.{embedding_length,
//            feed_forward_length, block_count, projection_dim, attention.head_count,
//            attention.layer_norm_epsilon, image_size, patch_size, image_mean, image_std}
//   tensors  v.patch_embd.weight (a conv kernel), v.position_embd.weight, per block attn_{q,k,v,out},
//            ln1, ln2, ffn_up, ffn_down (weights and biases), mm.0 and mm.2 (the projector MLP; mm.2's
//            rows are the text model's embedding length, which mtmd checks against the text model).
// The llava graph runs blocks 0 .. block_count - 2 (it takes the second-to-last layer's output, as
// LLaVA does), so the last block is loaded but never computed.

import { access, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { z } from 'zod';
import { Xoshiro128 } from './prng.js';
import { BIAS_VALUE } from './weights.js';
import { encodeInto, ggmlByteSize, GgmlType } from '../gguf/quantize.js';
import { gv, writeGguf, type GgufTensor, type GgufValue } from '../gguf/writer.js';
import { GgufSpecError, type GenerateOptions } from './random-model.js';

const positiveInt = z.number().int().positive();

export const ProjectorSpecSchema = z
  .strictObject({
    name: z.string().min(1).max(200),
    seed: z.number().int().min(0).max(0xffffffff),
    /** The paired text model's embedding length: the projector's output width. */
    textEmbeddingLength: positiveInt.max(65536),
    /** Images are resized to this square (pixels) before the encoder; image_size / patch_size squared tokens per image. */
    imageSize: positiveInt.max(1024),
    patchSize: positiveInt.max(64),
    /** The ViT's width. */
    embeddingLength: positiveInt.max(4096),
    /** At least 2: the llava graph takes the second-to-last block's output. */
    blockCount: z.number().int().min(2).max(64),
    headCount: positiveInt,
    feedForwardLength: positiveInt.max(16384),
    /** Hidden width of the projector MLP (mm.0's rows). */
    projectorHiddenLength: positiveInt.max(65536),
    layerNormEps: z.number().positive().max(1),
  })
  .superRefine((spec, ctx) => {
    const issue = (path: string, message: string): void => {
      ctx.addIssue({ code: 'custom', path: [path], message });
    };
    if (spec.imageSize % spec.patchSize !== 0) issue('patchSize', `imageSize ${spec.imageSize} is not a multiple of patchSize ${spec.patchSize}`);
    if (spec.embeddingLength % spec.headCount !== 0) issue('headCount', `embeddingLength ${spec.embeddingLength} is not divisible by headCount ${spec.headCount}`);
    // clip.cpp swaps ffn_up and ffn_down of older llava files when ffn_down's rows are the model
    // width; equal widths would make that check misfire.
    if (spec.feedForwardLength === spec.embeddingLength) issue('feedForwardLength', 'feedForwardLength must differ from embeddingLength (clip.cpp reads equal widths as swapped up/down tensors)');
  });

export type ProjectorSpec = z.infer<typeof ProjectorSpecSchema>;

/** Validates a spec, throwing GgufSpecError with every problem listed. */
export function parseProjectorSpec(input: unknown): ProjectorSpec {
  const result = ProjectorSpecSchema.safeParse(input);
  if (!result.success) {
    const problems = result.error.issues.map((i) => `${i.path.join('.') || 'spec'}: ${i.message}`);
    throw new GgufSpecError(`invalid projector spec: ${problems.join('; ')}`);
  }
  return result.data;
}

/** Tokens one image becomes in the text model's context: one per patch (no class token, no separators). */
export function imageTokens(spec: ProjectorSpec): number {
  return (spec.imageSize / spec.patchSize) ** 2;
}

// The text model's first residual channels are hand-wired (weights.ts): channel 0 is a constant BIAS
// the output layer reads as a per-token logit offset (byte and control tokens pushed down). Image
// embeddings keep BIAS at its value and write nothing to the other wired channels, so a reply after
// an image still reads like the text model's replies.
const WIRED_CHANNELS = 4;
const BIAS_CHANNEL = 0;

type Fill = (values: Float32Array, rng: Xoshiro128) => void;

/** Uniform noise with standard deviation `std` (uniform on [-1, 1) has variance 1/3). */
const noise = (std: number): Fill => (values, rng) => {
  const scale = std * Math.sqrt(3);
  for (let i = 0; i < values.length; i++) values[i] = rng.nextSigned() * scale;
};
const constant = (value: number): Fill => (values) => values.fill(value);

interface Recipe {
  name: string;
  dims: number[];
  fill: Fill;
}

function recipes(spec: ProjectorSpec): Recipe[] {
  const d = spec.embeddingLength;
  const patches = imageTokens(spec);
  // Weights scaled by 1/sqrt(fan-in), so each stage keeps activations near unit size.
  const linear = (fanIn: number): Fill => noise(1 / Math.sqrt(fanIn));
  const out: Recipe[] = [
    // ggml conv2d kernel order: [width, height, input channels, output channels].
    { name: 'v.patch_embd.weight', dims: [spec.patchSize, spec.patchSize, 3, d], fill: linear(spec.patchSize * spec.patchSize * 3) },
    { name: 'v.patch_embd.bias', dims: [d], fill: constant(0) },
    { name: 'v.position_embd.weight', dims: [d, patches], fill: noise(0.5) },
  ];
  for (let il = 0; il < spec.blockCount; il++) {
    const blk = `v.blk.${il}`;
    out.push(
      { name: `${blk}.ln1.weight`, dims: [d], fill: constant(1) },
      { name: `${blk}.ln1.bias`, dims: [d], fill: constant(0) },
      { name: `${blk}.attn_q.weight`, dims: [d, d], fill: linear(d) },
      { name: `${blk}.attn_q.bias`, dims: [d], fill: constant(0) },
      { name: `${blk}.attn_k.weight`, dims: [d, d], fill: linear(d) },
      { name: `${blk}.attn_k.bias`, dims: [d], fill: constant(0) },
      { name: `${blk}.attn_v.weight`, dims: [d, d], fill: linear(d) },
      { name: `${blk}.attn_v.bias`, dims: [d], fill: constant(0) },
      { name: `${blk}.attn_out.weight`, dims: [d, d], fill: linear(d) },
      { name: `${blk}.attn_out.bias`, dims: [d], fill: constant(0) },
      { name: `${blk}.ln2.weight`, dims: [d], fill: constant(1) },
      { name: `${blk}.ln2.bias`, dims: [d], fill: constant(0) },
      { name: `${blk}.ffn_up.weight`, dims: [d, spec.feedForwardLength], fill: linear(d) },
      { name: `${blk}.ffn_up.bias`, dims: [spec.feedForwardLength], fill: constant(0) },
      { name: `${blk}.ffn_down.weight`, dims: [spec.feedForwardLength, d], fill: linear(spec.feedForwardLength) },
      { name: `${blk}.ffn_down.bias`, dims: [d], fill: constant(0) },
    );
  }
  const hidden = spec.projectorHiddenLength;
  const text = spec.textEmbeddingLength;
  out.push(
    { name: 'mm.0.weight', dims: [d, hidden], fill: linear(d) },
    { name: 'mm.0.bias', dims: [hidden], fill: constant(0) },
    {
      name: 'mm.2.weight',
      dims: [hidden, text],
      // Row r writes text channel r: the wired channels' rows stay zero.
      fill: (values, rng) => {
        noise(1 / Math.sqrt(hidden))(values, rng);
        values.fill(0, 0, Math.min(WIRED_CHANNELS, text) * hidden);
      },
    },
    {
      name: 'mm.2.bias',
      dims: [text],
      fill: (values) => {
        values.fill(0);
        values[BIAS_CHANNEL] = BIAS_VALUE;
      },
    },
  );
  return out;
}

// CLIP's normalization constants, as LLaVA's converter writes them.
const IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073];
const IMAGE_STD = [0.26862954, 0.26130258, 0.27577711];

function metadata(spec: ProjectorSpec): Array<[string, GgufValue]> {
  return [
    ['general.architecture', gv.string('clip')],
    ['general.name', gv.string(spec.name)],
    ['general.alignment', gv.u32(32)],
    ['general.file_type', gv.u32(0)],
    ['clip.has_vision_encoder', gv.bool(true)],
    ['clip.projector_type', gv.string('mlp')],
    ['clip.use_gelu', gv.bool(true)],
    ['clip.vision.image_size', gv.u32(spec.imageSize)],
    ['clip.vision.patch_size', gv.u32(spec.patchSize)],
    ['clip.vision.embedding_length', gv.u32(spec.embeddingLength)],
    ['clip.vision.feed_forward_length', gv.u32(spec.feedForwardLength)],
    ['clip.vision.block_count', gv.u32(spec.blockCount)],
    ['clip.vision.projection_dim', gv.u32(spec.textEmbeddingLength)],
    ['clip.vision.attention.head_count', gv.u32(spec.headCount)],
    ['clip.vision.attention.layer_norm_epsilon', gv.f32(spec.layerNormEps)],
    ['clip.vision.image_mean', gv.f32s(IMAGE_MEAN)],
    ['clip.vision.image_std', gv.f32s(IMAGE_STD)],
  ];
}

function tensorOf(recipe: Recipe, seed: number): GgufTensor {
  return {
    name: recipe.name,
    dims: recipe.dims,
    // f32 throughout: the file is ~100 kB, and f32 keeps CPU inference exact.
    type: GgmlType.F32,
    *data() {
      const values = new Float32Array(recipe.dims.reduce((a, b) => a * b, 1));
      recipe.fill(values, new Xoshiro128(seed, recipe.name));
      const bytes = new Uint8Array(ggmlByteSize(GgmlType.F32, values.length));
      yield bytes.subarray(0, encodeInto(GgmlType.F32, values, bytes));
    },
  };
}

/** Writes the projector for `spec` to `outPath` atomically; returns the file size in bytes. */
export async function generateProjector(spec: ProjectorSpec, outPath: string, opts: GenerateOptions = {}): Promise<number> {
  const valid = parseProjectorSpec(spec);
  const tensors = recipes(valid).map((recipe) => tensorOf(recipe, valid.seed));
  return writeGguf(outPath, { metadata: metadata(valid), tensors }, opts);
}

/** Returns `path`, generating the projector there first if no file exists (atomic, like ensureGeneratedModel). */
export async function ensureGeneratedProjector(spec: ProjectorSpec, path: string, opts: GenerateOptions = {}): Promise<string> {
  try {
    await access(path);
    return path;
  } catch {
    await mkdir(dirname(path), { recursive: true });
    await generateProjector(spec, path, opts);
    return path;
  }
}
