// `WS /v1/realtime` on a real node, driven by the official `openai` client's OpenAIRealtimeWS: real
// speech (the built-in voice's own PCM) through the real WebRTC detector, the generated whisper model
// and the default text model, and the reply spoken by the voice. The models have random weights, so
// what is checked is the events, their order and ids, and that the reply's audio is not silence.

import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import WebSocket from 'ws';
import { TINY_MODEL_ID, TINY_WHISPER_MODEL_ID } from '../../src/models/generate/builtin.js';
import { pcmFromLE, rms } from '../support/audio.js';
import { api } from '../support/control-api.js';
import { eventually, status } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

type Event = { type: string; [key: string]: unknown };

/** 24 kHz PCM16 samples per 100 ms: how a microphone client sends audio. */
const CHUNK_SAMPLES = 2400;

let node: TestNode;
let client: OpenAI;
/** The voice saying a sentence, 24 kHz PCM16, then 1.5 s of silence: a turn the detector must find. */
let turn: Int16Array;

/**
 * The SDK always builds a wss:// URL from baseURL; the node here speaks plain HTTP, so the socket's
 * connection is a plain TCP one (ws's createConnection), with everything above it the SDK's own.
 */
const plainTcp = { createConnection: (options: { host?: string; port?: number | string }) => connect(Number(options.port), options.host ?? '127.0.0.1') };

class Session {
  readonly events: Event[] = [];
  private waiters: (() => void)[] = [];
  readonly rt: OpenAIRealtimeWS;

  constructor(model: string) {
    this.rt = new OpenAIRealtimeWS({ model, options: plainTcp as never }, client);
    this.rt.on('event', (event) => {
      this.events.push(event as unknown as Event);
      for (const wake of this.waiters.splice(0)) wake();
    });
    // Error events are expected in some tests; they are in `events` too.
    this.rt.on('error', () => undefined);
  }

  async opened(): Promise<void> {
    if (this.rt.socket.readyState === WebSocket.OPEN) return;
    await new Promise<void>((resolve, reject) => {
      this.rt.socket.once('open', () => resolve());
      this.rt.socket.once('error', reject);
    });
  }

  send(event: Record<string, unknown>): void {
    this.rt.send(event as never);
  }

  /** The first event of `type` at or after index `from` that satisfies `match`. */
  async next(type: string, match: (event: Event) => boolean = () => true, from = 0, timeoutMs = 30_000): Promise<Event> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.slice(from).find((e) => e.type === type && match(e));
      if (found) return found;
      const left = deadline - Date.now();
      if (left <= 0) assert.fail(`no ${type} within ${timeoutMs} ms; got ${this.events.map((e) => e.type).join(', ')}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  appendAudio(samples: Int16Array): void {
    for (let i = 0; i < samples.length; i += CHUNK_SAMPLES) {
      const chunk = samples.subarray(i, i + CHUNK_SAMPLES);
      this.send({ type: 'input_audio_buffer.append', audio: Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('base64') });
    }
  }

  index(event: Event): number {
    return this.events.indexOf(event);
  }

  close(): void {
    this.rt.close();
  }
}

async function inFlight(): Promise<number> {
  const text = await (await fetch(`${node.url}/metrics`)).text();
  return Number(/^shoal_requests_in_flight (\d+)/m.exec(text)?.[1] ?? NaN);
}

describe('the realtime WebSocket with the OpenAI client', { timeout: 180_000 }, () => {
  before(async () => {
    node = await startTestNode();
    client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'not-needed', maxRetries: 0 });
    const placed = await api<{ instance: { instanceId: string } }>(node, 'POST', '/place_instance', { model: TINY_WHISPER_MODEL_ID });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const speech = await fetch(`${node.url}/v1/audio/speech`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'shoal/voice', voice: 'alloy', input: 'Hello there. How is the weather today?', response_format: 'pcm' }),
    });
    assert.equal(speech.status, 200);
    const voice = pcmFromLE(new Uint8Array(await speech.arrayBuffer()));
    turn = new Int16Array(voice.length + 36_000);
    turn.set(voice);
    await eventually('the whisper instance to be ready', 60_000, async () => {
      const s = await status(node);
      return s.instances.find((i) => i.instanceId === placed.body.instance.instanceId)?.runners.some((r) => r.state === 'ready') ? true : undefined;
    });
    await eventually('both models to be listed', 20_000, async () => {
      const ids = (await client.models.list()).data.map((m) => m.id);
      return ids.includes(TINY_WHISPER_MODEL_ID) && ids.includes(TINY_MODEL_ID) ? true : undefined;
    });
  });

  after(async () => {
    await node?.stop();
  });

  test('a transcription session finds the turn in the audio and transcribes it', async () => {
    const s = new Session(TINY_WHISPER_MODEL_ID);
    await s.opened();
    const created = await s.next('session.created');
    assert.equal((created.session as { type: string }).type, 'transcription');
    s.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { transcription: { model: TINY_WHISPER_MODEL_ID, language: 'en' }, turn_detection: { type: 'server_vad', silence_duration_ms: 400 } } } } });
    await s.next('session.updated');
    s.appendAudio(turn);
    const started = await s.next('input_audio_buffer.speech_started');
    const stopped = await s.next('input_audio_buffer.speech_stopped');
    const committed = await s.next('input_audio_buffer.committed');
    const done = await s.next('conversation.item.input_audio_transcription.completed', undefined, 0, 60_000);
    assert.equal(stopped.item_id, started.item_id);
    assert.equal(committed.item_id, started.item_id);
    assert.equal(done.item_id, started.item_id);
    assert.ok(s.index(started) < s.index(stopped) && s.index(stopped) < s.index(committed) && s.index(committed) < s.index(done));
    assert.ok((stopped.audio_end_ms as number) > (started.audio_start_ms as number) + 500, JSON.stringify([started, stopped]));
    assert.equal(typeof done.transcript, 'string');
    assert.equal((done.usage as { type: string }).type, 'duration');
    const item = await s.next('conversation.item.done', (e) => (e.item as { id: string }).id === started.item_id);
    assert.equal((item.item as { role: string }).role, 'user');
    assert.equal(s.events.filter((e) => e.type === 'response.created').length, 0, 'a transcription session makes no response');
    s.close();
  });

  test('a voice loop transcribes the turn, answers with the chat model and speaks the answer', async () => {
    const s = new Session(TINY_MODEL_ID);
    await s.opened();
    const created = await s.next('session.created');
    assert.equal((created.session as { type: string; model: string }).type, 'realtime');
    assert.equal((created.session as { model: string }).model, TINY_MODEL_ID);
    s.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Answer in one short sentence.', max_output_tokens: 24, audio: { input: { turn_detection: { type: 'server_vad', silence_duration_ms: 400 } }, output: { voice: 'alloy' } } } });
    await s.next('session.updated');
    s.appendAudio(turn);
    const committed = await s.next('input_audio_buffer.committed');
    await s.next('conversation.item.input_audio_transcription.completed', (e) => e.item_id === committed.item_id, 0, 60_000);
    const created2 = await s.next('response.created');
    const responseId = (created2.response as { id: string }).id;
    const done = await s.next('response.done', undefined, 0, 90_000);
    const response = done.response as { id: string; status: string; output: { content: { transcript: string }[] }[]; usage: { output_tokens: number } };
    assert.equal(response.id, responseId);
    assert.ok(['completed', 'incomplete'].includes(response.status), JSON.stringify(done));
    const deltas = s.events.filter((e) => e.type === 'response.output_audio_transcript.delta');
    assert.ok(deltas.length > 0, 'the reply text streams as transcript deltas');
    const transcript = deltas.map((e) => e.delta).join('');
    assert.equal(response.output[0]!.content[0]!.transcript, transcript);
    assert.equal((await s.next('response.output_audio_transcript.done')).transcript, transcript);
    const audio = Buffer.concat(s.events.filter((e) => e.type === 'response.output_audio.delta').map((e) => Buffer.from(e.delta as string, 'base64')));
    assert.ok(audio.length > 24_000 * 2 * 0.2, `at least 0.2 s of speech: ${audio.length} bytes`);
    const loudness = rms(pcmFromLE(new Uint8Array(audio)));
    assert.ok(loudness > 0.02, `the spoken reply is not silence: RMS ${loudness}`);
    const order = ['response.created', 'response.output_item.added', 'response.content_part.added', 'response.output_audio.delta', 'response.output_audio.done', 'response.content_part.done', 'response.output_item.done', 'response.done'].map(
      (type) => s.events.findIndex((e) => e.type === type),
    );
    assert.deepEqual([...order].sort((a, b) => a - b), order, `event order: ${s.events.map((e) => e.type).join(', ')}`);
    s.close();
  });

  test('without turn detection a manual commit is transcribed, and a text reply follows response.create', async () => {
    const s = new Session(TINY_MODEL_ID);
    await s.opened();
    s.send({ type: 'session.update', session: { type: 'realtime', output_modalities: ['text'], max_output_tokens: 8, audio: { input: { turn_detection: null } } } });
    const updated = await s.next('session.updated');
    assert.equal((updated.session as { audio: { input: { turn_detection: unknown } } }).audio.input.turn_detection, null);
    s.send({ type: 'input_audio_buffer.commit', event_id: 'too-soon' });
    const empty = await s.next('error');
    assert.equal((empty.error as { code: string; event_id: string }).code, 'input_audio_buffer_commit_empty');
    assert.equal((empty.error as { event_id: string }).event_id, 'too-soon');
    s.appendAudio(turn.subarray(0, 24_000));
    s.send({ type: 'input_audio_buffer.commit' });
    const committed = await s.next('input_audio_buffer.committed');
    await s.next('conversation.item.input_audio_transcription.completed', (e) => e.item_id === committed.item_id, 0, 60_000);
    assert.equal(s.events.filter((e) => e.type === 'input_audio_buffer.speech_started').length, 0, 'no turn detection ran');
    s.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Say hello.' }] } });
    await s.next('conversation.item.done', (e) => (e.item as { role: string }).role === 'user' && (e.item as { content: { type: string }[] }).content[0]!.type === 'input_text');
    s.send({ type: 'response.create' });
    const done = await s.next('response.done', undefined, 0, 60_000);
    const text = s.events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
    assert.equal((await s.next('response.output_text.done')).text, text);
    assert.equal(s.events.filter((e) => e.type === 'response.output_audio.delta').length, 0, 'a text reply has no audio');
    assert.ok(['completed', 'incomplete'].includes((done.response as { status: string }).status));
    s.close();
  });

  test('bad events are answered with error events and the session goes on', async () => {
    const s = new Session(TINY_MODEL_ID);
    await s.opened();
    await s.next('session.created');
    s.rt.socket.send('{not json');
    s.send({ type: 'no.such.event', event_id: 'e1' });
    s.send({ type: 'input_audio_buffer.append', audio: '%%%%', event_id: 'e2' });
    s.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(1_200_000).toString('base64'), event_id: 'e3' });
    s.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { format: { type: 'audio/pcmu' } } } }, event_id: 'e4' });
    s.send({ type: 'response.cancel', event_id: 'e5' });
    s.send({ type: 'input_audio_buffer.clear' });
    await s.next('input_audio_buffer.cleared');
    const errors = s.events.filter((e) => e.type === 'error').map((e) => e.error as { type: string; code: string | null; message: string; param: string | null; event_id: string | null });
    assert.equal(errors.length, 6, JSON.stringify(errors));
    assert.ok(errors.every((e) => e.type === 'invalid_request_error' && e.message.length > 0));
    assert.deepEqual(
      errors.map((e) => e.event_id),
      // An oversized message is not parsed, so its event_id is not known.
      [null, 'e1', 'e2', null, 'e4', 'e5'],
    );
    assert.equal(errors[1]!.param, 'type');
    assert.equal(errors[2]!.param, 'audio');
    assert.equal(errors[3]!.code, 'message_too_large');
    assert.match(errors[4]!.message, /audio\/pcm/);
    assert.equal(errors[5]!.code, 'response_cancel_not_active');
    s.close();
  });

  test('an upgrade from a foreign web origin or to a foreign Host is refused with 403 before it opens', async () => {
    const url = `ws://127.0.0.1:${node.port}/v1/realtime?model=${TINY_MODEL_ID}`;
    const refused = (options: WebSocket.ClientOptions): Promise<number> =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(url, options);
        ws.once('unexpected-response', (_request, response) => {
          resolve(response.statusCode ?? 0);
          ws.terminate();
        });
        ws.once('open', () => reject(new Error('the socket opened')));
        ws.once('error', () => undefined);
      });
    assert.equal(await refused({ origin: 'https://evil.example' }), 403);
    assert.equal(await refused({ headers: { host: 'evil.example' } }), 403);
    // A loopback page (a local app, the dashboard) is let in.
    const local = new WebSocket(url, { origin: `http://localhost:${node.port}` });
    await new Promise<void>((resolve, reject) => {
      local.once('open', () => resolve());
      local.once('error', reject);
    });
    local.close();
  });

  test("a browser's subprotocols are answered with 'realtime', and a ninth session is refused with 429 before it opens", async () => {
    const url = `ws://127.0.0.1:${node.port}/v1/realtime?model=${TINY_MODEL_ID}`;
    const opened = (protocols: string[] = []): Promise<WebSocket> =>
      new Promise((resolve, reject) => {
        const ws = new WebSocket(url, protocols);
        ws.once('open', () => resolve(ws));
        ws.once('error', reject);
      });
    const browser = await opened(['realtime', 'openai-insecure-api-key.not-needed']);
    assert.equal(browser.protocol, 'realtime');
    const sessions = [browser, ...(await Promise.all(Array.from({ length: 7 }, () => opened())))];
    const status = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.once('unexpected-response', (_request, response) => {
        resolve(response.statusCode ?? 0);
        ws.terminate();
      });
      ws.once('open', () => reject(new Error('a ninth session opened')));
      ws.once('error', () => undefined);
    });
    assert.equal(status, 429);
    await Promise.all(sessions.map((ws) => new Promise((resolve) => ws.once('close', resolve).close())));
    // A closed session frees its place.
    (await eventually('a place to free', 5000, async () => opened().catch(() => undefined))).close();
  });

  test('closing the socket mid-reply cancels the chat task and the speech, and the node serves at once', async () => {
    const s = new Session(TINY_MODEL_ID);
    await s.opened();
    s.send({ type: 'session.update', session: { type: 'realtime', instructions: 'Tell a very long story.', max_output_tokens: 4096, audio: { input: { turn_detection: null } } } });
    await s.next('session.updated');
    s.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Go on.' }] } });
    s.send({ type: 'response.create' });
    await s.next('response.output_audio_transcript.delta', undefined, 0, 60_000);
    assert.ok((await inFlight()) >= 1, 'the reply is being generated');
    s.close();
    await eventually('the reply to be cancelled', 10_000, async () => ((await inFlight()) === 0 ? true : undefined));
    const answer = await client.chat.completions.create({ model: TINY_MODEL_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
    assert.equal(answer.choices.length, 1);
  });
});
