import type { InferenceTask, Sampling } from '../wire/task.js';

/** Fills the parts of a generate task an API family did not set with neutral defaults. */
export function generateTask(
  fields: Pick<InferenceTask, 'model' | 'prompt'> &
    Partial<Omit<InferenceTask, 'kind' | 'model' | 'prompt' | 'sampling'>> & { sampling?: Partial<Sampling> },
): InferenceTask {
  return {
    kind: 'generate',
    model: fields.model,
    prompt: fields.prompt,
    sampling: {
      maxTokens: fields.sampling?.maxTokens ?? null,
      temperature: fields.sampling?.temperature ?? 1,
      topP: fields.sampling?.topP ?? 1,
      seed: fields.sampling?.seed ?? null,
      presencePenalty: fields.sampling?.presencePenalty ?? 0,
      frequencyPenalty: fields.sampling?.frequencyPenalty ?? 0,
      // Off unless set: only the Ollama family exposes llama.cpp's own samplers.
      ...(fields.sampling?.topK !== undefined ? { topK: fields.sampling.topK } : {}),
      ...(fields.sampling?.minP !== undefined ? { minP: fields.sampling.minP } : {}),
      ...(fields.sampling?.repeatPenalty !== undefined ? { repeatPenalty: fields.sampling.repeatPenalty } : {}),
      ...(fields.sampling?.repeatLastN !== undefined ? { repeatLastN: fields.sampling.repeatLastN } : {}),
    },
    stop: fields.stop ?? [],
    tools: fields.tools ?? [],
    toolChoice: fields.toolChoice ?? { mode: 'auto' },
    format: fields.format ?? { kind: 'text' },
    logprobs: fields.logprobs ?? null,
  };
}
