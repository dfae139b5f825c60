import { z } from 'zod';
import {
  JsonSchema,
  MAX_EMBEDDING_INPUTS,
  MAX_MESSAGES,
  MAX_STOP_SEQUENCE_CHARS,
  MAX_STOP_SEQUENCES,
  MAX_TOOLS,
  MAX_TOP_LOGPROBS,
} from '../../wire/task.js';

/**
 * Ollama request bodies as Shoal accepts them. Objects are strict: an option or field Shoal does not
 * implement is refused by name rather than silently ignored. Fields Ollama clients commonly send
 * empty (`images: []`, `suffix: ""`) parse here and are refused by name in normalize only when
 * they carry something.
 */

const StopSequence = z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS);

/** The sampling options Shoal honours; every other Ollama option (top_k, repeat_penalty, ...) is refused by name. */
export const Options = z.strictObject({
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  /** -1 is Ollama's "random seed". */
  seed: z.number().int().optional(),
  /** Positive: a token limit; -1 (unlimited) and -2 (fill the context) both generate until the model stops or the context is full. */
  num_predict: z
    .number()
    .int()
    .refine((n) => n > 0 || n === -1 || n === -2, 'must be a positive token count, -1 (unlimited) or -2 (fill the context)')
    .optional(),
  stop: z.union([StopSequence, z.array(StopSequence).max(MAX_STOP_SEQUENCES)]).optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  /** Accepted when it fits the context the serving instance has; Shoal sizes contexts per node, not per request. */
  num_ctx: z.number().int().positive().optional(),
});
export type Options = z.infer<typeof Options>;

/** `"json"`, a JSON schema object, or empty for plain text. */
const Format = z
  .union([z.literal(''), z.literal('json'), JsonSchema], { error: 'must be "json" or a JSON schema object' })
  .nullable()
  .optional();

/** Longest `keep_alive` duration text accepted ("5m", "24h", ...). */
export const MAX_KEEP_ALIVE_CHARS = 64;

/** Accepted without effect: Shoal keeps placed models loaded for as long as they are placed. */
const KeepAlive = z.union([z.string().max(MAX_KEEP_ALIVE_CHARS), z.number()]).nullable().optional();

/** Levels (`"high"`, ...) parse so normalize can refuse them by name. */
const Think = z.union([z.boolean(), z.enum(['high', 'medium', 'low'])]).nullable().optional();

const LogprobFields = {
  logprobs: z.boolean().optional(),
  top_logprobs: z.number().int().min(0).max(MAX_TOP_LOGPROBS).optional(),
};

/** Images parse only so normalize can refuse non-empty ones by name with a text-only message. */
const Images = z.array(z.string()).nullable().optional();

const ToolName = z.string().min(1).max(128).regex(/^[A-Za-z0-9_.-]+$/, 'tool names use letters, digits, _ . and -');

export const OllamaToolCall = z.strictObject({
  id: z.string().min(1).max(128).optional(),
  type: z.literal('function').optional(),
  function: z.strictObject({
    index: z.number().int().nonnegative().optional(),
    name: ToolName,
    arguments: z.record(z.string(), z.unknown()),
  }),
});
export type OllamaToolCall = z.infer<typeof OllamaToolCall>;

export const OllamaMessage = z.discriminatedUnion(
  'role',
  [
    z.strictObject({ role: z.literal('system'), content: z.string().default(''), images: Images }),
    z.strictObject({ role: z.literal('user'), content: z.string().default(''), images: Images }),
    z.strictObject({
      role: z.literal('assistant'),
      content: z.string().default(''),
      thinking: z.string().optional(),
      tool_calls: z.array(OllamaToolCall).max(MAX_TOOLS).optional(),
      images: Images,
    }),
    z.strictObject({
      role: z.literal('tool'),
      content: z.string().default(''),
      tool_name: ToolName.optional(),
      tool_call_id: z.string().max(128).optional(),
      images: Images,
    }),
  ],
  { error: 'role must be one of system, user, assistant, tool' },
);
export type OllamaMessage = z.infer<typeof OllamaMessage>;

export const OllamaTool = z.strictObject({
  type: z.literal('function'),
  function: z.strictObject({
    name: ToolName,
    description: z.string().optional(),
    parameters: JsonSchema.optional(),
  }),
});
export type OllamaTool = z.infer<typeof OllamaTool>;

export const ChatRequest = z.strictObject({
  model: z.string().min(1),
  /** Absent or empty: Ollama's "load the model" request. */
  messages: z.array(OllamaMessage).max(MAX_MESSAGES).optional(),
  tools: z.array(OllamaTool).max(MAX_TOOLS).optional(),
  format: Format,
  options: Options.optional(),
  /** Ollama streams unless told not to. */
  stream: z.boolean().optional(),
  think: Think,
  keep_alive: KeepAlive,
  ...LogprobFields,
});
export type ChatRequest = z.infer<typeof ChatRequest>;

export const GenerateRequest = z.strictObject({
  model: z.string().min(1),
  /** Absent or empty: Ollama's "load the model" request. */
  prompt: z.string().optional(),
  system: z.string().optional(),
  /** true: the prompt goes to the model as is, without the chat template. */
  raw: z.boolean().optional(),
  format: Format,
  options: Options.optional(),
  stream: z.boolean().optional(),
  think: Think,
  keep_alive: KeepAlive,
  ...LogprobFields,
  images: Images,
  suffix: z.string().optional(),
  template: z.string().optional(),
  context: z.array(z.number()).optional(),
});
export type GenerateRequest = z.infer<typeof GenerateRequest>;

/** Embeddings ignore sampling, so only the context option applies. */
const EmbedOptions = z.strictObject({ num_ctx: z.number().int().positive().optional() });

export const EmbedRequest = z.strictObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.string()).max(MAX_EMBEDDING_INPUTS)], { error: 'must be a string or an array of strings' }),
  /** Ollama's default: cut inputs longer than the context instead of failing. */
  truncate: z.boolean().optional(),
  keep_alive: KeepAlive,
  options: EmbedOptions.optional(),
});
export type EmbedRequest = z.infer<typeof EmbedRequest>;

/** The legacy single-input endpoint, `/api/embeddings`. */
export const EmbeddingsRequest = z.strictObject({
  model: z.string().min(1),
  prompt: z.string(),
  keep_alive: KeepAlive,
  options: EmbedOptions.optional(),
});
export type EmbeddingsRequest = z.infer<typeof EmbeddingsRequest>;

/** `name` is the field older clients send. */
export const ShowRequest = z
  .strictObject({
    model: z.string().min(1).optional(),
    name: z.string().min(1).optional(),
    verbose: z.literal(false, { error: 'verbose model_info (tokenizer arrays) is not available from Shoal' }).optional(),
  })
  .refine((body) => body.model !== undefined || body.name !== undefined, { message: 'model is required', path: ['model'] });
export type ShowRequest = z.infer<typeof ShowRequest>;
