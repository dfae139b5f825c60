// The pure core of one `WS /v1/realtime` session: (state, input) -> (state, actions). Inputs are
// the client's parsed events, audio with the detector's frame decisions, and what the shell's tasks
// report (a transcript, reply text, speech done); actions are events to send and work to start or
// cancel. No I/O, no clock: ids come from a counter under a prefix the shell picks.

import type { ChatMessage } from '../../../wire/task.js';
import { TRANSCRIBE_SAMPLE_RATE } from '../../../wire/task.js';
import {
  DEFAULT_RESPONSE_TOKENS,
  REALTIME_PCM_RATE_HZ,
  type ClientEvent,
  type ConversationItem,
  type RealtimeError,
  type RealtimeResponse,
  type ServerEvent,
  type SessionConfig,
  type SessionObject,
} from './protocol.js';
import { resetVad, stepVad, VAD_FRAME_MS, VAD_FRAME_SAMPLES, VAD_IDLE, VAD_START_FRAMES, type VadState } from './vad.js';

/** Seconds of 16 kHz audio the input buffer holds; a VAD turn is committed there, a manual buffer cleared. */
export const MAX_INPUT_BUFFER_S = 120;
const MAX_INPUT_BUFFER_SAMPLES = MAX_INPUT_BUFFER_S * TRANSCRIBE_SAMPLE_RATE;
/** Items the conversation keeps (what the chat model sees); older ones are forgotten. */
export const MAX_CONVERSATION_ITEMS = 64;
/** The shortest manual commit, as OpenAI's. */
export const MIN_COMMIT_MS = 100;
/** Reply text is spoken a sentence at a time; a run-on longer than this is cut at a space. */
export const MAX_SPOKEN_CHARS = 400;

export interface TurnDetection {
  threshold: number;
  prefixPaddingMs: number;
  silenceDurationMs: number;
  createResponse: boolean;
  interruptResponse: boolean;
}

export const DEFAULT_TURN_DETECTION: TurnDetection = { threshold: 0.5, prefixPaddingMs: 300, silenceDurationMs: 500, createResponse: true, interruptResponse: true };

export interface Settings {
  type: 'realtime' | 'transcription';
  /** The chat model of a realtime session. */
  model: string;
  instructions: string;
  modality: 'audio' | 'text';
  maxOutputTokens: number | 'inf';
  inputRateHz: number;
  transcription: { model: string | null; language: string | null; prompt: string };
  turnDetection: TurnDetection | null;
  voice: string;
  speed: number;
}

interface Item {
  id: string;
  role: 'user' | 'assistant' | 'system';
  source: 'audio' | 'text';
  /** null while its audio is being transcribed. */
  text: string | null;
  status: 'completed' | 'incomplete';
}

interface ResponseRequest {
  instructions: string;
  modality: 'audio' | 'text';
  maxOutputTokens: number | 'inf';
  voice: string;
  metadata: Record<string, string> | null;
  /** Started by turn detection for this item: dropped if its transcription fails. */
  forItem: string | null;
}

interface ActiveResponse extends ResponseRequest {
  id: string;
  itemId: string;
  text: string;
  /** Reply text not yet handed to the voice. */
  unspoken: string;
  /** Sentences handed to the voice and not yet spoken. */
  speaking: number;
  ended: { incomplete: boolean; usage: RealtimeResponse['usage'] } | null;
}

export interface State {
  settings: Settings;
  idPrefix: string;
  counter: number;
  items: Item[];
  /** Transcriptions running. */
  transcribing: number;
  /** 16 kHz samples since the last commit or clear, from absolute sample `bufferStart` on. */
  buffer: Int16Array[];
  bufferSamples: number;
  bufferStart: number;
  vad: VadState;
  /** The turn being spoken: its item id and first sample. */
  turn: { itemId: string; startSample: number } | null;
  queued: ResponseRequest | null;
  response: ActiveResponse | null;
}

export type ChatTask = { model: string; messages: ChatMessage[]; maxTokens: number };

export type Action =
  | { kind: 'send'; event: ServerEvent }
  | { kind: 'transcribe'; itemId: string; audio: Int16Array; model: string | null; language: string | null; prompt: string }
  | { kind: 'respond'; responseId: string; chat: ChatTask }
  | { kind: 'speak'; responseId: string; text: string; voice: string; speed: number }
  | { kind: 'cancel-response'; responseId: string }
  | { kind: 'configure-audio'; threshold: number; inputRateHz: number };

export type Input =
  | { kind: 'client'; event: ClientEvent }
  /** `audio` at 16 kHz, and the detector's decision for each 20 ms frame it completed. */
  | { kind: 'audio'; audio: Int16Array; voiced: readonly boolean[] }
  | { kind: 'transcribed'; itemId: string; text: string; durationS: number }
  | { kind: 'transcription-failed'; itemId: string; error: Omit<RealtimeError, 'event_id'> }
  | { kind: 'response-text'; responseId: string; delta: string }
  | { kind: 'response-end'; responseId: string; incomplete: boolean; promptTokens: number; completionTokens: number }
  | { kind: 'response-audio'; responseId: string; audio: string }
  | { kind: 'spoken'; responseId: string }
  | { kind: 'response-failed'; responseId: string; error: Omit<RealtimeError, 'event_id'> }
  /** The client sent something that is not an event (bad JSON, an unknown type, too large). */
  | { kind: 'bad-event'; error: Omit<RealtimeError, 'event_id'>; eventId: string | null };

export interface Step {
  state: State;
  actions: Action[];
}

export function initialState(settings: Settings, idPrefix: string): Step {
  const state: State = {
    settings,
    idPrefix,
    counter: 0,
    items: [],
    transcribing: 0,
    buffer: [],
    bufferSamples: 0,
    bufferStart: 0,
    vad: VAD_IDLE,
    turn: null,
    queued: null,
    response: null,
  };
  return { state, actions: [send({ type: 'session.created', session: sessionObject(state) })] };
}

/** Applies one input. Never throws for anything a client can send. */
export function step(state: State, input: Input): Step {
  const s: State = { ...state, items: [...state.items], buffer: [...state.buffer], response: state.response === null ? null : { ...state.response } };
  const actions: Action[] = [];
  switch (input.kind) {
    case 'client':
      onClientEvent(s, input.event, actions);
      break;
    case 'audio':
      onAudio(s, input.audio, input.voiced, actions);
      break;
    case 'bad-event':
      actions.push(send({ type: 'error', error: { ...input.error, event_id: input.eventId } }));
      break;
    case 'transcribed':
    case 'transcription-failed':
      onTranscription(s, input, actions);
      break;
    case 'response-text':
    case 'response-end':
    case 'response-audio':
    case 'spoken':
    case 'response-failed':
      onResponseProgress(s, input, actions);
      break;
  }
  return { state: s, actions };
}

function send(event: ServerEvent): Action {
  return { kind: 'send', event };
}

function nextId(s: State, kind: 'item' | 'resp'): string {
  s.counter += 1;
  return `${kind}_${s.idPrefix}${s.counter.toString(36).padStart(4, '0')}`;
}

function clientError(eventId: string | undefined, message: string, code: string | null = null, param: string | null = null): Action {
  return send({ type: 'error', error: { type: 'invalid_request_error', code, message, param, event_id: eventId ?? null } });
}

function onClientEvent(s: State, event: ClientEvent, actions: Action[]): void {
  switch (event.type) {
    case 'session.update': {
      if (event.session.type !== s.settings.type && (s.response !== null || s.queued !== null)) {
        actions.push(clientError(event.event_id, `the session type cannot change while a response runs: cancel it (response.cancel) first`, null, 'session.type'));
        return;
      }
      const before = s.settings;
      s.settings = applyConfig(before, event.session);
      if (s.settings.turnDetection?.threshold !== before.turnDetection?.threshold || s.settings.inputRateHz !== before.inputRateHz) {
        actions.push({ kind: 'configure-audio', threshold: s.settings.turnDetection?.threshold ?? DEFAULT_TURN_DETECTION.threshold, inputRateHz: s.settings.inputRateHz });
      }
      if (s.settings.turnDetection === null && s.turn !== null) {
        s.turn = null;
        s.vad = resetVad(s.vad);
      }
      actions.push(send({ type: 'session.updated', session: sessionObject(s) }));
      return;
    }
    case 'input_audio_buffer.append':
      // The shell decodes the audio and sends it on as an `audio` input.
      return;
    case 'input_audio_buffer.commit': {
      if (s.bufferSamples * 1000 < MIN_COMMIT_MS * TRANSCRIBE_SAMPLE_RATE) {
        const ms = Math.floor((s.bufferSamples * 1000) / TRANSCRIBE_SAMPLE_RATE);
        actions.push(clientError(event.event_id, `buffer too small: expected at least ${MIN_COMMIT_MS} ms of audio, but the buffer holds ${ms} ms: append more before committing`, 'input_audio_buffer_commit_empty'));
        return;
      }
      const itemId = s.turn?.itemId ?? nextId(s, 'item');
      s.turn = null;
      s.vad = resetVad(s.vad);
      commit(s, itemId, s.bufferStart + s.bufferSamples, actions, false);
      return;
    }
    case 'input_audio_buffer.clear':
      s.bufferStart += s.bufferSamples;
      s.buffer = [];
      s.bufferSamples = 0;
      s.turn = null;
      s.vad = resetVad(s.vad);
      actions.push(send({ type: 'input_audio_buffer.cleared' }));
      return;
    case 'conversation.item.create': {
      const id = event.item.id ?? nextId(s, 'item');
      if (s.items.some((item) => item.id === id)) {
        actions.push(clientError(event.event_id, `an item with id '${id}' already exists: give a new id or none`, null, 'item.id'));
        return;
      }
      const item: Item = { id, role: event.item.role, source: 'text', text: event.item.content.map((part) => part.text).join(''), status: 'completed' };
      const previous = addItem(s, item);
      actions.push(send({ type: 'conversation.item.added', item: itemBody(item), previous_item_id: previous }));
      actions.push(send({ type: 'conversation.item.done', item: itemBody(item), previous_item_id: previous }));
      return;
    }
    case 'response.create': {
      if (s.settings.type === 'transcription') {
        actions.push(clientError(event.event_id, "transcription sessions make no responses: switch the session to type 'realtime' (session.update) for a voice loop"));
        return;
      }
      if (s.response !== null || s.queued !== null) {
        actions.push(clientError(event.event_id, 'the conversation already has an active response: wait for response.done or send response.cancel', 'conversation_already_has_active_response'));
        return;
      }
      const params = event.response;
      s.queued = {
        instructions: params?.instructions ?? s.settings.instructions,
        modality: params?.output_modalities?.[0] ?? s.settings.modality,
        maxOutputTokens: params?.max_output_tokens ?? s.settings.maxOutputTokens,
        voice: params?.audio?.output?.voice ?? s.settings.voice,
        metadata: params?.metadata ?? null,
        forItem: null,
      };
      maybeStartResponse(s, actions);
      return;
    }
    case 'response.cancel': {
      const active = s.response;
      if (active === null && s.queued === null) {
        actions.push(clientError(event.event_id, 'there is no active response to cancel', 'response_cancel_not_active'));
        return;
      }
      if (event.response_id !== undefined && active !== null && event.response_id !== active.id) {
        actions.push(clientError(event.event_id, `response '${event.response_id}' is not the active response ('${active.id}')`, 'response_cancel_not_active', 'response_id'));
        return;
      }
      if (active === null) {
        s.queued = null;
        return;
      }
      cancelResponse(s, 'client_cancelled', actions);
      return;
    }
  }
}

export function applyConfig(settings: Settings, config: SessionConfig): Settings {
  const input = config.audio?.input;
  const next: Settings = { ...settings, type: config.type };
  if (input?.format?.rate !== undefined) next.inputRateHz = input.format.rate;
  if (input?.transcription !== undefined) {
    const t = input.transcription;
    next.transcription = t === null ? { ...settings.transcription, language: null, prompt: '' } : { model: t.model ?? settings.transcription.model, language: t.language ?? settings.transcription.language, prompt: t.prompt ?? settings.transcription.prompt };
  }
  if (input?.turn_detection !== undefined) {
    const td = input.turn_detection;
    const base = settings.turnDetection ?? DEFAULT_TURN_DETECTION;
    next.turnDetection =
      td === null
        ? null
        : {
            threshold: td.threshold ?? base.threshold,
            prefixPaddingMs: td.prefix_padding_ms ?? base.prefixPaddingMs,
            silenceDurationMs: td.silence_duration_ms ?? base.silenceDurationMs,
            createResponse: td.create_response ?? base.createResponse,
            interruptResponse: td.interrupt_response ?? base.interruptResponse,
          };
  }
  if (config.type === 'realtime') {
    if (config.model !== undefined) next.model = config.model;
    if (config.instructions !== undefined) next.instructions = config.instructions;
    if (config.output_modalities !== undefined) next.modality = config.output_modalities[0]!;
    if (config.max_output_tokens !== undefined) next.maxOutputTokens = config.max_output_tokens;
    if (config.audio?.output?.voice !== undefined) next.voice = config.audio.output.voice;
    if (config.audio?.output?.speed !== undefined) next.speed = config.audio.output.speed;
  }
  return next;
}

function onAudio(s: State, audio: Int16Array, voiced: readonly boolean[], actions: Action[]): void {
  const td = s.settings.turnDetection;
  if (td === null) s.vad = { ...s.vad, frames: s.vad.frames + voiced.length };
  if (td === null && s.bufferSamples + audio.length > MAX_INPUT_BUFFER_SAMPLES) {
    s.bufferStart += s.bufferSamples + audio.length;
    s.buffer = [];
    s.bufferSamples = 0;
    actions.push(
      send({
        type: 'error',
        error: {
          type: 'invalid_request_error',
          code: 'input_audio_buffer_full',
          message: `the input audio buffer holds at most ${MAX_INPUT_BUFFER_S} s: it was cleared, with this append; commit (input_audio_buffer.commit) more often`,
          param: null,
          event_id: null,
        },
      }),
    );
    actions.push(send({ type: 'input_audio_buffer.cleared' }));
    return;
  }
  s.buffer.push(audio);
  s.bufferSamples += audio.length;
  if (td === null) return;
  for (const decision of voiced) {
    const { state: vad, event } = stepVad(s.vad, decision, { threshold: td.threshold, prefixPaddingMs: td.prefixPaddingMs, silenceDurationMs: td.silenceDurationMs });
    s.vad = vad;
    if (event?.type === 'start') {
      const startSample = Math.max(s.bufferStart, (event.startMs * TRANSCRIBE_SAMPLE_RATE) / 1000);
      s.turn = { itemId: nextId(s, 'item'), startSample };
      actions.push(send({ type: 'input_audio_buffer.speech_started', audio_start_ms: Math.round((startSample * 1000) / TRANSCRIBE_SAMPLE_RATE), item_id: s.turn.itemId }));
      if (td.interruptResponse && s.response !== null) cancelResponse(s, 'turn_detected', actions);
    } else if (event?.type === 'stop' && s.turn !== null) {
      endTurn(s, (event.endMs * TRANSCRIBE_SAMPLE_RATE) / 1000, actions);
    }
  }
  const end = s.bufferStart + s.bufferSamples;
  if (s.turn !== null && end - s.turn.startSample >= MAX_INPUT_BUFFER_SAMPLES) {
    // A turn as long as the buffer ends where the buffer does, as if its speaker had paused.
    s.vad = resetVad(s.vad);
    endTurn(s, end, actions);
  } else if (s.turn === null) {
    // Between turns only the audio a turn's prefix padding can reach back to is kept.
    const keep = ((td.prefixPaddingMs + (VAD_START_FRAMES + 1) * VAD_FRAME_MS) * TRANSCRIBE_SAMPLE_RATE) / 1000 + VAD_FRAME_SAMPLES;
    trimBefore(s, end - keep);
  }
}

function endTurn(s: State, endSample: number, actions: Action[]): void {
  const turn = s.turn!;
  s.turn = null;
  actions.push(send({ type: 'input_audio_buffer.speech_stopped', audio_end_ms: Math.round((endSample * 1000) / TRANSCRIBE_SAMPLE_RATE), item_id: turn.itemId }));
  trimBefore(s, turn.startSample);
  commit(s, turn.itemId, endSample, actions, s.settings.type === 'realtime' && (s.settings.turnDetection?.createResponse ?? false));
}

/** Drops buffered samples before absolute sample `sample`. */
function trimBefore(s: State, sample: number): void {
  const drop = Math.min(Math.floor(sample - s.bufferStart), s.bufferSamples);
  if (drop <= 0) return;
  let left = drop;
  while (left > 0) {
    const first = s.buffer[0]!;
    if (first.length <= left) {
      s.buffer.shift();
      left -= first.length;
    } else {
      s.buffer[0] = first.subarray(left);
      left = 0;
    }
  }
  s.bufferSamples -= drop;
  s.bufferStart += drop;
}

/** Splits chunks at `samples`: the first `samples` samples joined, and the chunks after. */
function split(chunks: readonly Int16Array[], samples: number): { head: Int16Array; rest: Int16Array[] } {
  const head = new Int16Array(samples);
  const rest: Int16Array[] = [];
  let filled = 0;
  for (const chunk of chunks) {
    if (filled >= samples) {
      rest.push(chunk);
      continue;
    }
    const take = Math.min(chunk.length, samples - filled);
    head.set(chunk.subarray(0, take), filled);
    filled += take;
    if (take < chunk.length) rest.push(chunk.subarray(take));
  }
  return { head, rest };
}

/** Takes the buffer up to absolute sample `endSample` as a user audio item and sends it to be transcribed. */
function commit(s: State, itemId: string, endSample: number, actions: Action[], respond: boolean): void {
  const take = Math.max(0, Math.min(s.bufferSamples, Math.floor(endSample - s.bufferStart)));
  const { head, rest } = split(s.buffer, take);
  s.buffer = rest;
  s.bufferSamples -= take;
  s.bufferStart += take;
  const item: Item = { id: itemId, role: 'user', source: 'audio', text: null, status: 'completed' };
  const previous = addItem(s, item);
  actions.push(send({ type: 'input_audio_buffer.committed', item_id: itemId, previous_item_id: previous }));
  actions.push(send({ type: 'conversation.item.added', item: itemBody(item), previous_item_id: previous }));
  s.transcribing += 1;
  const t = s.settings.transcription;
  actions.push({ kind: 'transcribe', itemId, audio: head, model: t.model, language: t.language, prompt: t.prompt });
  if (respond && s.response === null && s.queued === null) {
    s.queued = { instructions: s.settings.instructions, modality: s.settings.modality, maxOutputTokens: s.settings.maxOutputTokens, voice: s.settings.voice, metadata: null, forItem: itemId };
  }
}

/** Appends an item, forgetting the oldest past the limit; answers the id of the item before it. */
function addItem(s: State, item: Item): string | null {
  const previous = s.items.at(-1)?.id ?? null;
  s.items.push(item);
  if (s.items.length > MAX_CONVERSATION_ITEMS) s.items.splice(0, s.items.length - MAX_CONVERSATION_ITEMS);
  return previous;
}

function previousOf(s: State, id: string): string | null {
  const index = s.items.findIndex((item) => item.id === id);
  return index > 0 ? s.items[index - 1]!.id : null;
}

function onTranscription(s: State, input: Extract<Input, { kind: 'transcribed' | 'transcription-failed' }>, actions: Action[]): void {
  s.transcribing = Math.max(0, s.transcribing - 1);
  const index = s.items.findIndex((item) => item.id === input.itemId);
  const text = input.kind === 'transcribed' ? input.text.trim() : '';
  if (index !== -1) s.items[index] = { ...s.items[index]!, text };
  if (input.kind === 'transcribed') {
    actions.push(send({ type: 'conversation.item.input_audio_transcription.completed', item_id: input.itemId, content_index: 0, transcript: text, usage: { type: 'duration', seconds: input.durationS } }));
  } else {
    actions.push(send({ type: 'conversation.item.input_audio_transcription.failed', item_id: input.itemId, content_index: 0, error: input.error }));
    if (s.queued?.forItem === input.itemId) s.queued = null;
  }
  if (index !== -1) actions.push(send({ type: 'conversation.item.done', item: itemBody(s.items[index]!), previous_item_id: previousOf(s, input.itemId) }));
  maybeStartResponse(s, actions);
}

/** Starts the queued response once no response runs and every turn before it is transcribed. */
function maybeStartResponse(s: State, actions: Action[]): void {
  if (s.queued === null || s.response !== null || s.transcribing > 0) return;
  const request = s.queued;
  s.queued = null;
  const response: ActiveResponse = { ...request, id: nextId(s, 'resp'), itemId: nextId(s, 'item'), text: '', unspoken: '', speaking: 0, ended: null };
  s.response = response;
  const messages: ChatMessage[] = [];
  if (request.instructions !== '') messages.push({ role: 'system', content: request.instructions });
  for (const item of s.items) if (item.text !== null && item.text !== '') messages.push({ role: item.role, content: item.text });
  const maxTokens = request.maxOutputTokens === 'inf' ? DEFAULT_RESPONSE_TOKENS : request.maxOutputTokens;
  actions.push(send({ type: 'response.created', response: responseBody(s, response, 'in_progress', null) }));
  const item = assistantItem(response, 'in_progress');
  actions.push(send({ type: 'response.output_item.added', response_id: response.id, output_index: 0, item }));
  actions.push(send({ type: 'conversation.item.added', item, previous_item_id: s.items.at(-1)?.id ?? null }));
  actions.push(send({ type: 'response.content_part.added', ...where(response), part: emptyPart(response) }));
  if (messages.length === 0) {
    failResponse(s, { type: 'invalid_request_error', code: null, message: 'the conversation is empty: nothing was said or transcribed to respond to', param: null }, actions);
    return;
  }
  actions.push({ kind: 'respond', responseId: response.id, chat: { model: s.settings.model, messages, maxTokens } });
}

function where(response: ActiveResponse): { response_id: string; item_id: string; output_index: number; content_index: number } {
  return { response_id: response.id, item_id: response.itemId, output_index: 0, content_index: 0 };
}

function emptyPart(response: ActiveResponse): { type: 'audio' | 'text'; transcript?: string; text?: string } {
  return response.modality === 'audio' ? { type: 'audio', transcript: '' } : { type: 'text', text: '' };
}

function onResponseProgress(s: State, input: Extract<Input, { responseId: string }>, actions: Action[]): void {
  const response = s.response;
  // Reports of a response already cancelled or failed arrive late and mean nothing now.
  if (response === null || response.id !== input.responseId) return;
  switch (input.kind) {
    case 'response-text': {
      if (input.delta === '') return;
      response.text += input.delta;
      if (response.modality === 'text') {
        actions.push(send({ type: 'response.output_text.delta', ...where(response), delta: input.delta }));
        return;
      }
      actions.push(send({ type: 'response.output_audio_transcript.delta', ...where(response), delta: input.delta }));
      const { sentences, rest } = takeSentences(response.unspoken + input.delta);
      response.unspoken = rest;
      for (const sentence of sentences) speak(s, response, sentence, actions);
      return;
    }
    case 'response-end': {
      response.ended = { incomplete: input.incomplete, usage: { total_tokens: input.promptTokens + input.completionTokens, input_tokens: input.promptTokens, output_tokens: input.completionTokens } };
      if (response.modality === 'audio' && response.unspoken.trim() !== '') speak(s, response, response.unspoken.trim(), actions);
      response.unspoken = '';
      finishIfDone(s, actions);
      return;
    }
    case 'response-audio':
      actions.push(send({ type: 'response.output_audio.delta', ...where(response), delta: input.audio }));
      return;
    case 'spoken':
      response.speaking = Math.max(0, response.speaking - 1);
      finishIfDone(s, actions);
      return;
    case 'response-failed':
      actions.push({ kind: 'cancel-response', responseId: response.id });
      failResponse(s, input.error, actions);
      return;
  }
}

function speak(s: State, response: ActiveResponse, text: string, actions: Action[]): void {
  response.speaking += 1;
  actions.push({ kind: 'speak', responseId: response.id, text, voice: response.voice, speed: s.settings.speed });
}

/**
 * Complete sentences at the front of `text` (ended by . ! ? or … before white space, or a line
 * break), and what follows them; a run-on past MAX_SPOKEN_CHARS is cut at its last space.
 */
export function takeSentences(text: string): { sentences: string[]; rest: string } {
  const sentences: string[] = [];
  let rest = text;
  for (;;) {
    const match = /[.!?…]+["')\]]*\s|\n/.exec(rest);
    if (match !== null) {
      const sentence = rest.slice(0, match.index + match[0].length).trim();
      rest = rest.slice(match.index + match[0].length);
      if (sentence !== '') sentences.push(sentence);
      continue;
    }
    if (rest.length <= MAX_SPOKEN_CHARS) break;
    const space = rest.lastIndexOf(' ', MAX_SPOKEN_CHARS);
    const cut = space > 0 ? space : MAX_SPOKEN_CHARS;
    const piece = rest.slice(0, cut).trim();
    if (piece !== '') sentences.push(piece);
    rest = rest.slice(cut);
  }
  return { sentences, rest };
}

function finishIfDone(s: State, actions: Action[]): void {
  const response = s.response!;
  if (response.ended === null || response.speaking > 0) return;
  const status = response.ended.incomplete ? 'incomplete' : 'completed';
  closeResponse(s, status, status === 'incomplete' ? { type: 'incomplete', reason: 'max_output_tokens' } : { type: 'completed' }, response.ended.usage, actions);
}

function cancelResponse(s: State, reason: 'client_cancelled' | 'turn_detected', actions: Action[]): void {
  const response = s.response!;
  actions.push({ kind: 'cancel-response', responseId: response.id });
  closeResponse(s, 'cancelled', { type: 'cancelled', reason }, response.ended?.usage ?? null, actions);
}

function failResponse(s: State, error: Omit<RealtimeError, 'event_id'>, actions: Action[]): void {
  actions.push(send({ type: 'error', error: { ...error, event_id: null } }));
  closeResponse(s, 'failed', { type: 'failed', error: { type: error.type, code: error.code } }, null, actions);
}

/** Ends the active response: the done events for its part and item, the item kept in the conversation, then `response.done`. */
function closeResponse(s: State, status: 'completed' | 'incomplete' | 'cancelled' | 'failed', details: RealtimeResponse['status_details'], usage: RealtimeResponse['usage'], actions: Action[]): void {
  const response = s.response!;
  s.response = null;
  if (status === 'completed' || status === 'incomplete') {
    if (response.modality === 'audio') {
      actions.push(send({ type: 'response.output_audio.done', ...where(response) }));
      actions.push(send({ type: 'response.output_audio_transcript.done', ...where(response), transcript: response.text }));
    } else {
      actions.push(send({ type: 'response.output_text.done', ...where(response), text: response.text }));
    }
  }
  actions.push(send({ type: 'response.content_part.done', ...where(response), part: response.modality === 'audio' ? { type: 'audio', transcript: response.text } : { type: 'text', text: response.text } }));
  const itemStatus = status === 'completed' ? 'completed' : 'incomplete';
  const item = assistantItem(response, itemStatus);
  actions.push(send({ type: 'response.output_item.done', response_id: response.id, output_index: 0, item }));
  const kept: Item = { id: response.itemId, role: 'assistant', source: 'text', text: response.text, status: itemStatus };
  const previous = addItem(s, kept);
  actions.push(send({ type: 'conversation.item.done', item, previous_item_id: previous }));
  actions.push(send({ type: 'response.done', response: responseBody(s, response, status, details, usage, [item]) }));
  maybeStartResponse(s, actions);
}

function assistantItem(response: ActiveResponse, status: ConversationItem['status']): ConversationItem {
  const content: ConversationItem['content'] = status === 'in_progress' ? [] : [response.modality === 'audio' ? { type: 'output_audio', transcript: response.text } : { type: 'output_text', text: response.text }];
  return { id: response.itemId, object: 'realtime.item', type: 'message', role: 'assistant', status, content };
}

function itemBody(item: Item): ConversationItem {
  const content: ConversationItem['content'] =
    item.source === 'audio' ? [{ type: 'input_audio', transcript: item.text }] : [{ type: item.role === 'assistant' ? 'output_text' : 'input_text', text: item.text ?? '' }];
  return { id: item.id, object: 'realtime.item', type: 'message', role: item.role, status: item.status, content };
}

function responseBody(
  s: State,
  response: ActiveResponse,
  status: RealtimeResponse['status'],
  details: RealtimeResponse['status_details'],
  usage: RealtimeResponse['usage'] = null,
  output: ConversationItem[] = [],
): RealtimeResponse {
  return {
    id: response.id,
    object: 'realtime.response',
    conversation_id: `conv_${s.idPrefix}`,
    status,
    status_details: details,
    output,
    output_modalities: [response.modality],
    max_output_tokens: response.maxOutputTokens,
    audio: { output: { format: { type: 'audio/pcm', rate: REALTIME_PCM_RATE_HZ }, voice: response.voice } },
    metadata: response.metadata,
    usage,
  };
}

export function sessionObject(s: State): SessionObject {
  const { settings } = s;
  const td = settings.turnDetection;
  const input = {
    format: { type: 'audio/pcm' as const, rate: settings.inputRateHz },
    transcription: { model: settings.transcription.model, language: settings.transcription.language, prompt: settings.transcription.prompt },
    turn_detection:
      td === null
        ? null
        : {
            type: 'server_vad' as const,
            threshold: td.threshold,
            prefix_padding_ms: td.prefixPaddingMs,
            silence_duration_ms: td.silenceDurationMs,
            create_response: td.createResponse,
            interrupt_response: td.interruptResponse,
            idle_timeout_ms: null,
          },
    noise_reduction: null,
  };
  const id = `sess_${s.idPrefix}`;
  if (settings.type === 'transcription') return { type: 'transcription', object: 'realtime.transcription_session', id, audio: { input } };
  return {
    type: 'realtime',
    object: 'realtime.session',
    id,
    model: settings.model,
    output_modalities: [settings.modality],
    instructions: settings.instructions,
    max_output_tokens: settings.maxOutputTokens,
    tools: [],
    tool_choice: 'auto',
    audio: { input, output: { format: { type: 'audio/pcm', rate: REALTIME_PCM_RATE_HZ }, voice: settings.voice, speed: settings.speed } },
  };
}
