import type { InferenceTask } from '../../src/wire/task.js';

type GenerateTask = Extract<InferenceTask, { kind: 'generate' }>;

/** A greedy generate task ("hi", 4 tokens, no tools, plain text); `over` replaces whole fields. */
export function generateTask(over: Partial<GenerateTask> = {}): GenerateTask {
  return {
    kind: 'generate',
    model: 'm',
    prompt: { kind: 'text', text: 'hi' },
    sampling: { maxTokens: 4, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 },
    stop: [],
    tools: [],
    toolChoice: { mode: 'auto' },
    format: { kind: 'text' },
    logprobs: null,
    ...over,
  };
}
