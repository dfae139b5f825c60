import { access } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ShoalError, errorMessage } from '../common/errors.js';
import { resolveBuiltinProjector } from '../models/builtin-store.js';
import type { ModelCard } from '../models/cards/card.js';

/**
 * The projector file a vision card's llama-server loads beside its model (`--mmproj`), on the node
 * that runs the part; undefined for a card without one. A built-in model's is generated next to its
 * model file; a file card's is where the card says; a hub or imported model's sits in the store
 * beside the model file (the same repo and revision). A projector that is not there fails the
 * launch with what to do: an instance without it would refuse every image its card promises.
 */
export async function projectorFor(card: Pick<ModelCard, 'id' | 'source' | 'projector'> | null, modelPath: string, signal: AbortSignal): Promise<string | undefined> {
  const projector = card?.projector;
  if (card === null || projector === undefined) return undefined;
  let path: string;
  switch (projector.kind) {
    case 'builtin': {
      const spec = card.source.kind === 'builtin' ? card.source.spec : card.id;
      const generated = await resolveBuiltinProjector(spec, modelPath, signal);
      if (generated === null) throw new ShoalError('MODEL_FAILED', `the generated model '${spec}' has no projector: remove projector from the card of ${card.id}`);
      return generated;
    }
    case 'file':
      path = projector.path;
      break;
    case 'huggingface':
    case 'local': {
      // The model file sits at <revision dir>/<source file>; the projector's path is relative to the same dir.
      const sourceFile = card.source.kind === 'huggingface' || card.source.kind === 'local' ? card.source.file : null;
      if (sourceFile === null) throw new ShoalError('MODEL_FAILED', `the projector of ${card.id} is a ${projector.kind} file but the model is not`);
      let root = modelPath;
      for (let i = 0; i < sourceFile.split('/').length; i++) root = dirname(root);
      path = join(root, ...projector.file.split('/'));
      break;
    }
  }
  try {
    await access(path);
  } catch (error) {
    throw new ShoalError(
      'MODEL_FAILED',
      `the projector of ${card.id} is not on this node (${path}: ${errorMessage(error)}): ${projector.kind === 'file' ? 'fix the projector path in its card' : 'this Shoal version does not download projectors yet; place the projector file there by hand'}`,
    );
  }
  return path;
}
