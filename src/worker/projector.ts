import { access } from 'node:fs/promises';
import { ShoalError, errorMessage } from '../common/errors.js';
import type { ModelCard } from '../models/cards/card.js';
import { projectorPath } from '../models/projector-file.js';

/** What to do when a card's projector file is missing, by where it comes from. */
function projectorFix(kind: 'builtin' | 'file' | 'huggingface' | 'local', id: string): string {
  if (kind === 'huggingface') return `fetch it with the model: shoal models pull ${id}`;
  if (kind === 'local') return 'import it with the model: shoal models add <model.gguf> --projector <mmproj.gguf>';
  return 'fix the projector path in its card';
}

/**
 * The projector file a vision card's llama-server loads beside its model (`--mmproj`), on the node
 * that runs the part (src/models/projector-file.ts says where); undefined for a card without one. A
 * projector that is not there fails the launch with what to do: an instance without it would refuse
 * every image its card promises.
 */
export async function projectorFor(card: Pick<ModelCard, 'id' | 'source' | 'projector'> | null, modelPath: string, signal: AbortSignal): Promise<string | undefined> {
  if (card === null || card.projector === undefined) return undefined;
  const path = await projectorPath(card, modelPath, signal);
  if (path === undefined || card.projector.kind === 'builtin') return path;
  try {
    await access(path);
  } catch (error) {
    throw new ShoalError('MODEL_FAILED', `the projector of ${card.id} is not on this node (${path}: ${errorMessage(error)}): ${projectorFix(card.projector.kind, card.id)}`);
  }
  return path;
}
