import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createMp3Encoder, createOggEncoder } from 'wasm-media-encoders';
import { ShoalError } from '../../common/errors.js';
import { encodeFlac } from '../encode-flac.js';
import { decodeAudio, resample, sniffAudioFormat, STT_SAMPLE_RATE } from './audio.js';
import { FIXTURES } from './audio.fixture.js';

function sine(rate: number, seconds: number, hz: number, amplitude: number): Float32Array {
  const out = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * hz * i) / rate);
  return out;
}

/** A canonical 44-byte-header PCM WAVE file, 16-bit, channels interleaved. */
function wav(channels: Float32Array[], rate: number): Uint8Array {
  const frames = channels[0]!.length;
  const data = frames * channels.length * 2;
  const bytes = new Uint8Array(44 + data);
  const view = new DataView(bytes.buffer);
  const text = (at: number, s: string): void => [...s].forEach((c, i) => view.setUint8(at + i, c.charCodeAt(0)));
  text(0, 'RIFF');
  view.setUint32(4, 36 + data, true);
  text(8, 'WAVE');
  text(12, 'fmt ');
  view.setUint32(16, 16, true);
  view.setUint16(20, 1, true);
  view.setUint16(22, channels.length, true);
  view.setUint32(24, rate, true);
  view.setUint32(28, rate * channels.length * 2, true);
  view.setUint16(32, channels.length * 2, true);
  view.setUint16(34, 16, true);
  text(36, 'data');
  view.setUint32(40, data, true);
  for (let i = 0; i < frames; i++) {
    channels.forEach((c, ch) => view.setInt16(44 + (i * channels.length + ch) * 2, Math.round(c[i]! * 32767), true));
  }
  return bytes;
}

function zeroCrossings(samples: Float32Array, from = 0, to = samples.length): number {
  let n = 0;
  for (let i = from + 1; i < to; i++) if ((samples[i - 1]! < 0) !== (samples[i]! < 0)) n++;
  return n;
}

function rms(samples: Float32Array, from = 0, to = samples.length): number {
  let sum = 0;
  for (let i = from; i < to; i++) sum += samples[i]! ** 2;
  return Math.sqrt(sum / Math.max(1, to - from));
}

/** The tone's frequency from the zero crossings of the middle of the signal (away from codec edges). */
function frequency(samples: Float32Array): number {
  const from = Math.floor(samples.length * 0.2);
  const to = Math.floor(samples.length * 0.8);
  return (zeroCrossings(samples, from, to) / 2) * (STT_SAMPLE_RATE / (to - from));
}

async function rejectsBadRequest(promise: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof ShoalError, `expected a ShoalError, got ${String(error)}`);
    assert.equal(error.code, 'BAD_REQUEST');
    assert.match(error.message, message);
    return true;
  });
}

test('a 44.1 kHz stereo WAV becomes 16 kHz mono with its tone, length and level kept', async () => {
  const left = sine(44_100, 1.5, 440, 0.5);
  const right = sine(44_100, 1.5, 440, 0.5);
  const decoded = await decodeAudio(wav([left, right], 44_100), { maxSeconds: 60 });
  assert.equal(decoded.format, 'wav');
  assert.ok(Math.abs(decoded.durationS - 1.5) < 0.001, `duration ${decoded.durationS}`);
  assert.equal(decoded.samples.length, 24_000);
  // 440 Hz for 1.5 s crosses zero 1320 times.
  const crossings = zeroCrossings(decoded.samples);
  assert.ok(Math.abs(crossings - 1320) <= 4, `zero crossings ${crossings}`);
  const level = rms(decoded.samples, 1000, 23_000);
  assert.ok(Math.abs(level - 0.5 / Math.SQRT2) < 0.01, `rms ${level}`);
});

test('stereo channels are averaged', async () => {
  const left = sine(16_000, 0.5, 300, 0.6);
  const right = new Float32Array(left.length);
  const decoded = await decodeAudio(wav([left, right], 16_000), { maxSeconds: 60 });
  const level = rms(decoded.samples);
  assert.ok(Math.abs(level - 0.3 / Math.SQRT2) < 0.005, `rms ${level}`);
});

test('the resampler is band-limited: a tone above the new Nyquist frequency is removed, one below kept', () => {
  const kept = resample(sine(48_000, 1, 6000, 0.5), 48_000, 16_000);
  const removed = resample(sine(48_000, 1, 11_000, 0.5), 48_000, 16_000);
  assert.ok(Math.abs(rms(kept, 500, 15_500) - 0.5 / Math.SQRT2) < 0.01);
  assert.ok(rms(removed, 500, 15_500) < 0.01, `an 11 kHz tone leaks ${rms(removed, 500, 15_500)} (aliasing)`);
  const up = resample(sine(8000, 1, 1000, 0.5), 8000, 16_000);
  assert.equal(up.length, 16_000);
  assert.ok(Math.abs(frequency(up) - 1000) < 10);
});

test('mp3 decodes (encoded here with wasm-media-encoders)', async () => {
  const encoder = await createMp3Encoder();
  encoder.configure({ channels: 1, sampleRate: 44_100, bitrate: 64 });
  const tone = sine(44_100, 1, 440, 0.5);
  const body = encoder.encode([tone]).slice();
  const tail = encoder.finalize().slice();
  const mp3 = new Uint8Array([...body, ...tail]);
  const decoded = await decodeAudio(mp3, { maxSeconds: 60 });
  assert.equal(decoded.format, 'mp3');
  assert.ok(Math.abs(decoded.durationS - 1) < 0.1, `duration ${decoded.durationS}`);
  assert.ok(Math.abs(frequency(decoded.samples) - 440) < 10, `frequency ${frequency(decoded.samples)}`);
  assert.ok(rms(decoded.samples) > 0.2);
});

test('ogg vorbis decodes (encoded here with wasm-media-encoders)', async () => {
  const encoder = await createOggEncoder();
  encoder.configure({ channels: 2, sampleRate: 48_000, vbrQuality: 3 });
  const tone = sine(48_000, 1, 500, 0.5);
  const body = encoder.encode([tone, tone]).slice();
  const tail = encoder.finalize().slice();
  const decoded = await decodeAudio(new Uint8Array([...body, ...tail]), { maxSeconds: 60 });
  assert.equal(decoded.format, 'ogg');
  assert.ok(Math.abs(decoded.durationS - 1) < 0.05, `duration ${decoded.durationS}`);
  assert.ok(Math.abs(frequency(decoded.samples) - 500) < 10);
});

test('flac decodes (encoded with the built-in voice encoder)', async () => {
  const tone = sine(22_050, 0.8, 700, 0.5);
  const flac = encodeFlac(Int16Array.from(tone, (v) => Math.round(v * 32767)), 22_050);
  const decoded = await decodeAudio(flac, { maxSeconds: 60 });
  assert.equal(decoded.format, 'flac');
  assert.ok(Math.abs(decoded.durationS - 0.8) < 0.001);
  assert.ok(Math.abs(frequency(decoded.samples) - 700) < 10);
});

for (const [name, fixture] of Object.entries(FIXTURES)) {
  test(`${name} decodes (a committed ${fixture.base64.length * 0.75 | 0}-byte fixture: ${fixture.about})`, async () => {
    const decoded = await decodeAudio(Buffer.from(fixture.base64, 'base64'), { maxSeconds: 60 });
    assert.equal(decoded.format, fixture.format);
    assert.ok(Math.abs(decoded.durationS - fixture.durationS) < 0.05, `duration ${decoded.durationS}`);
    assert.ok(Math.abs(frequency(decoded.samples) - fixture.hz) < 15, `frequency ${frequency(decoded.samples)}`);
  });
}

test('the format is sniffed from the bytes', () => {
  assert.equal(sniffAudioFormat(wav([sine(8000, 0.01, 100, 0.1)], 8000))?.format, 'wav');
  assert.equal(sniffAudioFormat(new TextEncoder().encode('ID3\u0004rest'))?.format, 'mp3');
  assert.equal(sniffAudioFormat(new Uint8Array([0xff, 0xf1, 0x50, 0x80]))?.decoder, null);
  assert.equal(sniffAudioFormat(new TextEncoder().encode('hello world, not audio')), null);
});

test('empty, unknown, random, truncated and too long audio are refused with BAD_REQUEST', async () => {
  await rejectsBadRequest(decodeAudio(new Uint8Array(0), { maxSeconds: 60 }), /empty/);
  await rejectsBadRequest(decodeAudio(new TextEncoder().encode('{"not":"audio"}'), { maxSeconds: 60 }), /supported formats: wav, mp3/);
  let seed = 1;
  const random = Uint8Array.from({ length: 4096 }, () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 24) & 0xfe);
  await rejectsBadRequest(decodeAudio(random, { maxSeconds: 60 }), /supported formats/);
  await rejectsBadRequest(decodeAudio(new Uint8Array([0xff, 0xf1, 0x50, 0x80, 1, 2, 3]), { maxSeconds: 60 }), /aac \(adts\) audio is not supported; supported formats/);

  const good = wav([sine(16_000, 3, 440, 0.5)], 16_000);
  await rejectsBadRequest(decodeAudio(good.subarray(0, 40), { maxSeconds: 60 }), /could not be decoded/);
  await rejectsBadRequest(decodeAudio(good, { maxSeconds: 2 }), /longer than the limit of 2 s/);

  const garbageWav = new Uint8Array(good.subarray(0, 2000));
  garbageWav.fill(0xee, 12, 44);
  await rejectsBadRequest(decodeAudio(garbageWav, { maxSeconds: 60 }), /could not be decoded/);

  const mp3Head = new Uint8Array([0xff, 0xfb, 0x90, 0x64, ...new Uint8Array(60)]);
  await rejectsBadRequest(decodeAudio(mp3Head, { maxSeconds: 60 }), /could not be decoded/);
  const oggHead = new TextEncoder().encode('OggS\u0000\u0002' + '\u0000'.repeat(30) + 'OpusHead');
  await rejectsBadRequest(decodeAudio(oggHead, { maxSeconds: 60 }), /could not be decoded/);
});

test('an aborted decode rejects with the abort reason', async () => {
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(decodeAudio(wav([sine(16_000, 1, 440, 0.5)], 16_000), { maxSeconds: 60, signal: controller.signal }), { name: 'AbortError' });
});
