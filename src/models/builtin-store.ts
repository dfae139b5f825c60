import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ModelId } from '../common/ids.js';
import { BUILTIN_MODEL_SPECS, BUILTIN_PROJECTOR_SPECS, BUILTIN_WHISPER_SPECS, ensureGeneratedModel } from './generate/builtin.js';
import { ensureGeneratedWhisperModel } from './generate/whisper-model.js';
import { ensureGeneratedProjector } from './generate/projector.js';
import { GENERATOR_VERSION } from './generate/random-model.js';

/** The generated text models (the speech-to-text ones, BUILTIN_WHISPER_SPECS, are placed only, never a node's default). */
export const BUILTIN_MODEL_IDS = Object.keys(BUILTIN_MODEL_SPECS);

/**
 * The file of a built-in model, generated on first use. The name carries a hash of the spec and the
 * generator version, so a Shoal version that changes either never serves a stale file under the same id.
 */
export async function resolveBuiltinModel(
  id: string,
  modelsDir: string,
): Promise<{ id: ModelId; path: string; generated: boolean } | null> {
  const whisper = BUILTIN_WHISPER_SPECS[id];
  if (whisper) {
    // whisper.cpp's own ggml format, not a GGUF (generate/whisper-model.ts).
    const whisperHash = createHash('sha256').update(`${GENERATOR_VERSION}:${JSON.stringify(whisper)}`).digest('hex').slice(0, 12);
    const whisperPath = join(modelsDir, 'builtin', `${id.replaceAll('/', '--')}-${whisperHash}.bin`);
    const existed = existsSync(whisperPath);
    await ensureGeneratedWhisperModel(whisper, whisperPath);
    return { id: ModelId.parse(id), path: whisperPath, generated: !existed };
  }
  const spec = BUILTIN_MODEL_SPECS[id];
  if (!spec) return null;
  const specHash = createHash('sha256').update(`${GENERATOR_VERSION}:${JSON.stringify(spec)}`).digest('hex').slice(0, 12);
  const path = join(modelsDir, 'builtin', `${id.replaceAll('/', '--')}-${specHash}.gguf`);
  const existed = existsSync(path);
  await ensureGeneratedModel(spec, path);
  return { id: ModelId.parse(id), path, generated: !existed };
}

/**
 * The projector of a built-in vision model, generated beside its model file (`modelPath`, from
 * resolveBuiltinModel) on first use; null for a built-in model without one. Named by a hash of its
 * own spec, as the model is.
 */
export async function resolveBuiltinProjector(id: string, modelPath: string, signal?: AbortSignal): Promise<string | null> {
  const spec = BUILTIN_PROJECTOR_SPECS[id];
  if (!spec) return null;
  const specHash = createHash('sha256').update(`${GENERATOR_VERSION}:${JSON.stringify(spec)}`).digest('hex').slice(0, 12);
  const path = join(dirname(modelPath), `${id.replaceAll('/', '--')}-mmproj-${specHash}.gguf`);
  return ensureGeneratedProjector(spec, path, signal !== undefined ? { signal } : {});
}
