import { z } from 'zod';
import { ShoalError } from '../../../common/errors.js';
import { JsonSchema, MAX_MESSAGES, MAX_TOOLS } from '../../../wire/task.js';
import { formatPath } from '../../../common/format-path.js';
import { parseBody } from '../../validation.js';

/**
 * `POST /v1/responses` bodies as Shoal accepts them. Objects are strict, so a parameter Shoal does not
 * implement is refused by name; a `type` Shoal does not implement (a built-in tool, a file part, an
 * item kind) is refused by name too, as an unsupported parameter rather than a generic schema error.
 */

/** OpenAI's limits on `metadata`: 16 pairs, 64-character keys, 512-character values. */
export const MAX_METADATA_PAIRS = 16;
export const MAX_METADATA_KEY_CHARS = 64;
export const MAX_METADATA_VALUE_CHARS = 512;
/** OpenAI's limit on a `json_schema` format name. */
export const MAX_FORMAT_NAME_CHARS = 64;

/** The message of the issue a discriminated union raises for a `type` none of its options has. */
function unsupportedType(what: string, hint: string) {
  return (issue: { input?: unknown }): string => {
    const type = (issue.input as { type?: unknown } | undefined)?.type;
    if (type === undefined) return `${what} needs a 'type'`;
    return `${what} '${String(type)}' is not supported: ${hint}`;
  };
}

const ItemStatus = z.enum(['in_progress', 'completed', 'incomplete']);

const InputText = z.strictObject({ type: z.literal('input_text'), text: z.string() });
/** Output text replayed from an earlier response; its annotations and logprobs describe that output, not the prompt. */
const OutputText = z.strictObject({
  type: z.literal('output_text'),
  text: z.string(),
  annotations: z.array(z.unknown()).optional(),
  logprobs: z.array(z.unknown()).optional(),
});

/**
 * An image for a vision model, as a data URL (src/api/images.ts); `detail` is accepted and ignored.
 * `file_id` parses so normalize can refuse it by name: Shoal has no Files API.
 */
const InputImage = z.strictObject({
  type: z.literal('input_image'),
  image_url: z.string().nullable().optional(),
  file_id: z.string().nullable().optional(),
  detail: z.enum(['auto', 'low', 'high']).optional(),
});
export type InputImage = z.infer<typeof InputImage>;

const ContentPart = z.discriminatedUnion('type', [InputText, OutputText, InputImage], {
  error: unsupportedType('content part type', 'Shoal reads input_text, output_text and input_image parts'),
});

/** A plain string is shorthand for one text part. */
function textParts<T extends z.ZodType>(parts: T) {
  return z.preprocess(
    (value) => (typeof value === 'string' ? [{ type: 'input_text', text: value }] : value),
    z.array(parts, { error: 'must be a string or an array of content parts' }),
  );
}

const MessageItem = z.strictObject({
  type: z.literal('message'),
  role: z.enum(['user', 'assistant', 'system', 'developer'], { error: 'role must be one of user, assistant, system, developer' }),
  content: textParts(ContentPart),
  /** Present when an earlier response's output is replayed as input. */
  id: z.string().optional(),
  status: ItemStatus.optional(),
});

const FunctionCallItem = z.strictObject({
  type: z.literal('function_call'),
  call_id: z.string().min(1).max(128),
  name: z.string().min(1).max(128),
  arguments: z.string(),
  id: z.string().optional(),
  status: ItemStatus.optional(),
});

const FunctionCallOutputItem = z.strictObject({
  type: z.literal('function_call_output'),
  call_id: z.string().min(1).max(128),
  output: textParts(z.discriminatedUnion('type', [InputText], { error: unsupportedType('function output part type', 'Shoal takes text tool results only (input_text)') })),
  id: z.string().nullable().optional(),
  status: ItemStatus.nullable().optional(),
});

const ReasoningItem = z.strictObject({
  type: z.literal('reasoning'),
  id: z.string(),
  summary: z.array(z.strictObject({ type: z.literal('summary_text'), text: z.string() })),
  content: z.array(z.strictObject({ type: z.literal('reasoning_text'), text: z.string() })).optional(),
  status: ItemStatus.optional(),
  encrypted_content: z.null({ error: 'encrypted reasoning is not supported: replay reasoning as content' }).optional(),
});

/** Messages may leave out `type` (OpenAI's "easy input message"). */
const InputItem = z.preprocess(
  (value) => (value !== null && typeof value === 'object' && !Array.isArray(value) && !('type' in value) ? { type: 'message', ...value } : value),
  z.discriminatedUnion('type', [MessageItem, FunctionCallItem, FunctionCallOutputItem, ReasoningItem], {
    error: unsupportedType('input item type', 'Shoal accepts message, function_call, function_call_output and reasoning items'),
  }),
);
export type InputItem = z.infer<typeof InputItem>;

const FunctionTool = z.strictObject({
  type: z.literal('function'),
  name: z.string().min(1).max(128).regex(/^[A-Za-z0-9_.-]+$/, 'tool names use letters, digits, _ . and -'),
  description: z.string().nullable().optional(),
  parameters: JsonSchema.nullable().optional(),
  /** Calls are always constrained to `parameters`; `strict: false` is accepted and enforced all the same. */
  strict: z.boolean().nullable().optional(),
});
export type FunctionTool = z.infer<typeof FunctionTool>;

const Tool = z.discriminatedUnion('type', [FunctionTool], {
  error: unsupportedType('tool type', "Shoal runs function tools only (type 'function'); built-in tools need OpenAI's servers"),
});

const ToolChoice = z.union([z.enum(['auto', 'none', 'required']), z.strictObject({ type: z.literal('function'), name: z.string().min(1).max(128) })], {
  error: "tool_choice must be 'auto', 'none', 'required' or {type: 'function', name}: Shoal runs function tools only",
});
export type ToolChoice = z.infer<typeof ToolChoice>;

const TextFormat = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('text') }),
    z.strictObject({ type: z.literal('json_object') }),
    z.strictObject({
      type: z.literal('json_schema'),
      name: z.string().min(1).max(MAX_FORMAT_NAME_CHARS).regex(/^[A-Za-z0-9_-]+$/, 'format names use letters, digits, _ and -'),
      schema: JsonSchema,
      /** Output is always constrained to `schema`; `strict: false` is accepted and enforced all the same. */
      strict: z.boolean().nullable().optional(),
    }),
  ],
  { error: unsupportedType('text.format type', 'use text, json_object or json_schema') },
);
export type TextFormat = z.infer<typeof TextFormat>;

const Metadata = z
  .record(z.string().max(MAX_METADATA_KEY_CHARS), z.string().max(MAX_METADATA_VALUE_CHARS))
  .refine((pairs) => Object.keys(pairs).length <= MAX_METADATA_PAIRS, `at most ${MAX_METADATA_PAIRS} key-value pairs`);

const ReasoningEffort = z.enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max']);

export const CreateResponseRequest = z.strictObject({
  model: z.string().min(1),
  /** A string is shorthand for one user message. */
  input: z.preprocess(
    (value) => (typeof value === 'string' ? [{ type: 'message', role: 'user', content: value }] : value),
    z.array(InputItem, { error: 'must be a string or an array of input items' }).min(1, 'must contain at least one item').max(MAX_MESSAGES),
  ),
  instructions: z.string().nullable().optional(),
  tools: z.array(Tool).max(MAX_TOOLS).optional(),
  tool_choice: ToolChoice.optional(),
  /** Accepted and echoed; the engine makes at most one call per turn either way. */
  parallel_tool_calls: z.boolean().nullable().optional(),
  max_output_tokens: z.number().int().positive().nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().gt(0).max(1).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  store: z.boolean().nullable().optional(),
  previous_response_id: z.string().min(1).nullable().optional(),
  text: z.strictObject({ format: TextFormat.optional() }).optional(),
  metadata: Metadata.nullable().optional(),
  /** Accepted and echoed; a model reasons as its chat template makes it, whatever the effort. */
  reasoning: z.strictObject({ effort: ReasoningEffort.nullable().optional() }).nullable().optional(),
  user: z.string().optional(),
  truncation: z
    .literal('disabled', { error: "truncation must be 'disabled': Shoal refuses an input longer than the context instead of dropping items" })
    .nullable()
    .optional(),
});
export type CreateResponseRequest = z.infer<typeof CreateResponseRequest>;

function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let value = body;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/**
 * Parses a create-response body like `parseBody`, except that a `type` Shoal does not implement is
 * an UNSUPPORTED_PARAMETER naming where it is (`tools[0].type`), as other unimplemented parameters are.
 */
export function parseCreateResponse(body: unknown): CreateResponseRequest {
  const result = CreateResponseRequest.safeParse(body);
  const issue = result.success ? undefined : result.error.issues[0];
  const noMatch = issue?.code === 'invalid_union' && issue.discriminator === 'type' && issue.errors.length === 0;
  if (issue && noMatch && typeof valueAt(body, issue.path) === 'string') {
    const param = formatPath(issue.path);
    throw new ShoalError('UNSUPPORTED_PARAMETER', `${issue.message} (see docs/API.md)`, { param });
  }
  return parseBody(CreateResponseRequest, body);
}
