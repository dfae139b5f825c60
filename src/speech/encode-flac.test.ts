import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { decodeVerbatimFlac, flacStreamInfo } from '../../test/support/audio.js';
import { encodeFlac, FLAC_BLOCK_SAMPLES } from './encode-flac.js';

/** Enough frames that frame numbers take two and three bytes (past 127 and 2047). */
function noise(samples: number): Int16Array {
  let seed = 12345;
  return Int16Array.from({ length: samples }, () => ((seed = (seed * 1103515245 + 12345) >>> 0) >>> 16) - 32768);
}

test('STREAMINFO says 24 kHz, one channel, 16 bits, the block size and the sample count', () => {
  const samples = noise(FLAC_BLOCK_SAMPLES * 3 + 5);
  const info = flacStreamInfo(encodeFlac(samples, 24_000));
  assert.deepEqual({ ...info, md5: undefined }, { md5: undefined, minBlock: FLAC_BLOCK_SAMPLES, maxBlock: FLAC_BLOCK_SAMPLES, sampleRate: 24_000, channels: 1, bitsPerSample: 16, totalSamples: samples.length });
});

test('the frames decode to the samples, with valid CRCs and frame numbers past one UTF-8 byte', () => {
  const samples = noise(FLAC_BLOCK_SAMPLES * 2100 + 17);
  assert.deepEqual(decodeVerbatimFlac(encodeFlac(samples, 24_000)), samples);
  assert.deepEqual(decodeVerbatimFlac(encodeFlac(new Int16Array(0), 24_000)), new Int16Array(0));
});

/** The reference decoder, where the machine has it (`flac`, Debian's flac package): not on every machine, so skipped there. */
const flac = (() => {
  try {
    execFileSync('flac', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

test('the reference FLAC decoder reads the stream back bit for bit', { skip: flac ? false : 'the flac command is not installed' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-flac-'));
  try {
    const samples = noise(FLAC_BLOCK_SAMPLES * 200 + 99);
    writeFileSync(join(dir, 'a.flac'), encodeFlac(samples, 24_000));
    execFileSync('flac', ['--silent', '-d', '--force-raw-format', '--endian=little', '--sign=signed', '-o', join(dir, 'a.raw'), join(dir, 'a.flac')]);
    const raw = readFileSync(join(dir, 'a.raw'));
    assert.deepEqual(new Int16Array(raw.buffer, raw.byteOffset, raw.length / 2), samples);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
