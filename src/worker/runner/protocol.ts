import { z } from 'zod';
import { ERROR_CODES } from '../../common/errors.js';
import { RunnerTask, TaskEvent } from '../../wire/task.js';

/**
 * The typed protocol between a node and one runner child process, over Node's IPC channel. Every
 * message is parsed on receipt on both sides; a runner that sends garbage is treated as crashed.
 */

export const GpuChoice = z.union([z.literal('auto'), z.literal(false), z.enum(['cuda', 'vulkan', 'metal'])]);
export type GpuChoice = z.infer<typeof GpuChoice>;

export const MAX_SEQUENCES = 64;
export const MAX_THREADS = 1024;
/** llama.cpp contexts beyond this are not something a node should be asked for per request. */
export const MAX_CONTEXT_TOKENS = 1_048_576;

export const RunnerConfig = z.strictObject({
  modelPath: z.string().min(1),
  /** Tokens of context per sequence (each concurrent request gets one sequence). */
  contextSize: z.number().int().positive().max(MAX_CONTEXT_TOKENS),
  /** Concurrent requests served as separate sequences of one context, decoded in the same batch. */
  sequences: z.number().int().positive().max(MAX_SEQUENCES),
  threads: z.number().int().positive().max(MAX_THREADS),
  gpu: GpuChoice,
  /** K and V cache element type; absent means the library's f16. */
  kvCacheType: z.enum(['f32', 'f16', 'bf16', 'q8_0', 'q4_0']).optional(),
  /** Absent means auto (on where the model and backend support it). */
  flashAttention: z.enum(['auto', 'on', 'off']).optional(),
});
export type RunnerConfig = z.infer<typeof RunnerConfig>;

/** What the runner learned from the GGUF header, for listings such as Ollama's `/api/show`. */
export const ModelFacts = z.strictObject({
  architecture: z.string(),
  sizeBytes: z.number().int().nonnegative(),
  /** llama.cpp's file type name, e.g. `MOSTLY_Q8_0`. */
  fileType: z.string().nullable(),
  parameterCount: z.number().int().nonnegative().nullable(),
  hasChatTemplate: z.boolean(),
});
export type ModelFacts = z.infer<typeof ModelFacts>;

export const RequestId = z.string().min(1).max(64).brand<'RequestId'>();
export type RequestId = z.infer<typeof RequestId>;

export const ToRunner = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('load'), config: RunnerConfig }),
  z.strictObject({ type: z.literal('run'), id: RequestId, task: RunnerTask }),
  z.strictObject({ type: z.literal('cancel'), id: RequestId }),
  z.strictObject({ type: z.literal('shutdown') }),
]);
export type ToRunner = z.infer<typeof ToRunner>;

export const LogLevel = z.enum(['debug', 'info', 'warn', 'error']);

export const FromRunner = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('ready'),
    contextSize: z.number().int().positive(),
    sequences: z.number().int().positive(),
    trainContextSize: z.number().int().positive(),
    gpu: z.union([z.string(), z.literal(false)]),
    model: ModelFacts,
  }),
  /** The model could not be loaded; the runner exits right after. */
  z.strictObject({ type: z.literal('fatal'), message: z.string() }),
  z.strictObject({ type: z.literal('event'), id: RequestId, event: TaskEvent }),
  /** The request ended without an `end` event; its sequence is free again. */
  z.strictObject({ type: z.literal('failed'), id: RequestId, code: z.enum(ERROR_CODES), message: z.string(), param: z.string().nullable().optional() }),
  z.strictObject({ type: z.literal('log'), level: LogLevel, message: z.string() }),
]);
export type FromRunner = z.infer<typeof FromRunner>;
