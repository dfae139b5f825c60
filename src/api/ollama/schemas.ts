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
 * Ollama request bodies as Shoal accepts them. Objects are strict: a field Ollama does not define is
 * refused by name rather than silently ignored. Fields Ollama clients commonly send empty
 * (`images: []`, `suffix: ""`) parse here and are refused by name in normalize only when they carry
 * something.
 */

const StopSequence = z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS);

/**
 * Ollama's options that Shoal honours: they become the task's sampling, stop strings and token
 * limit. `num_ctx` is accepted and has no effect: Shoal sizes contexts per node (--context-size),
 * and a prompt longer than the serving instance's context fails as it would without it.
 */
const HonouredOptions = {
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
  num_ctx: z.number().int().positive().optional(),
  /** 0 or less: off. */
  top_k: z.number().int().optional(),
  min_p: z.number().min(0).max(1).optional(),
  /** 1: off; 0 would divide by zero in llama.cpp, so it is refused. */
  repeat_penalty: z.number().gt(0).optional(),
  /** -1: the whole context; 0: none. */
  repeat_last_n: z.number().int().min(-1).optional(),
};

/**
 * Ollama's other documented options, accepted with no effect (docs/API.md lists them): samplers not
 * both engines have (typical_p and mirostat*: node-llama-cpp has neither; tfs_z: llama.cpp dropped
 * it), penalize_newline, num_keep, and load-time settings Shoal decides per node (batch, GPU,
 * threads, mmap, rope). Clients such as LangChain, Continue and Open WebUI send them with their
 * defaults; typos are still refused.
 */
export const IGNORED_OPTIONS = {
  typical_p: z.number().optional(),
  tfs_z: z.number().optional(),
  mirostat: z.number().int().optional(),
  mirostat_tau: z.number().optional(),
  mirostat_eta: z.number().optional(),
  penalize_newline: z.boolean().optional(),
  num_keep: z.number().int().optional(),
  num_batch: z.number().int().optional(),
  num_gpu: z.number().int().optional(),
  main_gpu: z.number().int().optional(),
  low_vram: z.boolean().optional(),
  f16_kv: z.boolean().optional(),
  logits_all: z.boolean().optional(),
  vocab_only: z.boolean().optional(),
  use_mmap: z.boolean().optional(),
  use_mlock: z.boolean().optional(),
  numa: z.boolean().optional(),
  num_thread: z.number().int().optional(),
  embedding_only: z.boolean().optional(),
  rope_frequency_base: z.number().optional(),
  rope_frequency_scale: z.number().optional(),
};

export const Options = z.strictObject({ ...HonouredOptions, ...IGNORED_OPTIONS });
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

/**
 * Base64 images (no data URL prefix, as Ollama's clients send them); normalize decodes them on user
 * messages and `/api/generate`, and refuses them by name on other roles. The body limit bounds the count here.
 */
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

/** Embeddings ignore sampling; clients send the same options object as for chat, so the same names parse. */
const EmbedOptions = Options;

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

/** Longest model name `/api/pull` and `/api/delete` accept (a hub repo with its quant). */
export const MAX_MODEL_NAME_CHARS = 300;

/** `name` is the field older clients (and the official JS client) send. */
const ModelName = {
  model: z.string().min(1).max(MAX_MODEL_NAME_CHARS).optional(),
  name: z.string().min(1).max(MAX_MODEL_NAME_CHARS).optional(),
};
const hasName = { message: 'model is required', path: ['model'] };

export const PullRequest = z
  .strictObject({
    ...ModelName,
    /** Accepted without effect: the node pulls from its own hub endpoint (SHOAL_HF_ENDPOINT), however the request says to. */
    insecure: z.boolean().optional(),
    stream: z.boolean().optional(),
  })
  .refine((body) => body.model !== undefined || body.name !== undefined, hasName);
export type PullRequest = z.infer<typeof PullRequest>;

export const DeleteRequest = z.strictObject(ModelName).refine((body) => body.model !== undefined || body.name !== undefined, hasName);
export type DeleteRequest = z.infer<typeof DeleteRequest>;
