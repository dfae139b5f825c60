import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { isShoalError, type ErrorCode } from '../common/errors.js';
import { createLogger } from '../common/log.js';
import type { SpeechRequest } from '../api/speech-port.js';
import { flacStreamInfo, parseWav, pcmFromLE, rms, walkMp3 } from '../../test/support/audio.js';
import { EspeakVoice, OUTPUT_SAMPLE_RATE_HZ } from './espeak-voice.js';
import { OPENAI_VOICES } from './voices.js';

const log = createLogger({ level: 'silent' });
const voice = new EspeakVoice({ log });
after(() => voice[Symbol.asyncDispose]());

const SENTENCE = 'The quick brown fox jumps over the lazy dog. ';
const open = (): AbortSignal => new AbortController().signal;

async function speak(request: Partial<SpeechRequest>, engine = voice, signal = open()): Promise<Uint8Array> {
  const chunks = await engine.synthesize({ text: SENTENCE, voice: 'alloy', speed: 1, format: 'wav', ...request }, signal);
  const parts: Uint8Array[] = [];
  for await (const chunk of chunks) parts.push(chunk.bytes);
  return Buffer.concat(parts);
}

const seconds = (wav: Uint8Array): number => {
  const { sampleRate, samples } = parseWav(wav);
  return samples.length / sampleRate;
};

function failsWith(code: ErrorCode, param?: string) {
  return (error: unknown): boolean => {
    assert.ok(isShoalError(error), String(error));
    assert.equal(error.code, code, error.message);
    if (param !== undefined) assert.equal(error.param, param);
    return true;
  };
}

test('the voice speaks: a 24 kHz WAV, loud enough, its length growing with the text', async () => {
  const one = parseWav(await speak({ text: SENTENCE }));
  assert.equal(one.sampleRate, OUTPUT_SAMPLE_RATE_HZ);
  const oneS = one.samples.length / one.sampleRate;
  assert.ok(oneS > 1.5 && oneS < 5, `one sentence lasts ${oneS} s`);
  assert.ok(rms(one.samples) > 0.03, `RMS ${rms(one.samples)}: not silence`);
  const fourS = seconds(await speak({ text: SENTENCE.repeat(4) }));
  assert.ok(fourS / oneS > 3 && fourS / oneS < 5, `four sentences ${fourS} s against one ${oneS} s`);
});

test('speed 2 gives a clearly shorter clip than speed 0.5', async () => {
  const fast = seconds(await speak({ text: SENTENCE.repeat(2), speed: 2 }));
  const slow = seconds(await speak({ text: SENTENCE.repeat(2), speed: 0.5 }));
  assert.ok(fast < slow * 0.4, `speed 2: ${fast} s, speed 0.5: ${slow} s`);
});

test('mp3 is a chain of valid MPEG layer III frames at 24 kHz as long as the speech', async () => {
  const wavS = seconds(await speak({}));
  const mp3 = walkMp3(await speak({ format: 'mp3' }));
  assert.equal(mp3.sampleRate, OUTPUT_SAMPLE_RATE_HZ);
  assert.ok(Math.abs(mp3.durationS - wavS) < 0.5, `mp3 ${mp3.durationS} s, wav ${wavS} s`);
});

test('flac and pcm are 24 kHz mono 16-bit and hold real sound', async () => {
  const flac = flacStreamInfo(await speak({ format: 'flac' }));
  assert.equal(flac.sampleRate, OUTPUT_SAMPLE_RATE_HZ);
  assert.equal(flac.channels, 1);
  assert.equal(flac.bitsPerSample, 16);
  assert.ok(flac.totalSamples / OUTPUT_SAMPLE_RATE_HZ > 1.5, `flac: ${flac.totalSamples} samples`);
  const pcm = pcmFromLE(await speak({ format: 'pcm' }));
  assert.ok(pcm.length / OUTPUT_SAMPLE_RATE_HZ > 1.5 && rms(pcm) > 0.03);
});

test('every OpenAI voice speaks, and they do not all sound alike', async () => {
  const energies = new Set<string>();
  for (const name of Object.keys(OPENAI_VOICES)) {
    const { samples } = parseWav(await speak({ text: 'Hello there.', voice: name }));
    assert.ok(rms(samples) > 0.02, `${name} speaks`);
    energies.add(`${samples.length}:${rms(samples).toFixed(4)}`);
  }
  assert.ok(energies.size >= Object.keys(OPENAI_VOICES).length - 2, `${energies.size} distinct clips`);
  assert.ok(rms(parseWav(await speak({ text: 'Guten Tag.', voice: 'de' })).samples) > 0.02, 'an eSpeak NG voice by language');
});

test('an unknown voice or variant and an unwritten format are refused before any audio', async () => {
  await assert.rejects(voice.synthesize({ text: 'hi', voice: 'klingon', speed: 1, format: 'wav' }, open()), failsWith('BAD_REQUEST', 'voice'));
  await assert.rejects(voice.synthesize({ text: 'hi', voice: 'en-us+nothing', speed: 1, format: 'wav' }, open()), failsWith('BAD_REQUEST', 'voice'));
  for (const format of ['opus', 'aac'] as const) {
    await assert.rejects(voice.synthesize({ text: 'hi', voice: 'alloy', speed: 1, format }, open()), (error: unknown) => {
      failsWith('UNSUPPORTED_PARAMETER', 'response_format')(error);
      assert.match((error as Error).message, /mp3, wav, flac, pcm/);
      return true;
    });
  }
});

test('audio past the limit ends the synthesis with a BAD_REQUEST', async () => {
  const short = new EspeakVoice({ log, maxAudioS: 1 });
  try {
    await assert.rejects(speak({ text: SENTENCE.repeat(3) }, short), failsWith('BAD_REQUEST', 'input'));
  } finally {
    await short[Symbol.asyncDispose]();
  }
});

test('a full queue answers QUEUE_FULL; a cancelled request, running or queued, ends and the next one runs', async () => {
  const small = new EspeakVoice({ log, maxQueued: 1 });
  try {
    const long = SENTENCE.repeat(80);
    const running = new AbortController();
    const first = await small.synthesize({ text: long, voice: 'alloy', speed: 1, format: 'pcm' }, running.signal);
    const queued = new AbortController();
    const second = await small.synthesize({ text: long, voice: 'alloy', speed: 1, format: 'pcm' }, queued.signal);
    // The first runs at once and the second waits, so the queue of one is full.
    await assert.rejects(small.synthesize({ text: 'hi', voice: 'alloy', speed: 1, format: 'pcm' }, open()), failsWith('QUEUE_FULL'));
    queued.abort();
    await assert.rejects(async () => {
      for await (const _ of second) void _;
    }, failsWith('CANCELLED'));
    const iterator = first[Symbol.asyncIterator]();
    assert.equal((await iterator.next()).done, false, 'the first one produces audio');
    running.abort();
    await assert.rejects(async () => {
      for (let next = await iterator.next(); !next.done; next = await iterator.next());
    }, failsWith('CANCELLED'));
    const after = parseWav(await speak({ text: 'Still here.' }, small));
    assert.ok(rms(after.samples) > 0.02, 'the voice speaks after the cancels');
  } finally {
    await small[Symbol.asyncDispose]();
  }
});

test('the event loop keeps turning while a long text is synthesized', async () => {
  let worstGapMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    worstGapMs = Math.max(worstGapMs, now - last);
    last = now;
  }, 5);
  try {
    const pcm = pcmFromLE(await speak({ text: SENTENCE.repeat(60), format: 'pcm' }));
    assert.ok(pcm.length / OUTPUT_SAMPLE_RATE_HZ > 60, 'a minute and more of audio');
  } finally {
    clearInterval(timer);
  }
  assert.ok(worstGapMs < 150, `the longest the loop stood still: ${worstGapMs.toFixed(0)} ms`);
});

test('disposing ends a running synthesis with RUNNER_STOPPED and refuses new ones', async () => {
  const engine = new EspeakVoice({ log });
  const chunks = await engine.synthesize({ text: SENTENCE.repeat(80), voice: 'alloy', speed: 1, format: 'pcm' }, open());
  const iterator = chunks[Symbol.asyncIterator]();
  await iterator.next();
  await engine[Symbol.asyncDispose]();
  await assert.rejects(async () => {
    for (let next = await iterator.next(); !next.done; next = await iterator.next());
  }, failsWith('RUNNER_STOPPED'));
  await assert.rejects(engine.synthesize({ text: 'hi', voice: 'alloy', speed: 1, format: 'pcm' }, open()), failsWith('RUNNER_STOPPED'));
});
