// The shell of one `WS /v1/realtime` session: reads the socket's events, decodes and resamples audio
// for the detector, runs what the pure core (session.ts) asks for (transcriptions and replies through
// the dispatcher, speech through the node's voice) and feeds their results back; everything in
// flight is aborted when the socket closes.

import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { FvadModule } from '@echogarden/fvad-wasm';
import type { RawData, WebSocket } from 'ws';
import { ShoalError, toShoalError } from '../../../common/errors.js';
import { Resampler } from '../../../speech/resample.js';
import { TRANSCRIBE_SAMPLE_RATE, type TranscribeTask } from '../../../wire/task.js';
import type { Dispatcher } from '../../dispatch.js';
import type { SpeechControl } from '../../speech-port.js';
import { generateTask } from '../../task-builder.js';
import { parseBody } from '../../validation.js';
import { toOpenAIError } from '../errors.js';
import { CLIENT_EVENT_TYPES, ClientEvent, type RealtimeError } from './protocol.js';
import { initialState, step, type Action, type ChatTask, type Input, type Settings, type State } from './session.js';
import { FrameVad } from './vad.js';

/** Bytes of one client message; a larger one is answered with an `error` and dropped (the socket stays open). */
export const MAX_MESSAGE_BYTES = 1024 * 1024;
/** Bytes of one WebSocket message at all (ws's maxPayload): past it the socket is closed with 1009. */
export const MAX_FRAME_BYTES = 4 * MAX_MESSAGE_BYTES;
/** Events queued to a client that does not read them; past it the socket is closed with 1008. */
export const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;
/** Reply audio waits while more than this is queued to the client, so speech never outruns the socket. */
export const AUDIO_HIGH_WATER_BYTES = 1024 * 1024;
/** A session with no client event for this long, and nothing running, is closed (1000). */
export const IDLE_TIMEOUT_MS = 10 * 60_000;
/** The longest session, as OpenAI's: then it is closed (1000) whatever runs. */
export const MAX_SESSION_MS = 60 * 60_000;
/** How long the reply audio sleeps between looks at a full socket. */
const DRAIN_POLL_MS = 10;
/** Sampling of replies: OpenAI's realtime default. */
const REPLY_TEMPERATURE = 0.8;

export interface ConnectionDeps {
  dispatcher: Dispatcher;
  speech: SpeechControl;
  fvad: FvadModule;
  log: FastifyBaseLogger;
}

type Failure = Omit<RealtimeError, 'event_id'>;

function failureOf(error: unknown): Failure {
  const body = toOpenAIError(toShoalError(error)).body.error;
  return { type: body.type, code: body.code, message: body.message, param: body.param };
}

export class RealtimeConnection {
  private state: State;
  private readonly controller = new AbortController();
  private readonly responses = new Map<string, { controller: AbortController; speech: Promise<void> }>();
  private readonly vad: FrameVad;
  private resampler: Resampler | null;
  private inputRateHz: number;
  private readonly idPrefix = randomBytes(6).toString('hex');
  private events = 0;
  private idleTimer: NodeJS.Timeout;
  private readonly sessionTimer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly ws: WebSocket,
    private readonly deps: ConnectionDeps,
    settings: Settings,
    private readonly onClosed: () => void,
  ) {
    this.vad = new FrameVad(deps.fvad, settings.turnDetection?.threshold ?? 0.5);
    this.inputRateHz = settings.inputRateHz;
    this.resampler = resamplerFor(settings.inputRateHz);
    const start = initialState(settings, this.idPrefix);
    this.state = start.state;
    this.idleTimer = setTimeout(() => this.onIdle(), IDLE_TIMEOUT_MS);
    this.sessionTimer = setTimeout(() => this.ws.close(1000, `sessions last at most ${MAX_SESSION_MS / 60_000} minutes`), MAX_SESSION_MS);
    ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    ws.on('close', () => this.dispose());
    ws.on('error', (error) => {
      deps.log.debug({ err: error }, 'realtime socket error');
      this.dispose();
    });
    this.run(start.actions);
  }

  private dispose(): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.idleTimer);
    clearTimeout(this.sessionTimer);
    this.controller.abort(new ShoalError('CANCELLED', 'the realtime client disconnected'));
    this.vad.dispose();
    this.onClosed();
  }

  private onIdle(): void {
    if (this.closed) return;
    if (this.state.response !== null || this.state.transcribing > 0) {
      this.idleTimer = setTimeout(() => this.onIdle(), IDLE_TIMEOUT_MS);
      return;
    }
    this.ws.close(1000, `no event for ${IDLE_TIMEOUT_MS / 60_000} minutes`);
  }

  private input(input: Input): void {
    if (this.closed) return;
    const next = step(this.state, input);
    this.state = next.state;
    this.run(next.actions);
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.closed) return;
    this.idleTimer.refresh();
    const bytes = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    const bad = (message: string, code: string | null = null, param: string | null = null, eventId: string | null = null): void =>
      this.input({ kind: 'bad-event', error: { type: 'invalid_request_error', code, message, param }, eventId });
    if (isBinary) return bad('send events as JSON in text messages: binary messages are not events (audio goes base64 in input_audio_buffer.append)');
    if (bytes.length > MAX_MESSAGE_BYTES) return bad(`the message has ${bytes.length} bytes, more than the ${MAX_MESSAGE_BYTES} one event may have: append audio in smaller pieces`, 'message_too_large');
    let json: unknown;
    try {
      json = JSON.parse(bytes.toString('utf8'));
    } catch {
      return bad('the message is not valid JSON: send one event object per message');
    }
    const type = typeof json === 'object' && json !== null && !Array.isArray(json) ? (json as { type?: unknown }).type : undefined;
    const rawId = (json as { event_id?: unknown } | null)?.event_id;
    const eventId = typeof rawId === 'string' ? rawId.slice(0, 128) : null;
    if (typeof type !== 'string') return bad('an event is a JSON object with a string `type`', null, 'type', eventId);
    if (!(CLIENT_EVENT_TYPES as readonly string[]).includes(type)) {
      return bad(`unknown event type '${type.slice(0, 64)}': accepted are ${CLIENT_EVENT_TYPES.join(', ')} (docs/API.md, Realtime)`, 'invalid_event', 'type', eventId);
    }
    let event: ClientEvent;
    try {
      event = parseBody(ClientEvent, json);
    } catch (error) {
      const failure = failureOf(error);
      return this.input({ kind: 'bad-event', error: failure, eventId });
    }
    if (event.type === 'input_audio_buffer.append') {
      const pcm = decodePcm(event.audio);
      if (typeof pcm === 'string') return bad(pcm, null, 'audio', eventId);
      const audio = this.resampler === null ? pcm : this.resampler.push(pcm);
      this.input({ kind: 'audio', audio, voiced: this.vad.push(audio) });
      return;
    }
    this.input({ kind: 'client', event });
  }

  private run(actions: Action[]): void {
    for (const action of actions) {
      if (this.closed) return;
      switch (action.kind) {
        case 'send':
          this.send(action.event);
          break;
        case 'transcribe':
          void this.transcribe(action);
          break;
        case 'respond':
          this.respond(action.responseId, action.chat);
          break;
        case 'speak':
          this.speak(action);
          break;
        case 'cancel-response': {
          const running = this.responses.get(action.responseId);
          running?.controller.abort(new ShoalError('CANCELLED', 'the response was cancelled'));
          this.responses.delete(action.responseId);
          break;
        }
        case 'configure-audio':
          this.vad.setThreshold(action.threshold);
          if (action.inputRateHz !== this.inputRateHz) {
            this.inputRateHz = action.inputRateHz;
            this.resampler = resamplerFor(action.inputRateHz);
          }
          break;
      }
    }
  }

  private send(event: object): void {
    if (this.ws.readyState !== this.ws.OPEN) return;
    if (this.ws.bufferedAmount > MAX_BUFFERED_BYTES) {
      this.ws.close(1008, 'the client does not read its events');
      return;
    }
    this.events += 1;
    this.ws.send(JSON.stringify({ event_id: `event_${this.idPrefix}${this.events.toString(36)}`, ...event }));
  }

  private async transcribe(action: Extract<Action, { kind: 'transcribe' }>): Promise<void> {
    const model = action.model ?? defaultTranscriptionModel(this.deps.dispatcher);
    try {
      if (model === null) {
        throw new ShoalError('MODEL_NOT_FOUND', 'no speech-to-text model is placed on this cluster: place one (e.g. shoal/tiny-whisper) or name it in audio.input.transcription.model', { param: 'audio.input.transcription.model' });
      }
      const task: TranscribeTask = {
        kind: 'transcribe',
        model,
        audio: Buffer.from(action.audio.buffer, action.audio.byteOffset, action.audio.byteLength).toString('base64'),
        language: action.language,
        prompt: action.prompt === '' ? null : action.prompt,
        translate: false,
        wordTimestamps: false,
        temperature: 0,
      };
      for await (const event of this.deps.dispatcher.run(task, this.controller.signal)) {
        if (event.type === 'transcript') {
          this.input({ kind: 'transcribed', itemId: action.itemId, text: event.text, durationS: event.durationS });
          return;
        }
      }
      throw new ShoalError('INTERNAL', 'the transcription ended without its transcript');
    } catch (error) {
      if (this.controller.signal.aborted) return;
      this.input({ kind: 'transcription-failed', itemId: action.itemId, error: failureOf(error) });
    }
  }

  private respond(responseId: string, chat: ChatTask): void {
    const controller = new AbortController();
    const signal = AbortSignal.any([this.controller.signal, controller.signal]);
    this.responses.set(responseId, { controller, speech: Promise.resolve() });
    void (async () => {
      try {
        const task = generateTask({ model: chat.model, prompt: { kind: 'chat', messages: chat.messages }, sampling: { maxTokens: chat.maxTokens, temperature: REPLY_TEMPERATURE } });
        for await (const event of this.deps.dispatcher.run(task, signal)) {
          if (event.type === 'text') this.input({ kind: 'response-text', responseId, delta: event.text });
          else if (event.type === 'end') {
            this.input({ kind: 'response-end', responseId, incomplete: event.finishReason === 'length', promptTokens: event.usage.promptTokens, completionTokens: event.usage.completionTokens });
          }
        }
        // The end queued the last sentence: once the voice has spoken it, nothing refers to the response.
        const running = this.responses.get(responseId);
        await running?.speech;
        if (running !== undefined && this.responses.get(responseId) === running) this.responses.delete(responseId);
      } catch (error) {
        if (signal.aborted) return;
        this.input({ kind: 'response-failed', responseId, error: failureOf(error) });
      }
    })();
  }

  /** Speaks a response's sentences one after another, in order, streaming each one's audio. */
  private speak(action: Extract<Action, { kind: 'speak' }>): void {
    const running = this.responses.get(action.responseId);
    if (running === undefined) return;
    const signal = AbortSignal.any([this.controller.signal, running.controller.signal]);
    running.speech = running.speech.then(async () => {
      if (signal.aborted) return;
      try {
        const chunks = await this.deps.speech.synthesize({ text: action.text, voice: action.voice, speed: action.speed, format: 'pcm' }, signal);
        let carry: Buffer | null = null;
        for await (const chunk of chunks) {
          let bytes = Buffer.from(chunk.bytes.buffer, chunk.bytes.byteOffset, chunk.bytes.byteLength);
          if (carry !== null) bytes = Buffer.concat([carry, bytes]);
          // A delta carries whole 16-bit samples.
          const whole = bytes.length - (bytes.length % 2);
          carry = whole < bytes.length ? bytes.subarray(whole) : null;
          if (whole === 0) continue;
          while (this.ws.bufferedAmount > AUDIO_HIGH_WATER_BYTES && !signal.aborted) await sleep(DRAIN_POLL_MS, undefined, { signal }).catch(() => undefined);
          if (signal.aborted) return;
          this.input({ kind: 'response-audio', responseId: action.responseId, audio: bytes.subarray(0, whole).toString('base64') });
        }
        this.input({ kind: 'spoken', responseId: action.responseId });
      } catch (error) {
        if (signal.aborted) return;
        this.input({ kind: 'response-failed', responseId: action.responseId, error: failureOf(error) });
      }
    });
  }
}

function resamplerFor(rateHz: number): Resampler | null {
  return rateHz === TRANSCRIBE_SAMPLE_RATE ? null : new Resampler(rateHz, TRANSCRIBE_SAMPLE_RATE);
}

/** The first speech-to-text model listed: what a session transcribes with when it names none. */
export function defaultTranscriptionModel(dispatcher: Dispatcher): string | null {
  return dispatcher.models().find((m) => m.capabilities.includes('transcription'))?.id ?? null;
}

/** Base64 PCM16 little-endian to samples, or what is wrong with it. */
export function decodePcm(base64: string): Int16Array | string {
  if (base64.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) return 'audio is standard base64 (A-Z a-z 0-9 + /, padded with =) of 16-bit little-endian PCM';
  const bytes = Buffer.from(base64, 'base64');
  if (bytes.length % 2 !== 0) return `audio is 16-bit PCM, an even number of bytes; this append has ${bytes.length}`;
  const samples = new Int16Array(bytes.length / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = bytes.readInt16LE(i * 2);
  return samples;
}
