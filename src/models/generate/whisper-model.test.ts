import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureGeneratedWhisperModel, TINY_WHISPER_SPEC, whisperModelBytes, whisperModelFileBytes, type WhisperModelSpec } from './whisper-model.js';

const SMALL: WhisperModelSpec = { ...TINY_WHISPER_SPEC, name: 'whisper-test-small', nState: 32, nAudioCtx: 100, nTextCtx: 64, multilingual: false, tensorType: 'f32' };

function sha(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

test('the generated file has exactly whisperModelBytes bytes, starts with the ggml magic and the hyper-parameters', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'whisper-model-'));
  try {
    const path = await ensureGeneratedWhisperModel(TINY_WHISPER_SPEC, join(dir, 'sub', 'tiny.bin'));
    const bytes = await readFile(path);
    assert.equal(bytes.length, whisperModelBytes(TINY_WHISPER_SPEC));
    assert.ok(bytes.length < 10_000_000, `${bytes.length} bytes`);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    assert.equal(view.getUint32(0, true), 0x67676d6c);
    const hparams = Array.from({ length: 11 }, (_, i) => view.getInt32(4 + i * 4, true));
    assert.deepEqual(hparams, [51865, 1500, 64, 2, 1, 64, 64, 2, 1, 80, 1]);
    assert.equal(whisperModelFileBytes(SMALL).length, whisperModelBytes(SMALL));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the bytes are a function of the spec: same spec same bytes, another seed other bytes', () => {
  const a = sha(whisperModelFileBytes(SMALL));
  assert.equal(sha(whisperModelFileBytes({ ...SMALL })), a);
  assert.notEqual(sha(whisperModelFileBytes({ ...SMALL, seed: SMALL.seed + 1 })), a);
});

test('an existing file is kept as it is', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'whisper-model-'));
  try {
    const path = join(dir, 'm.bin');
    await writeFile(path, 'already here');
    assert.equal(await ensureGeneratedWhisperModel(SMALL, path), path);
    assert.equal((await stat(path)).size, 'already here'.length);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('an aborted generation leaves no file behind', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'whisper-model-'));
  try {
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(ensureGeneratedWhisperModel(SMALL, join(dir, 'm.bin'), { signal: controller.signal }), { name: 'AbortError' });
    await assert.rejects(stat(join(dir, 'm.bin')));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('a spec with heads that do not divide the width is refused', () => {
  assert.throws(() => whisperModelBytes({ ...SMALL, nAudioHead: 3 }), /multiple of the head counts/);
});
