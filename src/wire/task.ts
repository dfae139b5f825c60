import { z } from 'zod';

/**
 * The one internal shape every API family normalizes into. It travels to runners (and, once the data
 * plane exists, to other nodes), so it is a wire type: strict and bounded.
 */

export const MAX_STOP_SEQUENCES = 16;
export const MAX_STOP_SEQUENCE_CHARS = 256;
export const MAX_MESSAGES = 4096;
export const MAX_TOOLS = 128;
export const MAX_TOP_LOGPROBS = 20;
export const MAX_EMBEDDING_INPUTS = 2048;
/** Images in one task, over all its messages (issue #19: vision cards). */
export const MAX_TASK_IMAGES = 16;
/** Decoded bytes of one image. */
export const MAX_IMAGE_BYTES = 8 * 1024 * 1024;
/** Decoded bytes of all a task's images together: with the text they fit one `/shoal/infer/1` frame as base64. */
export const MAX_TASK_IMAGE_BYTES = 12 * 1024 * 1024;
/** Base64 characters of MAX_IMAGE_BYTES. */
export const MAX_IMAGE_BASE64_CHARS = Math.ceil(MAX_IMAGE_BYTES / 3) * 4;

/** Longest audio one transcription task carries (issue #19: speech to text). */
export const MAX_AUDIO_SECONDS = 900;
/** The sample rate of a transcription task's audio: what whisper reads. */
export const TRANSCRIBE_SAMPLE_RATE = 16_000;
/** Base64 characters of MAX_AUDIO_SECONDS of 16-bit mono at TRANSCRIBE_SAMPLE_RATE (28.8 MB, 38.4 MB as base64): one `/shoal/infer/1` frame. */
export const MAX_AUDIO_BASE64_CHARS = Math.ceil((MAX_AUDIO_SECONDS * TRANSCRIBE_SAMPLE_RATE * 2) / 3) * 4;
/** Characters of a transcription's `prompt` (whisper reads at most its last 224 tokens of it). */
export const MAX_TRANSCRIBE_PROMPT_CHARS = 4096;
/** Segments and words one transcript may carry (900 s of fast speech is under 4000 words). */
export const MAX_TRANSCRIPT_SEGMENTS = 8192;
export const MAX_TRANSCRIPT_WORDS = 32_768;

/** The image formats the API accepts, told apart by their leading bytes (never by what the client claims). */
export const IMAGE_MEDIA_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
export type ImageMediaType = (typeof IMAGE_MEDIA_TYPES)[number];

/**
 * One image for a vision model, base64 so it crosses JSON (runner IPC, llama-server) and msgpack
 * (the data plane) alike. The API has decoded and sniffed it: `mediaType` is what its bytes are.
 */
export const TaskImage = z.strictObject({
  mediaType: z.enum(IMAGE_MEDIA_TYPES),
  data: z.string().min(1).max(MAX_IMAGE_BASE64_CHARS).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'image data is standard base64'),
});
export type TaskImage = z.infer<typeof TaskImage>;

/** A JSON Schema object as the client sent it (validated for the subset Shoal can enforce in the runner). */
export const JsonSchema = z.record(z.string(), z.unknown());
export type JsonSchema = z.infer<typeof JsonSchema>;

export const ToolCall = z.strictObject({
  id: z.string().min(1).max(128),
  name: z.string().min(1).max(128),
  /** The arguments as JSON text, exactly as the model produced (or the client replayed) them. */
  arguments: z.string(),
});
export type ToolCall = z.infer<typeof ToolCall>;

export const ChatMessage = z.discriminatedUnion('role', [
  z.strictObject({ role: z.literal('system'), content: z.string() }),
  /** `images` go before the text, in order; only vision models accept a task with any. */
  z.strictObject({ role: z.literal('user'), content: z.string(), images: z.array(TaskImage).min(1).max(MAX_TASK_IMAGES).optional() }),
  z.strictObject({
    role: z.literal('assistant'),
    content: z.string(),
    /** Earlier reasoning of this turn, when a client replays it; templates may drop it. */
    reasoning: z.string().optional(),
    toolCalls: z.array(ToolCall).max(MAX_TOOLS).optional(),
  }),
  z.strictObject({ role: z.literal('tool'), toolCallId: z.string().max(128), name: z.string().max(128).optional(), content: z.string() }),
]);
export type ChatMessage = z.infer<typeof ChatMessage>;
export type ChatRole = ChatMessage['role'];

export const TaskPrompt = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('chat'), messages: z.array(ChatMessage).min(1).max(MAX_MESSAGES) }),
  /** `images` (Ollama `/api/generate`) go before the text. */
  z.strictObject({ kind: z.literal('text'), text: z.string(), images: z.array(TaskImage).min(1).max(MAX_TASK_IMAGES).optional() }),
]);
export type TaskPrompt = z.infer<typeof TaskPrompt>;

/** Every image of a prompt, in the order the model sees them. */
export function promptImages(prompt: TaskPrompt): TaskImage[] {
  if (prompt.kind === 'text') return prompt.images ?? [];
  return prompt.messages.flatMap((message) => (message.role === 'user' ? (message.images ?? []) : []));
}

export const Sampling = z.strictObject({
  /** null: generate until the model stops or the context is full. */
  maxTokens: z.number().int().positive().nullable(),
  /** 0 is greedy. */
  temperature: z.number().min(0).max(2),
  topP: z.number().gt(0).max(1),
  seed: z.number().int().nullable(),
  /** OpenAI semantics: subtracted once from the logit of every token already generated. */
  presencePenalty: z.number().min(-2).max(2),
  /** OpenAI semantics: subtracted per occurrence. */
  frequencyPenalty: z.number().min(-2).max(2),
  // llama.cpp's samplers, which only the Ollama API exposes; absent, each is off. Both engines apply them.
  /** Keep the k most likely tokens, ≥ 0; 0 (or absent) keeps all. */
  topK: z.number().int().min(0).optional(),
  /** Drop tokens below this fraction of the most likely one's probability, 0-1; 0 (or absent) keeps all. */
  minP: z.number().min(0).max(1).optional(),
  /** llama.cpp's repetition penalty, > 0: a recent token's logit is divided by it (multiplied when negative); 1 (or absent) is off. */
  repeatPenalty: z.number().gt(0).optional(),
  /** How many of the latest tokens the penalties look back over, ≥ -1: -1 the whole context, 0 none; absent, 64. */
  repeatLastN: z.number().int().min(-1).optional(),
});
export type Sampling = z.infer<typeof Sampling>;

export const ToolDefinition = z.strictObject({
  name: z.string().min(1).max(128).regex(/^[A-Za-z0-9_.-]+$/, 'tool names use letters, digits, _ . and -'),
  description: z.string().optional(),
  /** JSON Schema of the arguments object; the runner constrains generation to it. */
  parameters: JsonSchema,
});
export type ToolDefinition = z.infer<typeof ToolDefinition>;

export const ToolChoice = z.discriminatedUnion('mode', [
  /** The model decides; a call, once started, is grammar-constrained. */
  z.strictObject({ mode: z.literal('auto') }),
  z.strictObject({ mode: z.literal('none') }),
  /** The answer is exactly one call to one of the tools. */
  z.strictObject({ mode: z.literal('required') }),
  /** The answer is exactly one call to the named tool. */
  z.strictObject({ mode: z.literal('tool'), name: z.string().min(1).max(128) }),
]);
export type ToolChoice = z.infer<typeof ToolChoice>;

export const OutputFormat = z.discriminatedUnion('kind', [
  z.strictObject({ kind: z.literal('text') }),
  /** A JSON object (OpenAI `json_object`, Ollama `format: "json"`). */
  z.strictObject({ kind: z.literal('json') }),
  /** JSON that validates against the schema. */
  z.strictObject({ kind: z.literal('json_schema'), schema: JsonSchema }),
]);
export type OutputFormat = z.infer<typeof OutputFormat>;

export const InferenceTask = z.strictObject({
  kind: z.literal('generate'),
  model: z.string().min(1),
  prompt: TaskPrompt,
  sampling: Sampling,
  stop: z.array(z.string().min(1).max(MAX_STOP_SEQUENCE_CHARS)).max(MAX_STOP_SEQUENCES),
  tools: z.array(ToolDefinition).max(MAX_TOOLS),
  toolChoice: ToolChoice,
  format: OutputFormat,
  /** null: no log probabilities; otherwise the chosen token's and this many alternatives per token. */
  logprobs: z.strictObject({ top: z.number().int().min(0).max(MAX_TOP_LOGPROBS) }).nullable(),
});
export type InferenceTask = z.infer<typeof InferenceTask>;

export const EmbeddingTask = z.strictObject({
  kind: z.literal('embed'),
  model: z.string().min(1),
  inputs: z.array(z.string()).min(1).max(MAX_EMBEDDING_INPUTS),
  /** Cut inputs longer than the context instead of refusing them. */
  truncate: z.boolean(),
  /** Scale each vector to unit length (OpenAI, Ollama's /api/embed), so cosine similarity is a dot product. */
  normalize: z.boolean(),
});
export type EmbeddingTask = z.infer<typeof EmbeddingTask>;

/** Counts the prompt tokens a generate task would use, without generating (Anthropic count_tokens). */
export const CountTask = z.strictObject({
  kind: z.literal('count'),
  model: z.string().min(1),
  prompt: TaskPrompt,
  tools: z.array(ToolDefinition).max(MAX_TOOLS),
});
export type CountTask = z.infer<typeof CountTask>;

/**
 * Audio to text (OpenAI /v1/audio/transcriptions and /translations) for a speech-to-text model. The
 * API node has decoded and resampled the upload, so a bad file is refused before anything travels and
 * the serving node gets one format: 16-bit little-endian mono PCM at TRANSCRIBE_SAMPLE_RATE, base64.
 */
export const TranscribeTask = z.strictObject({
  kind: z.literal('transcribe'),
  model: z.string().min(1),
  audio: z.string().min(4).max(MAX_AUDIO_BASE64_CHARS).regex(/^[A-Za-z0-9+/]*={0,2}$/, 'audio is standard base64'),
  /** ISO-639-1 code; null: the model detects it. */
  language: z.string().min(2).max(16).nullable(),
  /** Text the model continues from (names, spelling, style); null: none. */
  prompt: z.string().max(MAX_TRANSCRIBE_PROMPT_CHARS).nullable(),
  /** Into English (/v1/audio/translations) rather than in the spoken language. */
  translate: z.boolean(),
  wordTimestamps: z.boolean(),
  temperature: z.number().min(0).max(1),
});
export type TranscribeTask = z.infer<typeof TranscribeTask>;

export const RunnerTask = z.discriminatedUnion('kind', [InferenceTask, EmbeddingTask, CountTask, TranscribeTask]);
export type RunnerTask = z.infer<typeof RunnerTask>;

export const FinishReason = z.enum(['stop', 'length', 'tool_calls']);
export type FinishReason = z.infer<typeof FinishReason>;

export const Usage = z.strictObject({
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  /** Prompt tokens not evaluated again because the engine's cache already held them; absent when none were or the engine does not say. */
  cachedPromptTokens: z.number().int().nonnegative().optional(),
});
export type Usage = z.infer<typeof Usage>;

export const TopLogprob = z.strictObject({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.number().int().min(0).max(255)),
});
export const TokenLogprob = z.strictObject({
  token: z.string(),
  logprob: z.number(),
  bytes: z.array(z.number().int().min(0).max(255)),
  top: z.array(TopLogprob),
});
export type TokenLogprob = z.infer<typeof TokenLogprob>;

/**
 * What a runner streams back for one task. Any task may first get `queued` reports. Generate: one `start`, then any of `text`, `reasoning`,
 * `tool_call`, `tool_call_delta`, then one `end`. Count: `start`, `end`. Embed: `start`, `embeddings`, `end`.
 * Transcribe: `start` (its `promptTokens` the audio's 20 ms frames, which whisper's encoder reads), `transcript`, `end` (no tokens counted).
 */
export const TaskEvent = z.discriminatedUnion('type', [
  /**
   * Only before `start`: the task waits for a free slot; `position` 1 is the next to be admitted.
   * Sent when it starts waiting and again each time it moves up.
   */
  z.strictObject({ type: z.literal('queued'), position: z.number().int().positive() }),
  z.strictObject({ type: z.literal('start'), promptTokens: z.number().int().nonnegative() }),
  /** Answer text. `logprobs` covers exactly the tokens whose text this is, when asked for. */
  z.strictObject({ type: z.literal('text'), text: z.string(), logprobs: z.array(TokenLogprob).optional() }),
  /** Thinking the model did before its answer (e.g. a `<think>` block), never part of the answer. */
  z.strictObject({ type: z.literal('reasoning'), text: z.string() }),
  /** A tool call begins; its arguments follow as `tool_call_delta`s. */
  z.strictObject({ type: z.literal('tool_call'), index: z.number().int().nonnegative(), id: z.string(), name: z.string() }),
  z.strictObject({ type: z.literal('tool_call_delta'), index: z.number().int().nonnegative(), arguments: z.string() }),
  z.strictObject({ type: z.literal('embeddings'), vectors: z.array(z.array(z.number())) }),
  z.strictObject({
    type: z.literal('transcript'),
    /** The language spoken (ISO-639-1), as asked or as the model detected it. */
    language: z.string().max(16),
    durationS: z.number().nonnegative(),
    text: z.string(),
    segments: z
      .array(
        z.strictObject({
          startS: z.number().nonnegative(),
          endS: z.number().nonnegative(),
          text: z.string(),
          words: z.array(z.strictObject({ word: z.string(), startS: z.number().nonnegative(), endS: z.number().nonnegative() })).max(MAX_TRANSCRIPT_WORDS).optional(),
        }),
      )
      .max(MAX_TRANSCRIPT_SEGMENTS),
  }),
  z.strictObject({
    type: z.literal('end'),
    finishReason: FinishReason,
    /** Which of the task's stop sequences ended the answer, when one did. */
    stopSequence: z.string().nullable(),
    usage: Usage,
  }),
]);
export type TaskEvent = z.infer<typeof TaskEvent>;
/** What a transcription produced: its `transcript` event without the tag. */
export type Transcript = Omit<Extract<TaskEvent, { type: 'transcript' }>, 'type'>;
