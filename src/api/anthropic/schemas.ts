import { z } from 'zod';
import { IMAGE_MEDIA_TYPES, MAX_MESSAGES, MAX_STOP_SEQUENCE_CHARS, MAX_STOP_SEQUENCES, MAX_TOOLS } from '../../wire/task.js';

/**
 * Anthropic Messages request bodies as Shoal accepts them. Objects are strict: a parameter Shoal
 * does not implement (`top_k`, `cache_control`, documents...) is refused by name, never ignored.
 */

/** Most content blocks in one message, system prompt or tool result. */
export const MAX_CONTENT_BLOCKS = 1024;
/** Longest tool name or tool call id: the limit the runner task puts on them. */
export const MAX_TOOL_ID_CHARS = 128;
/** Longest `metadata.user_id`, Anthropic's own limit. */
export const MAX_USER_ID_CHARS = 256;

export const TextBlockParam = z.strictObject({
  type: z.literal('text'),
  text: z.string(),
  // Clients replay response blocks as they got them; an empty citation list carries nothing.
  citations: z.null({ error: 'citations are not supported' }).optional(),
});
export type TextBlockParam = z.infer<typeof TextBlockParam>;

/** Anthropic lets content be a plain string; normalizing it here keeps one shape downstream and precise errors for blocks. */
function blocks<T extends z.ZodType>(block: T, expected: string, minBlocks = 0) {
  return z.preprocess(
    (value) => (typeof value === 'string' ? [{ type: 'text', text: value }] : value),
    z
      .array(block, { error: `must be a string or an array of ${expected}` })
      .min(minBlocks, 'must not be empty')
      .max(MAX_CONTENT_BLOCKS),
  );
}

const TextBlocks = blocks(TextBlockParam, 'text blocks');

const ToolUseBlockParam = z.strictObject({
  type: z.literal('tool_use'),
  id: z.string().min(1).max(MAX_TOOL_ID_CHARS),
  name: z.string().min(1).max(MAX_TOOL_ID_CHARS),
  input: z.record(z.string(), z.unknown(), { error: 'must be the JSON object of the call’s arguments' }),
});

const ToolResultBlockParam = z.strictObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string().min(1).max(MAX_TOOL_ID_CHARS),
  content: TextBlocks.optional(),
  is_error: z.boolean().optional(),
});

const ThinkingBlockParam = z.strictObject({
  type: z.literal('thinking'),
  thinking: z.string(),
  signature: z.string(),
});

/**
 * An image for a vision model. Only base64 sources are read (src/api/images.ts); `url` and `file`
 * sources parse so normalize can refuse them by name. `media_type` must name a format Shoal reads,
 * but the bytes decide the type the model is told.
 */
const ImageSource = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('base64'),
      media_type: z.enum(IMAGE_MEDIA_TYPES, { error: 'media_type must be image/jpeg, image/png, image/gif or image/webp' }),
      data: z.string(),
    }),
    z.strictObject({ type: z.literal('url'), url: z.string() }),
    z.strictObject({ type: z.literal('file'), file_id: z.string() }),
  ],
  { error: 'source.type must be base64 (url and file sources are refused)' },
);

export const ImageBlockParam = z.strictObject({ type: z.literal('image'), source: ImageSource });
export type ImageBlockParam = z.infer<typeof ImageBlockParam>;

const UserBlock = z.discriminatedUnion('type', [TextBlockParam, ImageBlockParam, ToolResultBlockParam], {
  error: 'user content blocks must be text, image or tool_result (documents and other block types are not supported)',
});
export type UserBlock = z.infer<typeof UserBlock>;

const AssistantBlock = z.discriminatedUnion('type', [TextBlockParam, ToolUseBlockParam, ThinkingBlockParam], {
  error: 'assistant content blocks must be text, tool_use or thinking (redacted_thinking and server tool blocks are not supported)',
});
export type AssistantBlock = z.infer<typeof AssistantBlock>;

export const MessageParam = z.discriminatedUnion(
  'role',
  [
    z.strictObject({ role: z.literal('user'), content: blocks(UserBlock, 'content blocks', 1) }),
    z.strictObject({ role: z.literal('assistant'), content: blocks(AssistantBlock, 'content blocks') }),
  ],
  { error: 'role must be user or assistant (system text goes in the top-level system parameter)' },
);
export type MessageParam = z.infer<typeof MessageParam>;

export const ToolParam = z.strictObject({
  type: z
    .literal('custom', { error: 'only custom tools (name, description, input_schema) are supported; server tools are not' })
    .nullable()
    .optional(),
  name: z.string().regex(/^[A-Za-z0-9_-]+$/, 'tool names use letters, digits, _ and -').max(MAX_TOOL_ID_CHARS),
  description: z.string().optional(),
  input_schema: z.looseObject({ type: z.literal('object', { error: "input_schema must be a JSON Schema with type 'object'" }) }),
});
export type ToolParam = z.infer<typeof ToolParam>;

export const ToolChoiceParam = z.discriminatedUnion(
  'type',
  [
    z.strictObject({
      type: z.literal('auto'),
      // Turning parallel calls off is only guaranteed where the engine makes exactly one call (any, tool).
      disable_parallel_tool_use: z
        .literal(false, { error: 'disable_parallel_tool_use is only supported with tool_choice any or tool, which make exactly one call' })
        .optional(),
    }),
    z.strictObject({ type: z.literal('any'), disable_parallel_tool_use: z.boolean().optional() }),
    z.strictObject({ type: z.literal('tool'), name: z.string().min(1).max(MAX_TOOL_ID_CHARS), disable_parallel_tool_use: z.boolean().optional() }),
    z.strictObject({ type: z.literal('none') }),
  ],
  { error: 'tool_choice.type must be auto, any, tool or none' },
);
export type ToolChoiceParam = z.infer<typeof ToolChoiceParam>;

const ThinkingParam = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('enabled'), budget_tokens: z.number().int().positive() }),
    z.strictObject({ type: z.literal('disabled') }),
  ],
  { error: 'thinking.type must be enabled or disabled' },
);

const PromptFields = {
  model: z.string().min(1),
  system: TextBlocks.optional(),
  messages: z.array(MessageParam).min(1, 'must contain at least one message').max(MAX_MESSAGES),
  tools: z.array(ToolParam).max(MAX_TOOLS).optional(),
};

export const MessagesRequest = z.strictObject({
  ...PromptFields,
  max_tokens: z.number({ error: 'required: the most tokens to generate, a positive integer' }).int().positive(),
  stop_sequences: z.array(z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS)).max(MAX_STOP_SEQUENCES).optional(),
  temperature: z.number().min(0).max(1).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  tool_choice: ToolChoiceParam.optional(),
  stream: z.boolean().optional(),
  metadata: z.strictObject({ user_id: z.string().max(MAX_USER_ID_CHARS).nullable().optional() }).optional(),
  thinking: ThinkingParam.optional(),
});
export type MessagesRequest = z.infer<typeof MessagesRequest>;

export const CountTokensRequest = z.strictObject(PromptFields);
export type CountTokensRequest = z.infer<typeof CountTokensRequest>;
