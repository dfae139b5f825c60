import { errorMessage } from '../common/errors.js';
import type { ModelId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import type { ModelCard } from '../models/cards/card.js';
import type { DraftInput } from './engines/llama-server-args.js';

/**
 * The draft a llama-server part loads beside its model (the card's `runtime.speculative`), its file
 * found or downloaded on the node that runs the part, so the draft always sits with its target. A draft
 * that cannot be had (no card, a failed download) costs speed, not the model: the part serves without
 * one and the log says why. An abort (the part is being stopped) still ends the launch. A draft file
 * llama-server then refuses (another vocabulary) fails the part as a bad model file would: that is the
 * card's mistake, and the crash log names the draft.
 */
export async function draftFor(
  card: Pick<ModelCard, 'id' | 'runtime'> | null,
  modelPath: (modelId: ModelId, signal: AbortSignal) => Promise<string>,
  signal: AbortSignal,
  log: Pick<Logger, 'warn' | 'info'>,
): Promise<DraftInput | undefined> {
  const speculative = card?.runtime.speculative;
  if (speculative === undefined) return undefined;
  try {
    const path = await modelPath(speculative.draft, signal);
    log.info(`speculative decoding with the draft ${speculative.draft}`);
    return { modelPath: path, maxTokens: speculative.draft_max, minTokens: speculative.draft_min };
  } catch (error) {
    if (signal.aborted) throw error;
    log.warn(`${card!.id} serves without its draft ${speculative.draft}: ${errorMessage(error)} (add the draft's card with \`shoal models add\`)`);
    return undefined;
  }
}
