import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ShoalError } from '../../common/errors.js';
import { ensureGeneratedWhisperModel, TINY_WHISPER_SPEC } from '../../models/generate/whisper-model.js';
import { STT_SAMPLE_RATE } from './audio.js';
import type { Transcript } from '../../wire/task.js';
import { WhisperEngine, windowBounds } from './whisper-engine.js';

let dir = '';
let modelPath = '';

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'whisper-engine-'));
  modelPath = await ensureGeneratedWhisperModel(TINY_WHISPER_SPEC, join(dir, 'tiny.bin'));
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A vowel-like buzz: a few harmonics of 150 Hz under a slow envelope. */
function waveform(seconds: number): Float32Array {
  const out = new Float32Array(Math.round(seconds * STT_SAMPLE_RATE));
  for (let i = 0; i < out.length; i++) {
    const t = i / STT_SAMPLE_RATE;
    const envelope = 0.5 + 0.5 * Math.sin(2 * Math.PI * 2 * t);
    out[i] = 0.3 * envelope * (Math.sin(2 * Math.PI * 150 * t) + 0.5 * Math.sin(2 * Math.PI * 300 * t) + 0.25 * Math.sin(2 * Math.PI * 450 * t));
  }
  return out;
}

function assertWellFormed(t: Transcript, durationS: number): void {
  assert.ok(Math.abs(t.durationS - durationS) < 1e-9, `duration ${t.durationS}`);
  assert.equal(typeof t.text, 'string');
  assert.match(t.language, /^[a-z]{2,3}$/);
  let previousStart = 0;
  for (const s of t.segments) {
    assert.equal(typeof s.text, 'string');
    assert.ok(s.startS >= 0 && s.startS <= s.endS && s.endS <= durationS + 1e-9, `segment ${JSON.stringify(s)}`);
    assert.ok(s.startS >= previousStart - 1e-9, 'segments in order');
    previousStart = s.startS;
    for (const w of s.words ?? []) {
      assert.ok(w.word.length > 0 && w.startS >= 0 && w.startS <= w.endS && w.endS <= durationS + 1e-9, `word ${JSON.stringify(w)}`);
    }
  }
  assert.equal(t.text, t.segments.map((s) => s.text).join('').trim());
}

test('the generated tiny model loads and transcribes 2 s of audio into a well-formed transcript', async () => {
  await using engine = await WhisperEngine.load(modelPath, { threads: 2 });
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  const started = Date.now();
  const transcript = await engine.transcribe(waveform(2), { translate: false, wordTimestamps: false, temperature: 0.5 });
  clearInterval(timer);
  assertWellFormed(transcript, 2);
  // The work ran off the event loop: the timer kept firing while it did.
  const elapsed = Date.now() - started;
  if (elapsed > 200) assert.ok(ticks > elapsed / 5 / 4, `${ticks} timer ticks in ${elapsed} ms`);

  const withWords = await engine.transcribe(waveform(2), { language: 'de', prompt: 'Hallo.', translate: true, wordTimestamps: true, temperature: 0.5 });
  assertWellFormed(withWords, 2);
  assert.equal(withWords.language, 'de');
  assert.equal(engine.multilingual, true);
  // Shorter than whisper's one-second minimum: padded, so it still gives a transcript.
  assertWellFormed(await engine.transcribe(waveform(0.4), { translate: false, wordTimestamps: false, temperature: 0.5 }), 0.4);
  for (const s of withWords.segments) assert.ok(Array.isArray(s.words));
});

test('an abort mid-way rejects CANCELLED at once, and the engine works after it', async () => {
  await using engine = await WhisperEngine.load(modelPath, { threads: 2 });
  const controller = new AbortController();
  const long = engine.transcribe(waveform(70), { translate: false, wordTimestamps: false, signal: controller.signal });
  // Queued behind it, FIFO: runs once the aborted job's native call has ended.
  const next = engine.transcribe(waveform(1), { language: 'en', translate: false, wordTimestamps: false, temperature: 0.5 });
  setTimeout(() => controller.abort(), 100);
  const abortedAt = Date.now();
  await assert.rejects(long, (error: unknown) => error instanceof ShoalError && error.code === 'CANCELLED');
  assert.ok(Date.now() - abortedAt < 1000, 'the abort was answered at once');
  assertWellFormed(await next, 1);
  assertWellFormed(await engine.transcribe(waveform(1.5), { translate: false, wordTimestamps: false, temperature: 0.5 }), 1.5);

  const already = new AbortController();
  already.abort();
  await assert.rejects(engine.transcribe(waveform(1), { translate: false, wordTimestamps: false, signal: already.signal }), { code: 'CANCELLED' });
});

test('an unknown language is BAD_REQUEST; a non-whisper file is MODEL_FAILED', async () => {
  await using engine = await WhisperEngine.load(modelPath, { threads: 1 });
  await assert.rejects(engine.transcribe(waveform(1), { language: 'klingon', translate: false, wordTimestamps: false }), (error: unknown) => {
    assert.ok(error instanceof ShoalError);
    assert.equal(error.code, 'BAD_REQUEST');
    assert.equal(error.param, 'language');
    return true;
  });
  const bogus = join(dir, 'not-a-model.bin');
  await writeFile(bogus, 'GGUF but not really, just some bytes '.repeat(100));
  await assert.rejects(WhisperEngine.load(bogus, { threads: 1 }), (error: unknown) => {
    assert.ok(error instanceof ShoalError);
    assert.equal(error.code, 'MODEL_FAILED');
    assert.match(error.message, /not-a-model\.bin/);
    return true;
  });
  await assert.rejects(WhisperEngine.load(join(dir, 'missing.bin'), { threads: 1 }), { code: 'MODEL_FAILED' });
});

test('long audio is cut into windows of at most 30 s at its quietest moment', () => {
  const samples = waveform(65);
  // Silence at 27 s: the first cut lands there.
  samples.fill(0, 27 * STT_SAMPLE_RATE, 27 * STT_SAMPLE_RATE + 400);
  const bounds = windowBounds(samples);
  assert.equal(bounds[0]![0], 0);
  assert.ok(Math.abs(bounds[0]![1] - 27 * STT_SAMPLE_RATE) <= 400, `first cut at ${bounds[0]![1]}`);
  for (const [from, to] of bounds) assert.ok(to - from <= 30 * STT_SAMPLE_RATE && to > from);
  assert.equal(bounds.at(-1)![1], samples.length);
  for (let i = 1; i < bounds.length; i++) assert.equal(bounds[i]![0], bounds[i - 1]![1]);
  // 31 s: the last window keeps at least 2 s (whisper.cpp skips a final second).
  const short = windowBounds(waveform(31));
  assert.equal(short.length, 2);
  assert.ok(short[1]![1] - short[1]![0] >= 2 * STT_SAMPLE_RATE);
  assert.deepEqual(windowBounds(waveform(0.5)), [[0, 8000]]);
});
