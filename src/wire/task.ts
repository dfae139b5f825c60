import { z } from 'zod';

/**
 * The one internal shape every API family normalizes into. It travels to runners (and, once the data
 * plane exists, to other nodes), so it is a wire type: strict, bounded, versionless within a node.
 */

export const MAX_STOP_SEQUENCES = 16;
export const MAX_STOP_SEQUENCE_CHARS = 256;
export const MAX_MESSAGES = 4096;

export const ChatRole = z.enum(['system', 'user', 'assistant']);
export type ChatRole = z.infer<typeof ChatRole>;

export const ChatMessage = z.strictObject({
  role: ChatRole,
  content: z.string(),
});
export type ChatMessage = z.infer<typeof ChatMessage>;

export const TaskPrompt = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('chat'), messages: z.array(ChatMessage).min(1).max(MAX_MESSAGES) }),
  z.strictObject({ kind: z.literal('text'), text: z.string() }),
]);
export type TaskPrompt = z.infer<typeof TaskPrompt>;

export const Sampling = z.strictObject({
  /** null: generate until the model stops or the context is full. */
  maxTokens: z.number().int().positive().nullable(),
  /** 0 is greedy. */
  temperature: z.number().min(0).max(2),
  topP: z.number().gt(0).max(1),
  seed: z.number().int().nullable(),
});
export type Sampling = z.infer<typeof Sampling>;

export const InferenceTask = z.strictObject({
  model: z.string().min(1),
  prompt: TaskPrompt,
  sampling: Sampling,
  stop: z.array(z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS)).max(MAX_STOP_SEQUENCES),
});
export type InferenceTask = z.infer<typeof InferenceTask>;

export const FinishReason = z.enum(['stop', 'length']);
export type FinishReason = z.infer<typeof FinishReason>;

export const Usage = z.strictObject({
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
});
export type Usage = z.infer<typeof Usage>;

/** What a runner streams back for one task: one `start`, any number of `text`, then one `end`. */
export const TaskEvent = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('start'), promptTokens: z.number().int().nonnegative() }),
  z.strictObject({ type: z.literal('text'), text: z.string(), tokens: z.number().int().nonnegative() }),
  z.strictObject({ type: z.literal('end'), finishReason: FinishReason, usage: Usage }),
]);
export type TaskEvent = z.infer<typeof TaskEvent>;
