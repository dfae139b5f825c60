import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseWav, pcmFromLE } from '../../test/support/audio.js';
import { encodeWav, pcm16le } from './encode-wav.js';

const samples = Int16Array.from([0, 1, -1, 32767, -32768, 256, -256]);

test('a WAV file has the 44-byte header (mono, 16 bits, the rate, the sizes) and the samples', () => {
  const wav = encodeWav(samples, 24_000);
  assert.equal(wav.length, 44 + samples.length * 2);
  const parsed = parseWav(wav);
  assert.equal(parsed.sampleRate, 24_000);
  assert.deepEqual(parsed.samples, samples);
  assert.equal(new DataView(wav.buffer).getUint32(28, true), 48_000, 'bytes per second');
});

test('pcm is little-endian 16-bit whatever the machine', () => {
  const bytes = pcm16le(samples);
  assert.deepEqual([...bytes.subarray(0, 8)], [0, 0, 1, 0, 0xff, 0xff, 0xff, 0x7f]);
  assert.deepEqual(pcmFromLE(bytes), samples);
});
