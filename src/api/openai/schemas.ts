import { z } from 'zod';
import { AUDIO_FORMATS } from '../speech-port.js';
import { MAX_EMBEDDING_INPUTS, MAX_MESSAGES, MAX_STOP_SEQUENCE_CHARS, MAX_STOP_SEQUENCES, MAX_TOOLS, MAX_TOP_LOGPROBS } from '../../wire/task.js';

/**
 * OpenAI request bodies as Shoal accepts them. Objects are strict: a parameter Shoal does not
 * implement is refused by name rather than silently ignored.
 */

const TextPart = z.strictObject({ type: z.literal('text'), text: z.string() });

const MessageContent = z.union([z.string(), z.array(TextPart).min(1)], {
  error: 'must be a string or an array of text parts',
});

/** `detail` is accepted and ignored: the model's projector decides the resolution it reads. */
const ImageUrlPart = z.strictObject({
  type: z.literal('image_url'),
  image_url: z.strictObject({ url: z.string(), detail: z.enum(['auto', 'low', 'high']).optional() }),
});

const UserContentPart = z.discriminatedUnion('type', [TextPart, ImageUrlPart], {
  error: 'user content parts must be text or image_url (input_audio and file parts are not supported)',
});
export type UserContentPart = z.infer<typeof UserContentPart>;

/**
 * Only user messages carry images, as data URLs (src/api/images.ts). A string is one text part, so
 * a bad part's error names the part rather than the whole content.
 */
const UserContent = z.preprocess(
  (value) => (typeof value === 'string' ? [{ type: 'text', text: value }] : value),
  z.array(UserContentPart, { error: 'must be a string or an array of text and image_url parts' }).min(1),
);

const ToolCallPart = z.strictObject({
  id: z.string().min(1).max(128),
  type: z.literal('function'),
  function: z.strictObject({ name: z.string().min(1).max(128), arguments: z.string() }),
});

export const ChatCompletionMessage = z.discriminatedUnion(
  'role',
  [
    z.strictObject({ role: z.literal('system'), content: MessageContent }),
    z.strictObject({ role: z.literal('developer'), content: MessageContent }),
    z.strictObject({ role: z.literal('user'), content: UserContent }),
    z.strictObject({
      role: z.literal('assistant'),
      content: MessageContent.nullable().optional(),
      refusal: z.string().nullable().optional(),
      tool_calls: z.array(ToolCallPart).max(MAX_TOOLS).optional(),
      /** What OpenAI-compatible servers call a reply's reasoning; clients replay it. */
      reasoning_content: z.string().nullable().optional(),
    }),
    z.strictObject({ role: z.literal('tool'), content: MessageContent, tool_call_id: z.string().max(128) }),
  ],
  { error: 'role must be one of system, developer, user, assistant, tool' },
);
export type ChatCompletionMessage = z.infer<typeof ChatCompletionMessage>;

const Stop = z
  .union([
    z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS),
    z.array(z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS)).max(MAX_STOP_SEQUENCES),
  ])
  .nullable()
  .optional();

const Penalty = z.number().min(-2).max(2).nullable().optional();

const SamplingFields = {
  model: z.string().min(1),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  seed: z.number().int().nullable().optional(),
  stop: Stop,
  presence_penalty: Penalty,
  frequency_penalty: Penalty,
  stream: z.boolean().nullable().optional(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  n: z.literal(1, { error: 'only n=1 is supported; send several requests for several choices' }).nullable().optional(),
  user: z.string().optional(),
};

const MaxTokens = z.number().int().positive().nullable().optional();

const FunctionTool = z.strictObject({
  type: z.literal('function'),
  function: z.strictObject({
    name: z.string().min(1).max(128),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullable().optional(),
  }),
});

const ToolChoiceParam = z.union([
  z.enum(['none', 'auto', 'required']),
  z.strictObject({ type: z.literal('function'), function: z.strictObject({ name: z.string().min(1) }) }),
]);

const ResponseFormat = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('text') }),
  z.strictObject({ type: z.literal('json_object') }),
  z.strictObject({
    type: z.literal('json_schema'),
    json_schema: z.strictObject({
      name: z.string().min(1).max(64),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullable().optional(),
    }),
  }),
]);

export const ChatCompletionRequest = z.strictObject({
  ...SamplingFields,
  messages: z.array(ChatCompletionMessage).min(1, 'must contain at least one message').max(MAX_MESSAGES),
  max_tokens: MaxTokens,
  max_completion_tokens: MaxTokens,
  tools: z.array(FunctionTool).max(MAX_TOOLS).optional(),
  tool_choice: ToolChoiceParam.optional(),
  /** Accepted; a turn makes at most one call (docs/API.md). */
  parallel_tool_calls: z.boolean().optional(),
  response_format: ResponseFormat.optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).nullable().optional(),
});
export type ChatCompletionRequest = z.infer<typeof ChatCompletionRequest>;

export const CompletionRequest = z.strictObject({
  ...SamplingFields,
  prompt: z.union([z.string(), z.array(z.string()).length(1, 'only one prompt per request is supported')], {
    error: 'must be a string',
  }),
  max_tokens: MaxTokens,
  /** Legacy completions: how many alternatives per token to report (OpenAI allows up to 5). */
  logprobs: z.number().int().min(0).max(5).nullable().optional(),
  echo: z.literal(false, { error: 'echo is not supported' }).optional(),
  suffix: z.null({ error: 'suffix is not supported' }).optional(),
});
export type CompletionRequest = z.infer<typeof CompletionRequest>;

export const EmbeddingRequest = z.strictObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()).min(1).max(MAX_EMBEDDING_INPUTS)], {
    error: 'must be a string or an array of strings (token arrays are not supported)',
  }),
  encoding_format: z.enum(['float', 'base64']).optional(),
  user: z.string().optional(),
});
export type EmbeddingRequest = z.infer<typeof EmbeddingRequest>;

/** `POST /v1/audio/speech`. `instructions` is accepted and ignored: eSpeak NG takes no style prompt. */
export const SpeechRequestBody = z.strictObject({
  model: z.string().min(1),
  input: z.string().min(1, 'must not be empty: give the text to speak'),
  voice: z.string().min(1, 'must name a voice, such as alloy or en-us'),
  response_format: z.enum(AUDIO_FORMATS).optional(),
  speed: z.number().min(0.25, 'must be at least 0.25').max(4, 'must be at most 4').optional(),
  stream_format: z.enum(['audio', 'sse']).optional(),
  instructions: z.string().optional(),
});
export type SpeechRequestBody = z.infer<typeof SpeechRequestBody>;
