import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeAudio } from '../../../src/speech/stt/audio.js';
import { base64ToBytes, bytesToBase64, concatSamples, encodeWav, floatToPcm16, pcm16Bytes, pcm16BytesToFloat, PlaybackClock, StreamResampler } from './audio.js';

function tone(hz: number, rate: number, seconds: number, amplitude = 0.5): Float32Array {
  const out = new Float32Array(Math.round(rate * seconds));
  for (let i = 0; i < out.length; i++) out[i] = amplitude * Math.sin((2 * Math.PI * hz * i) / rate);
  return out;
}

/** The amplitude of `hz` in `samples` (a single-bin DFT), 0 to 1 for a full-scale sine. */
function amplitudeAt(samples: Float32Array, rate: number, hz: number): number {
  let re = 0;
  let im = 0;
  for (let i = 0; i < samples.length; i++) {
    re += samples[i]! * Math.cos((2 * Math.PI * hz * i) / rate);
    im -= samples[i]! * Math.sin((2 * Math.PI * hz * i) / rate);
  }
  return (2 * Math.hypot(re, im)) / samples.length;
}

test('PCM16: clamped, rounded, little-endian, and back', () => {
  assert.deepEqual([...floatToPcm16(Float32Array.from([0, 1, -1, 2, -2, 0.5]))], [0, 32767, -32768, 32767, -32768, 16384]);
  const bytes = pcm16Bytes(Int16Array.from([1, -2, 0x1234]));
  assert.deepEqual([...bytes], [1, 0, 0xfe, 0xff, 0x34, 0x12]);
  const back = pcm16BytesToFloat(Uint8Array.from([...bytes, 7]));
  assert.equal(back.length, 3, 'a trailing odd byte is dropped');
  assert.equal(back[2], 0x1234 / 0x8000);
  // A subarray with an odd offset reads from its own start.
  const shifted = new Uint8Array(7);
  shifted.set(bytes, 1);
  assert.deepEqual([...pcm16BytesToFloat(shifted.subarray(1))], [...back]);
});

test('the WAV is a 16-bit mono PCM file the node\'s own decoder reads back at its length', async () => {
  const samples = tone(440, 16_000, 1.5);
  const wav = encodeWav(samples, 16_000);
  const view = new DataView(wav.buffer);
  assert.equal(String.fromCharCode(...wav.subarray(0, 4)), 'RIFF');
  assert.equal(String.fromCharCode(...wav.subarray(8, 16)), 'WAVEfmt ');
  assert.equal(view.getUint32(4, true), wav.length - 8);
  assert.equal(view.getUint16(20, true), 1);
  assert.equal(view.getUint16(22, true), 1);
  assert.equal(view.getUint32(24, true), 16_000);
  assert.equal(view.getUint16(34, true), 16);
  assert.equal(view.getUint32(40, true), samples.length * 2);
  const decoded = await decodeAudio(wav, { maxSeconds: 10 });
  assert.equal(decoded.format, 'wav');
  assert.ok(Math.abs(decoded.durationS - 1.5) < 1e-3, `duration ${decoded.durationS}`);
  assert.ok(amplitudeAt(decoded.samples, 16_000, 440) > 0.45, 'the tone survives the trip');
});

test('resampling 48 kHz to 24 kHz in chunks keeps a tone, its length, and the joins', () => {
  const input = tone(1000, 48_000, 1);
  const resampler = new StreamResampler(48_000, 24_000);
  const parts: Float32Array[] = [];
  // Uneven chunks, as an AudioWorklet batch or a browser quantum would give them.
  for (let at = 0, n = 0; at < input.length; n++) {
    const size = [2048, 128, 1000, 1][n % 4]!;
    parts.push(resampler.push(input.subarray(at, at + size)));
    at += size;
  }
  const out = concatSamples(parts);
  // The filter's last half-width waits for the next chunk: the outputs lag the input by under 1 ms.
  assert.ok(out.length <= 24_000 && out.length >= 23_980, `length ${out.length}`);
  assert.ok(amplitudeAt(out, 24_000, 1000) > 0.45, `the tone: ${amplitudeAt(out, 24_000, 1000)}`);
  // No click at any join: neighbouring samples of a 1 kHz tone at 24 kHz differ by at most 2πf/rate·A.
  const maxStep = ((2 * Math.PI * 1000) / 24_000) * 0.5 * 1.05;
  for (let i = 1; i < out.length; i++) assert.ok(Math.abs(out[i]! - out[i - 1]!) <= maxStep, `a jump at ${i}: ${out[i - 1]} -> ${out[i]}`);
});

test('downsampling damps what the lower rate cannot carry, and 44.1 kHz and 16 kHz rates come out at their length', () => {
  // 20 kHz folds to 4 kHz at 24 kHz without a filter; the sinc's stop band takes it away.
  const out = new StreamResampler(48_000, 24_000).push(tone(20_000, 48_000, 0.5));
  assert.ok(amplitudeAt(out, 24_000, 4000) < 0.005, `alias at 4 kHz: ${amplitudeAt(out, 24_000, 4000)}`);
  const r = new StreamResampler(44_100, 16_000);
  const long = concatSamples([r.push(tone(300, 44_100, 0.5)), r.push(tone(300, 44_100, 0.5))]);
  assert.ok(long.length <= 16_000 && long.length >= 15_980, `length ${long.length}`);
  const up = new StreamResampler(16_000, 24_000).push(tone(300, 16_000, 1));
  assert.ok(up.length <= 24_000 && up.length >= 23_980, `length ${up.length}`);
  assert.ok(amplitudeAt(up, 24_000, 300) > 0.45);
  const same = Float32Array.from([0.1, 0.2]);
  assert.deepEqual([...new StreamResampler(24_000, 24_000).push(same)], [...same]);
  assert.throws(() => new StreamResampler(0, 24_000), RangeError);
});

test('base64 both ways, over the chunking boundary, and bad text throws', () => {
  const bytes = Uint8Array.from({ length: 0x8000 * 2 + 5 }, (_, i) => (i * 31) & 0xff);
  const text = bytesToBase64(bytes);
  assert.equal(text, Buffer.from(bytes).toString('base64'));
  assert.deepEqual(base64ToBytes(text), bytes);
  assert.throws(() => base64ToBytes('not base64!'));
});

test('reply chunks are scheduled back to back, and after an underrun a lead after now', () => {
  const clock = new PlaybackClock(0.05);
  assert.equal(clock.schedule(10, 0.5), 10.05);
  assert.equal(clock.schedule(10.1, 0.5), 10.55, 'the next chunk starts where the first ends');
  assert.ok(Math.abs(clock.pendingS(10.2) - 0.85) < 1e-9);
  assert.equal(clock.schedule(20, 0.2), 20.05, 'late: not in the past');
  clock.reset();
  assert.equal(clock.pendingS(20), 0);
  assert.equal(clock.schedule(20, 0.2), 20.05);
});
