// The chat page's voice mode speaks OpenAI's realtime dialect (GA event names) over `WS /v1/realtime`:
// this file builds the client's events, reads the server's, and folds them into what the page shows
// (connection, who is speaking, the turns as chat messages). No socket or audio here, so the unit tier
// runs it; the page owns those.

import { REALTIME_SAMPLE_RATE } from './audio.js';

/** Same origin as the page, wherever it is mounted: `ws(s)://host/<base>v1/realtime?model=`. */
export function realtimeUrl(pageHref: string, model: string): string {
  const url = new URL('v1/realtime', pageHref);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.search = new URLSearchParams({ model }).toString();
  url.hash = '';
  return url.toString();
}

/**
 * A browser cannot set headers on a WebSocket, so the API key travels as a subprotocol, the way
 * OpenAI's browser clients send it. No key: no subprotocol at all.
 */
export function realtimeProtocols(apiKey: string | null): string[] {
  return apiKey ? ['realtime', `openai-insecure-api-key.${apiKey}`] : [];
}

/** The node's bound on `max_output_tokens` of a realtime reply; the chat's larger limits are cut to it. */
export const MAX_REPLY_TOKENS = 4096;

const PCM = { type: 'audio/pcm', rate: REALTIME_SAMPLE_RATE } as const;

/** The session the page asks for: PCM16 both ways, the server's voice activity detection, transcripts of what the user says. */
export function sessionUpdate(options: { voice: string; transcriptionModel: string | null; maxOutputTokens: number }): Record<string, unknown> {
  return {
    type: 'session.update',
    session: {
      type: 'realtime',
      output_modalities: ['audio'],
      max_output_tokens: Math.max(1, Math.min(MAX_REPLY_TOKENS, Math.floor(options.maxOutputTokens))),
      audio: {
        input: {
          format: PCM,
          turn_detection: { type: 'server_vad' },
          ...(options.transcriptionModel ? { transcription: { model: options.transcriptionModel } } : {}),
        },
        output: { format: PCM, voice: options.voice },
      },
    },
  };
}

/** The node keeps this many conversation items per session (and text per item): older history is not sent. */
export const MAX_HISTORY_ITEMS = 64;
export const MAX_HISTORY_ITEM_CHARS = 32_768;

/**
 * The chat so far as `conversation.item.create` events, so voice mode carries on the conversation
 * rather than starting over: text only (the realtime route takes no images), failed answers left out.
 */
export function historyItems(messages: readonly { role: 'user' | 'assistant'; content: string; error?: string }[]): Record<string, unknown>[] {
  return messages
    .filter((m) => m.error === undefined && m.content.trim() !== '')
    .slice(-MAX_HISTORY_ITEMS)
    .map((m) => ({
      type: 'conversation.item.create',
      item: { type: 'message', role: m.role, content: [{ type: m.role === 'user' ? 'input_text' : 'output_text', text: m.content.slice(0, MAX_HISTORY_ITEM_CHARS) }] },
    }));
}

export function appendAudio(base64Pcm16: string): Record<string, unknown> {
  return { type: 'input_audio_buffer.append', audio: base64Pcm16 };
}

export function cancelResponse(): Record<string, unknown> {
  return { type: 'response.cancel' };
}

/** The server events the page acts on; any other type is `other` and changes nothing. */
export type ServerEvent =
  | { type: 'session.created' | 'session.updated' }
  | { type: 'speech_started' | 'speech_stopped'; itemId: string | null }
  | { type: 'user_transcript'; itemId: string | null; text: string; final: boolean }
  | { type: 'user_transcript_failed'; itemId: string | null; message: string }
  | { type: 'response_created'; responseId: string | null }
  | { type: 'reply_text'; responseId: string | null; delta: string }
  | { type: 'reply_text_done'; responseId: string | null; text: string | null }
  | { type: 'reply_audio'; responseId: string | null; audio: string }
  | { type: 'response_done'; responseId: string | null; status: string | null; reason: string | null }
  | { type: 'error'; message: string }
  | { type: 'other'; name: string }
  | { type: 'invalid'; message: string };

function record(value: unknown): Record<string, unknown> | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
}

function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

/** One text frame from the server. */
export function readServerEvent(data: string): ServerEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch {
    return { type: 'invalid', message: `the node sent a realtime event that is not JSON: ${data.slice(0, 120)}` };
  }
  const event = record(parsed);
  const type = event ? str(event.type) : null;
  if (!event || type === null) return { type: 'invalid', message: 'the node sent a realtime event without a type' };
  const itemId = str(event.item_id);
  const responseId = str(event.response_id) ?? str(record(event.response)?.id);
  switch (type) {
    case 'session.created':
    case 'session.updated':
      return { type };
    case 'input_audio_buffer.speech_started':
      return { type: 'speech_started', itemId };
    case 'input_audio_buffer.speech_stopped':
      return { type: 'speech_stopped', itemId };
    case 'conversation.item.input_audio_transcription.delta':
      return { type: 'user_transcript', itemId, text: str(event.delta) ?? '', final: false };
    case 'conversation.item.input_audio_transcription.completed':
      return { type: 'user_transcript', itemId, text: str(event.transcript) ?? '', final: true };
    case 'conversation.item.input_audio_transcription.failed':
      return { type: 'user_transcript_failed', itemId, message: str(record(event.error)?.message) ?? 'the transcription failed' };
    case 'response.created':
      return { type: 'response_created', responseId };
    case 'response.output_audio_transcript.delta':
    case 'response.output_text.delta':
      return { type: 'reply_text', responseId, delta: str(event.delta) ?? '' };
    case 'response.output_audio_transcript.done':
      return { type: 'reply_text_done', responseId, text: str(event.transcript) };
    case 'response.output_text.done':
      return { type: 'reply_text_done', responseId, text: str(event.text) };
    case 'response.output_audio.delta':
      return { type: 'reply_audio', responseId, audio: str(event.delta) ?? '' };
    case 'response.done': {
      const response = record(event.response);
      const details = record(response?.status_details);
      const error = record(details?.error);
      return { type: 'response_done', responseId, status: str(response?.status), reason: str(error?.message) ?? str(details?.reason) };
    }
    case 'error':
      return { type: 'error', message: str(record(event.error)?.message) ?? 'the realtime session failed' };
    default:
      return { type: 'other', name: type };
  }
}

export type VoiceConnection = 'connecting' | 'open' | 'closed';

/** One turn of a voice conversation, shown as a chat message. */
export interface VoiceTurn {
  /** The item (user) or response (assistant) it belongs to. */
  key: string;
  role: 'user' | 'assistant';
  text: string;
  /** Its text is complete: the user's transcript arrived, or the reply is done. */
  final: boolean;
  /** A reply the user talked over, or one that was cancelled. */
  interrupted?: boolean;
  /** A reply cut at the token limit. */
  cutAtLimit?: boolean;
  error?: string;
}

export interface VoiceState {
  connection: VoiceConnection;
  /** The server answered the session: audio sent now is heard. */
  ready: boolean;
  /** The server's VAD hears the user. */
  userSpeaking: boolean;
  /** A reply is being produced. */
  responding: boolean;
  turns: VoiceTurn[];
  /** The last error the server sent or the socket had. */
  error: string | null;
}

export const VOICE_START: VoiceState = { connection: 'connecting', ready: false, userSpeaking: false, responding: false, turns: [], error: null };

/** The most turns one voice session keeps on screen (docs/LIMITS.md); older ones are dropped first. */
export const MAX_VOICE_TURNS = 200;
/** The most text one turn keeps (docs/LIMITS.md): a runaway reply stops growing the page. */
export const MAX_TURN_CHARS = 32_768;

function upsert(turns: VoiceTurn[], key: string, role: VoiceTurn['role'], change: (turn: VoiceTurn) => VoiceTurn): VoiceTurn[] {
  const at = turns.findIndex((t) => t.key === key && t.role === role);
  if (at >= 0) {
    const next = turns.slice();
    next[at] = change(turns[at]!);
    return next;
  }
  const next = [...turns, change({ key, role, text: '', final: false })];
  return next.length > MAX_VOICE_TURNS ? next.slice(next.length - MAX_VOICE_TURNS) : next;
}

const cap = (text: string): string => (text.length > MAX_TURN_CHARS ? text.slice(0, MAX_TURN_CHARS) : text);

/** Events without an id still land somewhere: the latest turn of that role, or a new one. */
function keyFor(state: VoiceState, id: string | null, role: VoiceTurn['role']): string {
  if (id !== null) return id;
  for (let i = state.turns.length - 1; i >= 0; i--) if (state.turns[i]!.role === role && !state.turns[i]!.final) return state.turns[i]!.key;
  return `${role}-${state.turns.length}`;
}

export function reduceVoice(state: VoiceState, event: ServerEvent): VoiceState {
  switch (event.type) {
    case 'session.created':
    case 'session.updated':
      return { ...state, ready: true };
    case 'speech_started': {
      // Talking over a reply cuts it (the server cancels it; the page stops its audio).
      const turns = state.turns.map((t) => (t.role === 'assistant' && !t.final ? { ...t, final: true, interrupted: true } : t));
      return { ...state, userSpeaking: true, responding: false, turns: upsert(turns, keyFor(state, event.itemId, 'user'), 'user', (t) => t) };
    }
    case 'speech_stopped':
      return { ...state, userSpeaking: false };
    case 'user_transcript': {
      const key = keyFor(state, event.itemId, 'user');
      return { ...state, turns: upsert(state.turns, key, 'user', (t) => ({ ...t, text: cap(event.final ? event.text : t.text + event.text), final: event.final })) };
    }
    case 'user_transcript_failed':
      return { ...state, turns: upsert(state.turns, keyFor(state, event.itemId, 'user'), 'user', (t) => ({ ...t, final: true, error: event.message })) };
    case 'response_created':
      return { ...state, responding: true, turns: upsert(state.turns, keyFor(state, event.responseId, 'assistant'), 'assistant', (t) => t) };
    case 'reply_text':
      return { ...state, responding: true, turns: upsert(state.turns, keyFor(state, event.responseId, 'assistant'), 'assistant', (t) => (t.final ? t : { ...t, text: cap(t.text + event.delta) })) };
    case 'reply_text_done':
      return {
        ...state,
        turns: upsert(state.turns, keyFor(state, event.responseId, 'assistant'), 'assistant', (t) => (t.final || event.text === null ? t : { ...t, text: cap(event.text) })),
      };
    case 'response_done': {
      const key = keyFor(state, event.responseId, 'assistant');
      const failed = event.status === 'failed';
      const cut = event.status === 'cancelled';
      const limit = event.status === 'incomplete' && event.reason === 'max_output_tokens';
      const turns = state.turns.some((t) => t.key === key && t.role === 'assistant')
        ? upsert(state.turns, key, 'assistant', (t) => ({
            ...t,
            final: true,
            ...(cut ? { interrupted: true } : {}),
            ...(limit ? { cutAtLimit: true } : {}),
            ...(failed ? { error: event.reason ?? `the reply ended ${event.status}` } : {}),
          }))
        : state.turns;
      return { ...state, responding: false, turns };
    }
    case 'error':
      return { ...state, error: event.message };
    case 'invalid':
      return { ...state, error: event.message };
    case 'reply_audio':
    case 'other':
      return state;
  }
}

/** The socket opened, or closed (with the close's code and reason, as the page's error when it was not asked for). */
export function voiceOpened(state: VoiceState): VoiceState {
  return { ...state, connection: 'open' };
}

export function voiceClosed(state: VoiceState, close: { code: number; reason: string; byUser: boolean }): VoiceState {
  const turns = state.turns.map((t) => (t.final ? t : { ...t, final: true, ...(t.role === 'assistant' ? { interrupted: true } : {}) }));
  let error = state.error;
  if (!close.byUser && error === null) {
    error =
      close.code === 1006
        ? 'the connection to the node was lost (or the node refused the realtime route: is it running, and does it need an API key?)'
        : `the node closed the voice session (code ${close.code}${close.reason ? `: ${close.reason}` : ''})`;
  }
  return { ...state, connection: 'closed', ready: false, userSpeaking: false, responding: false, turns, error };
}
