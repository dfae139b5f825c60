import { dirname, join } from 'node:path';
import { ShoalError } from '../common/errors.js';
import { resolveBuiltinProjector } from './builtin-store.js';
import type { ModelCard } from './cards/card.js';

/**
 * Where a vision card's projector file is on this node, beside its model file at `modelPath`;
 * undefined for a card without one. A built-in model's is generated next to its model file (so this
 * may write it); a file card's is where the card says; a hub or imported model's sits in the store
 * beside the model file (the same repo and revision). Whether the file is there is the caller's to
 * check: the launch refuses a missing one, the planner counts what it finds.
 */
export async function projectorPath(card: Pick<ModelCard, 'id' | 'source' | 'projector'>, modelPath: string, signal?: AbortSignal): Promise<string | undefined> {
  const projector = card.projector;
  if (projector === undefined) return undefined;
  switch (projector.kind) {
    case 'builtin': {
      const spec = card.source.kind === 'builtin' ? card.source.spec : card.id;
      const generated = await resolveBuiltinProjector(spec, modelPath, signal);
      if (generated === null) throw new ShoalError('MODEL_FAILED', `the generated model '${spec}' has no projector: remove projector from the card of ${card.id}`);
      return generated;
    }
    case 'file':
      return projector.path;
    case 'huggingface':
    case 'local': {
      // The model file sits at <revision dir>/<source file>; the projector's path is relative to the same dir.
      const sourceFile = card.source.kind === 'huggingface' || card.source.kind === 'local' ? card.source.file : null;
      if (sourceFile === null) throw new ShoalError('MODEL_FAILED', `the projector of ${card.id} is a ${projector.kind} file but the model is not`);
      let root = modelPath;
      for (let i = 0; i < sourceFile.split('/').length; i++) root = dirname(root);
      return join(root, ...projector.file.split('/'));
    }
  }
}
