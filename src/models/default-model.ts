import { stat } from 'node:fs/promises';
import { basename, extname, isAbsolute } from 'node:path';
import { errorMessage, ShoalError } from '../common/errors.js';
import { ModelId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import { modelsDir } from '../common/paths.js';
import { BUILTIN_MODEL_IDS, resolveBuiltinModel } from './builtin-store.js';
import { GgufFactsError, readGgufFacts } from './cards/gguf-facts.js';

/** Resolves `--default-model` to an id and a file on disk, generating built-in models on first use. */
export async function resolveDefaultModel(spec: string, dataDir: string, log: Logger): Promise<{ id: ModelId; path: string }> {
  if (isAbsolute(spec) || spec.endsWith('.gguf')) {
    const id = ModelId.safeParse(basename(spec, extname(spec)));
    if (!id.success) throw new ShoalError('BAD_REQUEST', `cannot derive a model id from the file name of '${spec}'`);
    await checkModelFile(spec);
    return { id: id.data, path: spec };
  }
  const started = Date.now();
  const resolved = BUILTIN_MODEL_IDS.includes(spec) ? await resolveBuiltinModel(spec, modelsDir(dataDir)) : null;
  if (!resolved) {
    throw new ShoalError('MODEL_NOT_FOUND', `unknown default model '${spec}': built-in models are ${BUILTIN_MODEL_IDS.join(', ')}, or pass the path of a .gguf file`);
  }
  if (resolved.generated) log.debug({ modelId: spec, path: resolved.path, ms: Date.now() - started }, 'generated built-in model');
  return { id: resolved.id, path: resolved.path };
}

/**
 * A `--default-model` file that is missing or not a GGUF model fails the start with one line: the
 * runner would otherwise crash on it, be restarted and give up only after its fifth crash.
 */
async function checkModelFile(path: string): Promise<void> {
  const what = `--default-model ${path}`;
  const info = await stat(path).catch((error: unknown) => {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ShoalError('BAD_REQUEST', code === 'ENOENT' ? `${what}: no such file: pass the path of a .gguf model file or a built-in id (${BUILTIN_MODEL_IDS.join(', ')})` : `${what}: cannot read it (${code ?? errorMessage(error)})`, { cause: error });
  });
  if (!info.isFile()) throw new ShoalError('BAD_REQUEST', `${what}: not a file: pass the path of a .gguf model file`);
  try {
    await readGgufFacts(path);
  } catch (error) {
    const reason = error instanceof GgufFactsError ? error.message.replace(`${path}: `, '') : errorMessage(error);
    throw new ShoalError('BAD_REQUEST', `${what} is not a usable GGUF model (${reason}): pass a .gguf model file, such as one 'shoal models pull' downloads`, { cause: error });
  }
}
