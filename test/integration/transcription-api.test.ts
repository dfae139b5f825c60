// Speech to text across a real two-node cluster on loopback: the generated whisper model
// (`shoal/tiny-whisper`, random weights, loaded by the real whisper.cpp binding) is placed on one
// node and every request goes to the other, through the official `openai` client's multipart
// upload, so the audio is decoded on the receiving node and the transcription travels the data plane.
// The model's words are noise: what is checked is the route, each response format's shape, the
// audio's measured duration, and the typed refusals.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI, { APIError, toFile } from 'openai';
import { TINY_WHISPER_MODEL_ID } from '../../src/models/generate/builtin.js';
import { api } from '../support/control-api.js';
import { eventually, joinCluster, status } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { toneWav as wav } from '../support/audio.js';

async function refusal(call: Promise<unknown>): Promise<APIError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof APIError) return error;
    throw error;
  }
  assert.fail('the request was not refused');
}

describe('speech to text through the OpenAI routes of another node', { timeout: 240_000 }, () => {
  let a: TestNode;
  let b: TestNode;
  let client: OpenAI;
  const speech = (): Promise<Awaited<ReturnType<typeof toFile>>> => toFile(wav(2), 'speech.wav', { type: 'audio/wav' });

  before(async () => {
    [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'] }), startTestNode({ args: ['--name', 'beta'] })]);
    await joinCluster(a, b);
    const placed = await api<{ instance: { instanceId: string; placements: { nodeId: string }[] } }>(a, 'POST', '/place_instance', { model: TINY_WHISPER_MODEL_ID });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const holder = placed.body.instance.placements[0]!.nodeId;
    // Every request goes to the node that does not hold the model.
    const aId = (await status(a)).nodeId;
    const other = holder === aId ? b : a;
    await eventually('the whisper instance to be ready where it is placed', 60_000, async () => {
      const s = await status(other);
      return s.instances.find((i) => i.instanceId === placed.body.instance.instanceId)?.runners.some((r) => r.state === 'ready') ? true : undefined;
    });
    client = new OpenAI({ baseURL: `${other.url}/v1`, apiKey: 'x', maxRetries: 0 });
    // The receiving node sees the holder's runner as ready before it routes.
    await eventually('the model to be listed where the requests go', 20_000, async () => ((await client.models.list()).data.some((m) => m.id === TINY_WHISPER_MODEL_ID) ? true : undefined));
  });

  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
  });

  test('audio.transcriptions.create with a file answers json, and verbose_json says the duration, segments and words', async () => {
    const plain = await client.audio.transcriptions.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID });
    assert.equal(typeof plain.text, 'string');
    const verbose = await client.audio.transcriptions.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID, response_format: 'verbose_json', timestamp_granularities: ['word', 'segment'], language: 'en' });
    assert.equal(verbose.language, 'en');
    assert.ok(Math.abs(verbose.duration - 2) < 0.01, `the duration of the audio: ${verbose.duration}`);
    assert.ok(Array.isArray(verbose.segments) && Array.isArray(verbose.words));
    for (const segment of verbose.segments ?? []) assert.ok(segment.start >= 0 && segment.end >= segment.start && segment.end <= 2.01, JSON.stringify(segment));
  });

  test('text, srt and vtt come back as text; translations take the same upload', async () => {
    const text = await client.audio.transcriptions.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID, response_format: 'text' });
    assert.equal(typeof text, 'string');
    const vtt = await client.audio.transcriptions.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID, response_format: 'vtt' });
    assert.match(String(vtt), /^WEBVTT/);
    const srt = await client.audio.transcriptions.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID, response_format: 'srt' });
    assert.equal(typeof srt, 'string');
    const translated = await client.audio.translations.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID });
    assert.equal(typeof translated.text, 'string');
  });

  test('bad uploads get a 400 naming the field, a text model a model_not_supported, an unknown one a 404; the model serves on', async () => {
    const notAudio = await refusal(client.audio.transcriptions.create({ file: await toFile(Buffer.from('%PDF-1.7 not a recording at all'), 'x.wav'), model: TINY_WHISPER_MODEL_ID }));
    assert.equal(notAudio.status, 400);
    assert.equal(notAudio.param, 'file');
    const truncated = await refusal(client.audio.transcriptions.create({ file: await toFile(wav(2).subarray(0, 30), 'cut.wav'), model: TINY_WHISPER_MODEL_ID }));
    assert.equal(truncated.status, 400);
    assert.equal(truncated.param, 'file');
    const words = await refusal(client.audio.transcriptions.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID, timestamp_granularities: ['word'] }));
    assert.equal(words.status, 400);
    assert.equal(words.param, 'timestamp_granularities[]');
    const format = await refusal(client.audio.transcriptions.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID, response_format: 'xml' as 'json' }));
    assert.equal(format.status, 400);
    assert.equal(format.param, 'response_format');
    const textModel = await refusal(client.audio.transcriptions.create({ file: await speech(), model: 'shoal/tiny' }));
    assert.equal(textModel.status, 400);
    assert.equal(textModel.code, 'model_not_supported');
    const unknown = await refusal(client.audio.transcriptions.create({ file: await speech(), model: 'nobody/nothing' }));
    assert.equal(unknown.status, 404);

    const base = client.baseURL;
    const json = await fetch(`${base}/audio/transcriptions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: TINY_WHISPER_MODEL_ID }) });
    assert.equal(json.status, 400);
    assert.match(((await json.json()) as { error: { message: string } }).error.message, /multipart\/form-data/);
    const form = new FormData();
    form.set('model', TINY_WHISPER_MODEL_ID);
    const noFile = await fetch(`${base}/audio/transcriptions`, { method: 'POST', body: form });
    assert.equal(noFile.status, 400);
    assert.equal(((await noFile.json()) as { error: { param: string } }).error.param, 'file');
    const big = new FormData();
    big.set('model', TINY_WHISPER_MODEL_ID);
    big.set('file', new Blob([Buffer.alloc(26 * 1024 * 1024)]), 'big.wav');
    const tooBig = await fetch(`${base}/audio/transcriptions`, { method: 'POST', body: big });
    assert.equal(tooBig.status, 413);

    const again = await client.audio.transcriptions.create({ file: await speech(), model: TINY_WHISPER_MODEL_ID });
    assert.equal(typeof again.text, 'string', 'the model still serves after the refusals');
  });
});
