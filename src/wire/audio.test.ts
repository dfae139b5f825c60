import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeTaskAudio, encodeTaskAudio } from './audio.js';

test('task audio round-trips through 16-bit PCM within one step, clipping beyond full scale', () => {
  const samples = Float32Array.from({ length: 1000 }, (_, i) => Math.sin(i / 10) * 0.9);
  const back = decodeTaskAudio(encodeTaskAudio(samples));
  assert.equal(back.length, samples.length);
  // Encoded at 32767 per unit, read at 32768 (full negative scale): within two steps.
  for (let i = 0; i < samples.length; i++) assert.ok(Math.abs((back[i] as number) - (samples[i] as number)) <= 2 / 32768, `sample ${i}`);
  assert.deepEqual([...decodeTaskAudio(encodeTaskAudio(Float32Array.from([2, -2])))].map((s) => Math.round(s * 32768)), [32767, -32768]);
  assert.throws(() => decodeTaskAudio(Buffer.from([1, 2, 3]).toString('base64')), /even number of bytes/);
});
