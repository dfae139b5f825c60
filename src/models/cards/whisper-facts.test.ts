import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TINY_WHISPER_SPEC, whisperModelFileBytes } from '../generate/whisper-model.js';
import { parseWhisperHeader, WHISPER_HEADER_BYTES } from './whisper-facts.js';

test('the generated whisper model reads back as the spec it was made from', () => {
  const header = parseWhisperHeader(whisperModelFileBytes(TINY_WHISPER_SPEC).subarray(0, WHISPER_HEADER_BYTES));
  assert.deepEqual(header, {
    vocabSize: 51_865,
    audioContext: TINY_WHISPER_SPEC.nAudioCtx,
    audioState: TINY_WHISPER_SPEC.nState,
    audioHeads: TINY_WHISPER_SPEC.nAudioHead,
    audioLayers: TINY_WHISPER_SPEC.nAudioLayer,
    textContext: TINY_WHISPER_SPEC.nTextCtx,
    textState: TINY_WHISPER_SPEC.nState,
    textHeads: TINY_WHISPER_SPEC.nTextHead,
    textLayers: TINY_WHISPER_SPEC.nTextLayer,
    mels: TINY_WHISPER_SPEC.nMels,
    ftype: 1,
  });
});

test('a GGUF, a short file and nonsense sizes are not whisper headers', () => {
  const gguf = new Uint8Array(WHISPER_HEADER_BYTES);
  gguf.set(Buffer.from('GGUF', 'latin1'));
  assert.equal(parseWhisperHeader(gguf), null);
  const good = whisperModelFileBytes(TINY_WHISPER_SPEC).subarray(0, WHISPER_HEADER_BYTES);
  assert.equal(parseWhisperHeader(good.subarray(0, 20)), null);
  const bad = new Uint8Array(good);
  new DataView(bad.buffer).setInt32(4, -5, true);
  assert.equal(parseWhisperHeader(bad), null);
});
