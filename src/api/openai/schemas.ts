import { z } from 'zod';
import { MAX_MESSAGES, MAX_STOP_SEQUENCE_CHARS, MAX_STOP_SEQUENCES } from '../../wire/task.js';

/**
 * OpenAI request bodies as Shoal accepts them. Objects are strict: a parameter Shoal does not
 * implement is refused by name rather than silently ignored.
 */

const TextPart = z.strictObject({ type: z.literal('text'), text: z.string() });

const MessageContent = z.union([z.string(), z.array(TextPart).min(1)], {
  error: 'must be a string or an array of text parts',
});

export const ChatCompletionMessage = z.discriminatedUnion(
  'role',
  [
    z.strictObject({ role: z.literal('system'), content: MessageContent }),
    z.strictObject({ role: z.literal('developer'), content: MessageContent }),
    z.strictObject({ role: z.literal('user'), content: MessageContent }),
    z.strictObject({
      role: z.literal('assistant'),
      content: MessageContent.nullable(),
      refusal: z.string().nullable().optional(),
    }),
  ],
  { error: 'role must be one of system, developer, user, assistant' },
);
export type ChatCompletionMessage = z.infer<typeof ChatCompletionMessage>;

const Stop = z
  .union([
    z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS),
    z.array(z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS)).max(MAX_STOP_SEQUENCES),
  ])
  .nullable()
  .optional();

const SamplingFields = {
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  seed: z.number().int().nullable().optional(),
  stop: Stop,
  stream: z.boolean().nullable().optional(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  n: z.literal(1, { error: 'only n=1 is supported; send several requests for several choices' }).nullable().optional(),
  user: z.string().optional(),
};

const MaxTokens = z.number().int().positive().nullable().optional();

export const ChatCompletionRequest = z.strictObject({
  ...SamplingFields,
  messages: z.array(ChatCompletionMessage).min(1, 'must contain at least one message').max(MAX_MESSAGES),
  max_tokens: MaxTokens,
  max_completion_tokens: MaxTokens,
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

export const CompletionRequest = z.strictObject({
  ...SamplingFields,
  prompt: z.union([z.string(), z.array(z.string()).length(1, 'only one prompt per request is supported')], {
    error: 'must be a string',
  }),
  max_tokens: MaxTokens,
  echo: z.literal(false, { error: 'echo is not supported' }).optional(),
  suffix: z.null({ error: 'suffix is not supported' }).optional(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;
