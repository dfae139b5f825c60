import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Resampler } from './resample.js';

const IN_RATE = 22_050;
const OUT_RATE = 24_000;

function sine(rate: number, hz: number, samples: number, amplitude = 10_000): Int16Array {
  return Int16Array.from({ length: samples }, (_, i) => Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate)));
}

function concat(parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const p of parts) {
    out.set(p, offset);
    offset += p.length;
  }
  return out;
}

test('a tone resampled from 22.05 to 24 kHz is the same tone at the new rate, of the scaled length', () => {
  const input = sine(IN_RATE, 1000, IN_RATE);
  const resampler = new Resampler(IN_RATE, OUT_RATE);
  const output = concat([resampler.push(input), resampler.flush()]);
  assert.equal(output.length, OUT_RATE);
  const ideal = sine(OUT_RATE, 1000, OUT_RATE);
  // Away from the edges (where the input starts and stops abruptly) the error is far below the tone.
  let worst = 0;
  for (let i = 100; i < output.length - 100; i++) worst = Math.max(worst, Math.abs(output[i]! - ideal[i]!));
  assert.ok(worst < 50, `largest deviation ${worst} of an amplitude of 10000`);
});

test('a 9 kHz tone keeps its level within 1 dB: the passband reaches it', () => {
  const input = sine(IN_RATE, 9000, IN_RATE);
  const resampler = new Resampler(IN_RATE, OUT_RATE);
  const output = concat([resampler.push(input), resampler.flush()]);
  let peak = 0;
  for (let i = 200; i < output.length - 200; i++) peak = Math.max(peak, Math.abs(output[i]!));
  assert.ok(peak > 10_000 * 0.89 && peak < 10_000 * 1.12, `9 kHz peak ${peak}`);
});

test('chunked input gives exactly the output of one push', () => {
  const input = sine(IN_RATE, 440, 10_007);
  const whole = new Resampler(IN_RATE, OUT_RATE);
  const expected = concat([whole.push(input), whole.flush()]);
  const chunked = new Resampler(IN_RATE, OUT_RATE);
  const parts: Int16Array[] = [];
  for (let at = 0, size = 1; at < input.length; at += size, size = (size * 7) % 997 + 1) parts.push(chunked.push(input.subarray(at, at + size)));
  parts.push(chunked.flush());
  assert.deepEqual(concat(parts), expected);
});

test('downsampling works too: 24 to 16 kHz keeps a 1 kHz tone', () => {
  const resampler = new Resampler(24_000, 16_000);
  const output = concat([resampler.push(sine(24_000, 1000, 24_000)), resampler.flush()]);
  assert.equal(output.length, 16_000);
  const ideal = sine(16_000, 1000, 16_000);
  let worst = 0;
  for (let i = 100; i < output.length - 100; i++) worst = Math.max(worst, Math.abs(output[i]! - ideal[i]!));
  assert.ok(worst < 50, `largest deviation ${worst}`);
});
