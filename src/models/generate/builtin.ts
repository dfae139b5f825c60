// Built-in generated models: small enough to create on demand in well under a second, so tests and
// first runs always have a real GGUF to load.

import { access, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { generateRandomModel, parseModelSpec, type GenerateOptions, type RandomModelSpec } from './random-model.js';
import { parseProjectorSpec, type ProjectorSpec } from './projector.js';
import { TINY_WHISPER_SPEC, type WhisperModelSpec } from './whisper-model.js';

export const TINY_MODEL_ID = 'shoal/tiny';
export const TINY_EOS_MODEL_ID = 'shoal/tiny-eos';
export const TINY_THINK_MODEL_ID = 'shoal/tiny-think';
export const TINY_TOOLS_MODEL_ID = 'shoal/tiny-tools';
export const TINY_VISION_MODEL_ID = 'shoal/tiny-vision';
export const TINY_WHISPER_MODEL_ID = 'shoal/tiny-whisper';

/** ~1 MB of f32: fast to generate and load, and f32 keeps CPU inference exact and quick. */
export const TINY_MODEL_SPEC: RandomModelSpec = parseModelSpec({
  name: TINY_MODEL_ID,
  seed: 1,
  vocabSize: 1024,
  embeddingLength: 64,
  blockCount: 2,
  headCount: 4,
  headCountKv: 2,
  feedForwardLength: 128,
  contextLength: 4096,
  ropeFreqBase: 10000,
  rmsEps: 1e-5,
  tensorType: 'f32',
  eosBias: 'suppressed',
});

/** The tiny model, but greedy chat replies end with <|im_end|> after a short answer. */
export const TINY_EOS_MODEL_SPEC: RandomModelSpec = { ...TINY_MODEL_SPEC, name: TINY_EOS_MODEL_ID, eosBias: 'natural' };

// The behaviour models wire more attention heads (see behaviours.ts), each with a kv head of its own:
// eight 8-wide heads leave most of them random, at the tiny model's size. With the RoPE base of Qwen
// models the slowest pair turns by only 0.1 radians over the context, so a head can find a <tools>
// tag however far back it is; the context is cut to what the recency heads measure correctly.
const BEHAVIOUR_SHAPE = { headCount: 8, headCountKv: 8, contextLength: 3072, ropeFreqBase: 1_000_000, eosBias: 'natural' } as const;

/**
 * A reasoning model: its template's generation prompt opens `<think>`, and a greedy reply is some
 * reasoning, `</think>` once, a short answer, then <|im_end|>.
 */
export const TINY_THINK_MODEL_SPEC: RandomModelSpec = parseModelSpec({
  ...TINY_MODEL_SPEC,
  ...BEHAVIOUR_SHAPE,
  name: TINY_THINK_MODEL_ID,
  behaviour: 'think',
});

/**
 * A tool-eager model: when the system prompt lists `<tools>` and the last turn is not a
 * `<tool_response>`, a greedy reply opens with `<tool_call>`; otherwise it answers like tiny-eos.
 */
export const TINY_TOOLS_MODEL_SPEC: RandomModelSpec = parseModelSpec({
  ...TINY_MODEL_SPEC,
  ...BEHAVIOUR_SHAPE,
  name: TINY_TOOLS_MODEL_ID,
  behaviour: 'tools',
});

/** The text half of the vision model: tiny-eos under its own name (and so its own file). */
export const TINY_VISION_MODEL_SPEC: RandomModelSpec = { ...TINY_EOS_MODEL_SPEC, name: TINY_VISION_MODEL_ID };

/**
 * Its projector (projector.ts): 32x32 images in 8x8 patches, 16 tokens an image, projected to the
 * text model's 64 channels; ~130 kB of f32.
 */
export const TINY_VISION_PROJECTOR_SPEC: ProjectorSpec = parseProjectorSpec({
  name: `${TINY_VISION_MODEL_ID} projector`,
  seed: 1,
  textEmbeddingLength: TINY_VISION_MODEL_SPEC.embeddingLength,
  imageSize: 32,
  patchSize: 8,
  embeddingLength: 32,
  blockCount: 2,
  headCount: 2,
  feedForwardLength: 64,
  projectorHiddenLength: 64,
  layerNormEps: 1e-6,
});

export const BUILTIN_MODEL_SPECS: Readonly<Record<string, RandomModelSpec>> = {
  [TINY_MODEL_ID]: TINY_MODEL_SPEC,
  [TINY_EOS_MODEL_ID]: TINY_EOS_MODEL_SPEC,
  [TINY_THINK_MODEL_ID]: TINY_THINK_MODEL_SPEC,
  [TINY_TOOLS_MODEL_ID]: TINY_TOOLS_MODEL_SPEC,
  [TINY_VISION_MODEL_ID]: TINY_VISION_MODEL_SPEC,
};

/** The generated speech-to-text models (whisper.cpp's ggml format, whisper-model.ts), by model id. */
export const BUILTIN_WHISPER_SPECS: Readonly<Record<string, WhisperModelSpec>> = {
  [TINY_WHISPER_MODEL_ID]: TINY_WHISPER_SPEC,
};

/** The generated models that come with a projector (their cards' `projector = { kind = "builtin" }`), by model id. */
export const BUILTIN_PROJECTOR_SPECS: Readonly<Record<string, ProjectorSpec>> = {
  [TINY_VISION_MODEL_ID]: TINY_VISION_PROJECTOR_SPEC,
};

/**
 * Returns `path`, generating the model there first if no file exists. Generation is atomic, so a
 * concurrent caller either sees no file or a complete one; two racing generators both write the same
 * bytes and the last rename wins.
 */
export async function ensureGeneratedModel(spec: RandomModelSpec, path: string, opts: GenerateOptions = {}): Promise<string> {
  try {
    await access(path);
    return path;
  } catch {
    await mkdir(dirname(path), { recursive: true });
    await generateRandomModel(spec, path, opts);
    return path;
  }
}
