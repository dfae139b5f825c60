// The OpenAI realtime API's GA dialect as `WS /v1/realtime` speaks it (docs/API.md, Realtime): the
// client events accepted and the server events sent, one zod schema per wire type. Fields Shoal takes
// but does not act on are listed in docs/API.md; anything else is refused by the strict objects.

import { z } from 'zod';
import { MAX_TRANSCRIBE_PROMPT_CHARS } from '../../../wire/task.js';

/** The rate OpenAI's `audio/pcm` means when none is given, and the only rate the output has. */
export const REALTIME_PCM_RATE_HZ = 24_000;
/** Input rates a session may name: what the resampler handles without an oversized filter table. */
export const MIN_INPUT_RATE_HZ = 8_000;
export const MAX_INPUT_RATE_HZ = 48_000;
/** `instructions`, in characters: a system prompt, not a document. */
export const MAX_INSTRUCTIONS_CHARS = 32_768;
/** Characters of one text item a client creates. */
export const MAX_ITEM_TEXT_CHARS = 32_768;
/** Tokens of one reply at most, and when the session does not say (`max_output_tokens: "inf"` included). */
export const MAX_RESPONSE_TOKENS = 4096;
export const DEFAULT_RESPONSE_TOKENS = 1024;

const EventId = z.string().min(1).max(128).optional();
const ItemId = z.string().min(1).max(128);

const InputFormat = z.strictObject({
  type: z.enum(['audio/pcm'], { error: 'only audio/pcm (16-bit little-endian mono PCM) is supported: audio/pcmu and audio/pcma are not' }).optional(),
  rate: z.number().int().min(MIN_INPUT_RATE_HZ).max(MAX_INPUT_RATE_HZ).optional(),
});
const OutputFormat = z.strictObject({
  type: z.enum(['audio/pcm'], { error: 'only audio/pcm (16-bit little-endian mono PCM) is supported: audio/pcmu and audio/pcma are not' }).optional(),
  rate: z.literal(REALTIME_PCM_RATE_HZ, { error: `the output is ${REALTIME_PCM_RATE_HZ} Hz` }).optional(),
});
const Transcription = z.strictObject({
  model: z.string().min(1).max(200).optional(),
  language: z
    .string()
    .regex(/^[a-z]{2,3}$/, 'an ISO-639-1 language code, such as en or de')
    .optional(),
  prompt: z.string().max(MAX_TRANSCRIBE_PROMPT_CHARS).optional(),
  /** Accepted, no effect: a turn is transcribed whole once it is committed. */
  delay: z.enum(['minimal', 'low', 'medium', 'high', 'xhigh']).optional(),
});
const ServerVad = z.strictObject({
  type: z.enum(['server_vad'], { error: "turn_detection.type must be 'server_vad' (semantic_vad is not supported), or turn_detection null for manual commits" }),
  threshold: z.number().min(0).max(1).optional(),
  prefix_padding_ms: z.number().int().min(0).max(5000).optional(),
  silence_duration_ms: z.number().int().min(20).max(10_000).optional(),
  create_response: z.boolean().optional(),
  interrupt_response: z.boolean().optional(),
  /** Accepted, no effect. */
  idle_timeout_ms: z.number().int().min(0).nullable().optional(),
});
/** Accepted, no effect: no noise reduction runs. */
const NoiseReduction = z.strictObject({ type: z.enum(['near_field', 'far_field']) }).nullable();
const AudioInput = z.strictObject({
  format: InputFormat.optional(),
  transcription: Transcription.nullable().optional(),
  turn_detection: ServerVad.nullable().optional(),
  noise_reduction: NoiseReduction.optional(),
});
const Modalities = z.array(z.enum(['text', 'audio'])).length(1, 'output_modalities is ["audio"] or ["text"]');
const MaxTokens = z.union([z.number().int().min(1).max(MAX_RESPONSE_TOKENS), z.literal('inf')]);

const RealtimeSessionConfig = z.strictObject({
  type: z.literal('realtime'),
  model: z.string().min(1).max(200).optional(),
  instructions: z.string().max(MAX_INSTRUCTIONS_CHARS).optional(),
  output_modalities: Modalities.optional(),
  max_output_tokens: MaxTokens.optional(),
  audio: z
    .strictObject({
      input: AudioInput.optional(),
      output: z.strictObject({ format: OutputFormat.optional(), voice: z.string().min(1).max(64).optional(), speed: z.number().min(0.25).max(4).optional() }).optional(),
    })
    .optional(),
  tools: z.array(z.unknown()).max(0, 'tool calls are not supported in realtime sessions: leave tools empty').optional(),
  // Accepted, no effect (docs/API.md).
  tool_choice: z.unknown().optional(),
  parallel_tool_calls: z.boolean().optional(),
  tracing: z.unknown().optional(),
  include: z.array(z.string().max(64)).max(8).optional(),
  truncation: z.unknown().optional(),
  prompt: z.unknown().optional(),
  reasoning: z.unknown().optional(),
});
const TranscriptionSessionConfig = z.strictObject({
  type: z.literal('transcription'),
  audio: z.strictObject({ input: AudioInput.optional() }).optional(),
  include: z.array(z.string().max(64)).max(8).optional(),
});
export const SessionConfig = z.discriminatedUnion('type', [RealtimeSessionConfig, TranscriptionSessionConfig], {
  error: "session.type is 'realtime' (a voice loop) or 'transcription'",
});
export type SessionConfig = z.infer<typeof SessionConfig>;

const TextContent = z.strictObject({ type: z.enum(['input_text', 'text', 'output_text']), text: z.string().max(MAX_ITEM_TEXT_CHARS) });
const MessageItem = z.strictObject({
  type: z.literal('message'),
  role: z.enum(['user', 'assistant', 'system']),
  content: z.array(TextContent, { error: 'item content is text parts ({type: "input_text", text}); audio and images are not supported in created items' }).min(1).max(16),
  id: ItemId.optional(),
  object: z.literal('realtime.item').optional(),
  status: z.enum(['completed', 'incomplete', 'in_progress']).optional(),
});

const ResponseParams = z.strictObject({
  instructions: z.string().max(MAX_INSTRUCTIONS_CHARS).optional(),
  output_modalities: Modalities.optional(),
  max_output_tokens: MaxTokens.optional(),
  audio: z.strictObject({ output: z.strictObject({ format: OutputFormat.optional(), voice: z.string().min(1).max(64).optional() }).optional() }).optional(),
  conversation: z.enum(['auto'], { error: "conversation 'auto' only: out-of-band responses are not supported" }).optional(),
  /** Accepted, echoed in the response. */
  metadata: z.record(z.string().max(64), z.string().max(512)).nullable().optional(),
});

export const ClientEvent = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('session.update'), event_id: EventId, session: SessionConfig }),
  z.strictObject({ type: z.literal('input_audio_buffer.append'), event_id: EventId, audio: z.string() }),
  z.strictObject({ type: z.literal('input_audio_buffer.commit'), event_id: EventId }),
  z.strictObject({ type: z.literal('input_audio_buffer.clear'), event_id: EventId }),
  z.strictObject({ type: z.literal('conversation.item.create'), event_id: EventId, previous_item_id: z.string().max(128).nullable().optional(), item: MessageItem }),
  z.strictObject({ type: z.literal('response.create'), event_id: EventId, response: ResponseParams.optional() }),
  z.strictObject({ type: z.literal('response.cancel'), event_id: EventId, response_id: z.string().max(128).optional() }),
]);
export type ClientEvent = z.infer<typeof ClientEvent>;
export const CLIENT_EVENT_TYPES = ClientEvent.options.map((option) => option.shape.type.value);

// Server events. `event_id` is set by the shell when the event goes out.

export const RealtimeError = z.strictObject({
  type: z.string(),
  code: z.string().nullable(),
  message: z.string(),
  param: z.string().nullable(),
  event_id: z.string().nullable(),
});
export type RealtimeError = z.infer<typeof RealtimeError>;

const ContentPart = z.strictObject({
  type: z.enum(['input_text', 'input_audio', 'output_text', 'output_audio', 'text', 'audio']),
  text: z.string().optional(),
  transcript: z.string().nullable().optional(),
});
export const ConversationItem = z.strictObject({
  id: ItemId,
  object: z.literal('realtime.item'),
  type: z.literal('message'),
  role: z.enum(['user', 'assistant', 'system']),
  status: z.enum(['completed', 'incomplete', 'in_progress']),
  content: z.array(ContentPart),
});
export type ConversationItem = z.infer<typeof ConversationItem>;

const Usage = z.strictObject({
  total_tokens: z.number().int(),
  input_tokens: z.number().int(),
  output_tokens: z.number().int(),
});
export const RealtimeResponse = z.strictObject({
  id: z.string(),
  object: z.literal('realtime.response'),
  conversation_id: z.string(),
  status: z.enum(['in_progress', 'completed', 'cancelled', 'incomplete', 'failed']),
  status_details: z
    .strictObject({
      type: z.enum(['completed', 'cancelled', 'incomplete', 'failed']),
      reason: z.enum(['turn_detected', 'client_cancelled', 'max_output_tokens']).optional(),
      error: z.strictObject({ type: z.string(), code: z.string().nullable() }).optional(),
    })
    .nullable(),
  output: z.array(ConversationItem),
  output_modalities: z.array(z.enum(['text', 'audio'])),
  max_output_tokens: z.union([z.number().int(), z.literal('inf')]),
  audio: z.strictObject({ output: z.strictObject({ format: z.strictObject({ type: z.literal('audio/pcm'), rate: z.number().int() }), voice: z.string() }) }),
  metadata: z.record(z.string(), z.string()).nullable(),
  usage: Usage.nullable(),
});
export type RealtimeResponse = z.infer<typeof RealtimeResponse>;

const TurnDetectionOut = z.strictObject({
  type: z.literal('server_vad'),
  threshold: z.number(),
  prefix_padding_ms: z.number().int(),
  silence_duration_ms: z.number().int(),
  create_response: z.boolean(),
  interrupt_response: z.boolean(),
  idle_timeout_ms: z.null(),
});
const InputAudioOut = z.strictObject({
  format: z.strictObject({ type: z.literal('audio/pcm'), rate: z.number().int() }),
  transcription: z.strictObject({ model: z.string().nullable(), language: z.string().nullable(), prompt: z.string() }),
  turn_detection: TurnDetectionOut.nullable(),
  noise_reduction: z.null(),
});
export const SessionObject = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('realtime'),
    object: z.literal('realtime.session'),
    id: z.string(),
    model: z.string(),
    output_modalities: z.array(z.enum(['text', 'audio'])),
    instructions: z.string(),
    max_output_tokens: z.union([z.number().int(), z.literal('inf')]),
    tools: z.array(z.never()),
    tool_choice: z.literal('auto'),
    audio: z.strictObject({
      input: InputAudioOut,
      output: z.strictObject({ format: z.strictObject({ type: z.literal('audio/pcm'), rate: z.number().int() }), voice: z.string(), speed: z.number() }),
    }),
  }),
  z.strictObject({
    type: z.literal('transcription'),
    object: z.literal('realtime.transcription_session'),
    id: z.string(),
    audio: z.strictObject({ input: InputAudioOut }),
  }),
]);
export type SessionObject = z.infer<typeof SessionObject>;

const InResponse = { response_id: z.string(), item_id: z.string(), output_index: z.number().int(), content_index: z.number().int() };
const Part = z.strictObject({ type: z.enum(['text', 'audio']), text: z.string().optional(), transcript: z.string().optional() });

export const ServerEvent = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('error'), error: RealtimeError }),
  z.strictObject({ type: z.literal('session.created'), session: SessionObject }),
  z.strictObject({ type: z.literal('session.updated'), session: SessionObject }),
  z.strictObject({ type: z.literal('input_audio_buffer.speech_started'), audio_start_ms: z.number().int(), item_id: z.string() }),
  z.strictObject({ type: z.literal('input_audio_buffer.speech_stopped'), audio_end_ms: z.number().int(), item_id: z.string() }),
  z.strictObject({ type: z.literal('input_audio_buffer.committed'), item_id: z.string(), previous_item_id: z.string().nullable() }),
  z.strictObject({ type: z.literal('input_audio_buffer.cleared') }),
  z.strictObject({ type: z.literal('conversation.item.added'), item: ConversationItem, previous_item_id: z.string().nullable() }),
  z.strictObject({ type: z.literal('conversation.item.done'), item: ConversationItem, previous_item_id: z.string().nullable() }),
  z.strictObject({
    type: z.literal('conversation.item.input_audio_transcription.completed'),
    item_id: z.string(),
    content_index: z.number().int(),
    transcript: z.string(),
    usage: z.strictObject({ type: z.literal('duration'), seconds: z.number() }),
  }),
  z.strictObject({
    type: z.literal('conversation.item.input_audio_transcription.failed'),
    item_id: z.string(),
    content_index: z.number().int(),
    error: z.strictObject({ type: z.string(), code: z.string().nullable(), message: z.string(), param: z.string().nullable() }),
  }),
  z.strictObject({ type: z.literal('response.created'), response: RealtimeResponse }),
  z.strictObject({ type: z.literal('response.done'), response: RealtimeResponse }),
  z.strictObject({ type: z.literal('response.output_item.added'), response_id: z.string(), output_index: z.number().int(), item: ConversationItem }),
  z.strictObject({ type: z.literal('response.output_item.done'), response_id: z.string(), output_index: z.number().int(), item: ConversationItem }),
  z.strictObject({ type: z.literal('response.content_part.added'), ...InResponse, part: Part }),
  z.strictObject({ type: z.literal('response.content_part.done'), ...InResponse, part: Part }),
  z.strictObject({ type: z.literal('response.output_text.delta'), ...InResponse, delta: z.string() }),
  z.strictObject({ type: z.literal('response.output_text.done'), ...InResponse, text: z.string() }),
  z.strictObject({ type: z.literal('response.output_audio_transcript.delta'), ...InResponse, delta: z.string() }),
  z.strictObject({ type: z.literal('response.output_audio_transcript.done'), ...InResponse, transcript: z.string() }),
  z.strictObject({ type: z.literal('response.output_audio.delta'), ...InResponse, delta: z.string() }),
  z.strictObject({ type: z.literal('response.output_audio.done'), ...InResponse }),
]);
export type ServerEvent = z.infer<typeof ServerEvent>;
