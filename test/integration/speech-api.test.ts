import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI, { APIError } from 'openai';
import { assertOpenAIShape } from '../support/openai-schema.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { parseWav, pcmFromLE, rms, walkMp3, flacStreamInfo } from '../support/audio.js';

const VOICE_MODEL = 'shoal/voice';
const TEXT_MODEL = 'shoal/tiny';
const SENTENCE = 'Shoal speaks with a voice that needs no download. ';

let node: TestNode;
let client: OpenAI;

before(async () => {
  node = await startTestNode();
  client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'not-needed', maxRetries: 0 });
});

after(async () => {
  await node?.stop();
});

function post(body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<Response> {
  return fetch(`${node.url}/v1/audio/speech`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body), ...(signal ? { signal } : {}) });
}

/** Reads a streamed body, noting when its first bytes came and when it ended. */
async function timedRead(res: Response, startedAt: number): Promise<{ bytes: Buffer; firstMs: number; totalMs: number; chunks: number }> {
  const reader = res.body!.getReader();
  const parts: Uint8Array[] = [];
  let firstMs = -1;
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    if (firstMs < 0) firstMs = performance.now() - startedAt;
    parts.push(next.value);
  }
  return { bytes: Buffer.concat(parts), firstMs, totalMs: performance.now() - startedAt, chunks: parts.length };
}

describe('text to speech on a real node (POST /v1/audio/speech)', () => {
  test('the voice is listed in /v1/models beside the text model, and retrievable', async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id).sort(), [TEXT_MODEL, VOICE_MODEL].sort());
    const voice = await client.models.retrieve(VOICE_MODEL);
    assertOpenAIShape('Model', voice);
    assert.equal(voice.id, VOICE_MODEL);
  });

  test("the official client's audio.speech.create returns spoken mp3 (its default format)", async () => {
    const res = await client.audio.speech.create({ model: VOICE_MODEL, voice: 'alloy', input: 'hello' });
    assert.equal(res.headers.get('content-type'), 'audio/mpeg');
    const mp3 = walkMp3(new Uint8Array(await res.arrayBuffer()));
    assert.equal(mp3.sampleRate, 24_000);
    assert.ok(mp3.durationS > 0.3 && mp3.durationS < 3, `'hello' lasts ${mp3.durationS} s`);
  });

  test('wav, flac and pcm come back in their formats with real speech at 24 kHz; speed changes the length', async () => {
    const wavRes = await client.audio.speech.create({ model: VOICE_MODEL, voice: 'nova', input: SENTENCE, response_format: 'wav' });
    assert.equal(wavRes.headers.get('content-type'), 'audio/wav');
    const wav = parseWav(new Uint8Array(await wavRes.arrayBuffer()));
    assert.equal(wav.sampleRate, 24_000);
    assert.ok(rms(wav.samples) > 0.03, `RMS ${rms(wav.samples)}`);
    const flac = flacStreamInfo(new Uint8Array(await (await client.audio.speech.create({ model: VOICE_MODEL, voice: 'nova', input: SENTENCE, response_format: 'flac' })).arrayBuffer()));
    assert.equal(flac.sampleRate, 24_000);
    assert.ok(Math.abs(flac.totalSamples - wav.samples.length) < 24_000 * 0.2, 'flac and wav hold the same speech');
    const seconds = async (speed: number): Promise<number> => {
      const res = await client.audio.speech.create({ model: VOICE_MODEL, voice: 'echo', input: SENTENCE, response_format: 'pcm', speed });
      return pcmFromLE(new Uint8Array(await res.arrayBuffer())).length / 24_000;
    };
    const fast = await seconds(2);
    const slow = await seconds(0.5);
    assert.ok(fast < slow * 0.4, `speed 2: ${fast} s, speed 0.5: ${slow} s`);
  });

  test('the audio streams: bytes arrive long before the end of a long input', async () => {
    const startedAt = performance.now();
    const res = await post({ model: VOICE_MODEL, voice: 'alloy', input: SENTENCE.repeat(40).slice(0, 2000), response_format: 'pcm' });
    assert.equal(res.status, 200);
    const read = await timedRead(res, startedAt);
    const audioS = pcmFromLE(read.bytes).length / 24_000;
    assert.ok(read.chunks > 5, `${read.chunks} chunks`);
    assert.ok(read.firstMs < read.totalMs / 3, `first bytes at ${read.firstMs.toFixed(0)} ms of ${read.totalMs.toFixed(0)} ms`);
    console.log(`# 2000 characters: ${audioS.toFixed(1)} s of audio in ${read.totalMs.toFixed(0)} ms (${(audioS / (read.totalMs / 1000)).toFixed(0)} audio s per s), first bytes at ${read.firstMs.toFixed(0)} ms`);
  });

  test('stream_format sse sends speech.audio.delta events with base64 audio, then speech.audio.done', async () => {
    const res = await client.audio.speech.create({ model: VOICE_MODEL, voice: 'shimmer', input: SENTENCE.repeat(3), response_format: 'pcm', stream_format: 'sse' });
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = (await res.text()).split('\n\n').filter((block) => block.startsWith('data: ')).map((block) => JSON.parse(block.slice(6)) as { type: string; audio?: string });
    const deltas = events.filter((e) => e.type === 'speech.audio.delta');
    assert.ok(deltas.length > 1, `${deltas.length} deltas`);
    assert.equal(events.at(-1)?.type, 'speech.audio.done');
    assert.equal(events.length, deltas.length + 1);
    const audio = pcmFromLE(Buffer.concat(deltas.map((d) => Buffer.from(d.audio!, 'base64'))));
    assert.ok(audio.length / 24_000 > 3 && rms(audio) > 0.03, `${audio.length / 24_000} s of audio`);
  });

  test('a client that disconnects mid-stream stops its synthesis: the next request is not held up', async () => {
    const controller = new AbortController();
    const res = await post({ model: VOICE_MODEL, voice: 'alloy', input: SENTENCE.repeat(80).slice(0, 4000), response_format: 'pcm', speed: 0.25 }, {}, controller.signal);
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    // Uncancelled, that input keeps the voice busy for seconds (about 500 s of audio).
    const startedAt = performance.now();
    const next = await post({ model: VOICE_MODEL, voice: 'alloy', input: 'Next.', response_format: 'wav' });
    assert.equal(next.status, 200);
    assert.ok(rms(parseWav(new Uint8Array(await next.arrayBuffer())).samples) > 0.02);
    const waitedMs = performance.now() - startedAt;
    assert.ok(waitedMs < 1500, `the next request took ${waitedMs.toFixed(0)} ms`);
  });

  test('every bad request gets its status and an OpenAI error naming the parameter', async () => {
    const ok = { model: VOICE_MODEL, voice: 'alloy', input: 'hi' };
    const cases: [string, unknown, number, string | null, string | null, RegExp?][] = [
      ['missing input', { model: VOICE_MODEL, voice: 'alloy' }, 400, 'input', null],
      ['empty input', { ...ok, input: '' }, 400, 'input', null],
      ['input too long', { ...ok, input: 'a'.repeat(4097) }, 400, 'input', null, /4097 characters.*4096/],
      ['speed too high', { ...ok, speed: 4.5 }, 400, 'speed', null],
      ['speed too low', { ...ok, speed: 0.1 }, 400, 'speed', null],
      ['speed not a number', { ...ok, speed: 'fast' }, 400, 'speed', null],
      ['unknown voice', { ...ok, voice: 'klingon' }, 400, 'voice', null, /alloy/],
      ['missing voice', { model: VOICE_MODEL, input: 'hi' }, 400, 'voice', null],
      ['unknown model', { ...ok, model: 'tts-9' }, 404, 'model', 'model_not_found', /shoal\/voice/],
      ['a text model', { ...ok, model: TEXT_MODEL }, 400, 'model', 'model_not_supported', /text model/],
      ['opus', { ...ok, response_format: 'opus' }, 400, 'response_format', 'unsupported_parameter', /mp3, wav, flac, pcm/],
      ['aac', { ...ok, response_format: 'aac' }, 400, 'response_format', 'unsupported_parameter', /mp3, wav, flac, pcm/],
      ['an unknown format', { ...ok, response_format: 'ogg' }, 400, 'response_format', null],
      ['an unknown stream format', { ...ok, stream_format: 'chunks' }, 400, 'stream_format', null],
      ['an unknown parameter', { ...ok, temperature: 1 }, 400, 'temperature', 'unsupported_parameter'],
      ['not JSON', '{"model":', 400, null, null],
    ];
    for (const [name, body, status, param, code, message] of cases) {
      const res = await post(body);
      const json = (await res.json()) as { error: { message: string; type: string; param: string | null; code: string | null } };
      assert.equal(res.status, status, `${name}: ${JSON.stringify(json)}`);
      assertOpenAIShape('ErrorResponse', json);
      assert.equal(json.error.type, 'invalid_request_error', name);
      assert.equal(json.error.param, param, `${name}: ${JSON.stringify(json)}`);
      assert.equal(json.error.code, code, `${name}: ${JSON.stringify(json)}`);
      if (message) assert.match(json.error.message, message, name);
    }
    await assert.rejects(client.audio.speech.create({ model: VOICE_MODEL, voice: 'alloy', input: 'hi', response_format: 'opus' }), (e: unknown) => e instanceof APIError && e.status === 400);
  });
});

describe('text to speech behind an API key', () => {
  test('the route wants the key, as /v1/chat/completions does', async () => {
    await using locked = await startTestNode({ args: ['--api-key', 'secret'] });
    const body = JSON.stringify({ model: VOICE_MODEL, voice: 'alloy', input: 'hi' });
    const noKey = await fetch(`${locked.url}/v1/audio/speech`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    assert.equal(noKey.status, 401);
    assertOpenAIShape('ErrorResponse', await noKey.json());
    const withKey = await fetch(`${locked.url}/v1/audio/speech`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer secret' }, body });
    assert.equal(withKey.status, 200);
    assert.ok(walkMp3(new Uint8Array(await withKey.arrayBuffer())).frames > 3);
  });
});
