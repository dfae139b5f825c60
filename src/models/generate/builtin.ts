// Built-in generated models: small enough to create on demand in well under a second, so tests and
// first runs always have a real GGUF to load.

import { access, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { generateRandomModel, parseModelSpec, type GenerateOptions, type RandomModelSpec } from './random-model.js';

export const TINY_MODEL_ID = 'shoal/tiny';
export const TINY_EOS_MODEL_ID = 'shoal/tiny-eos';

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

export const BUILTIN_MODEL_SPECS: Readonly<Record<string, RandomModelSpec>> = {
  [TINY_MODEL_ID]: TINY_MODEL_SPEC,
  [TINY_EOS_MODEL_ID]: TINY_EOS_MODEL_SPEC,
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
