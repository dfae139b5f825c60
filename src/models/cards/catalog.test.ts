import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILTIN_MODEL_SPECS, BUILTIN_WHISPER_SPECS } from '../generate/builtin.js';
import { BUILTIN_CARDS, cardsDir, loadCatalog } from './catalog.js';
import { readCardFile } from './parse.js';
import { ModelCard } from './card.js';

async function withDataDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-cards-'));
  try {
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const card = (id: string, extra = '') =>
  `id = "${id}"\nname = "${id}"\ntasks = ["chat"]\ncompatible_backends = ["llama_cpp-cpu"]\n${extra}[source]\nkind = "file"\npath = "model.gguf"\n`;

test('every generated model has a built-in card, with its behaviour as capabilities', () => {
  assert.deepEqual(BUILTIN_CARDS.map((c) => c.id).sort(), [...Object.keys(BUILTIN_MODEL_SPECS), ...Object.keys(BUILTIN_WHISPER_SPECS)].sort());
  for (const c of BUILTIN_CARDS.filter((card) => !card.tasks.includes('transcription'))) {
    assert.deepEqual(c.source, { kind: 'builtin', spec: c.id });
    // The vision model's projector loads in llama-server only.
    assert.ok(c.compatible_backends.includes(c.projector === undefined ? 'llama_cpp-cpu' : 'llama_server-cpu'));
    assert.ok(!c.compatible_backends.some((tag) => tag.startsWith('rpc-')), 'a 1 MB model is never split');
  }
  const byId = new Map<string, ModelCard>(BUILTIN_CARDS.map((c) => [c.id, c]));
  assert.equal(byId.get('shoal/tiny-think')?.capabilities.reasoning, true);
  assert.equal(byId.get('shoal/tiny')?.capabilities.reasoning, false);
  assert.equal(byId.get('shoal/tiny-tools')?.capabilities.tools, true);
  const vision = byId.get('shoal/tiny-vision');
  assert.equal(vision?.capabilities.vision, true);
  assert.deepEqual(vision?.projector, { kind: 'builtin' });
  assert.ok(vision?.compatible_backends.every((tag) => tag.startsWith('llama_server-')));
  // The speech-to-text model runs on the whisper engine alone, one transcription at a time.
  const whisper = byId.get('shoal/tiny-whisper');
  assert.deepEqual([whisper?.tasks, whisper?.compatible_backends, whisper?.runtime.parallel], [['transcription'], ['whisper-cpu'], 1]);
});

test('a speech-to-text card is a whisper model on the whisper engine only, and only such a card runs there', () => {
  const card = (fields: Record<string, unknown>) => ModelCard.safeParse({ id: 'acme/stt', name: 'stt', source: { kind: 'file', path: '/m/ggml-base.bin' }, tasks: ['transcription'], compatible_backends: ['whisper-cpu'], ...fields });
  assert.ok(card({}).success);
  const messages = (fields: Record<string, unknown>): string => (card(fields).error?.issues ?? []).map((i) => i.message).join('; ');
  assert.match(messages({ tasks: ['transcription', 'chat'] }), /does nothing else/);
  assert.match(messages({ compatible_backends: ['whisper-cpu', 'llama_cpp-cpu'] }), /whisper engine only/);
  assert.match(messages({ source: { kind: 'builtin', spec: 'shoal/tiny' } }), /is a text model/);
  assert.match(messages({ tasks: ['chat'], compatible_backends: ['whisper-cpu'] }), /runs speech-to-text models only/);
  assert.match(messages({ tasks: ['chat'], compatible_backends: ['llama_cpp-cpu'], source: { kind: 'builtin', spec: 'shoal/tiny-whisper' } }), /is a speech-to-text model/);
  assert.match(messages({ source: { kind: 'huggingface', repo: 'a/b', file: 'm.gguf', revision: 'a'.repeat(40) } }), /whisper\.cpp's ggml \.bin file \(ggml-base\.en\.bin\), not m\.gguf/);
  assert.ok(card({ source: { kind: 'huggingface', repo: 'a/b', file: 'ggml-base.en.bin', revision: 'a'.repeat(40) } }).success, 'a whisper model from the hub');
  assert.ok(card({ source: { kind: 'local', file: 'ggml-base.en.bin', sha256: 'b'.repeat(64), imported_from: '/m/ggml-base.en.bin' } }).success, 'a whisper model taken into the store');
  assert.match(messages({ tasks: ['chat'], compatible_backends: ['llama_cpp-cpu'], source: { kind: 'huggingface', repo: 'a/b', file: 'ggml-base.en.bin', revision: 'a'.repeat(40) } }), /a \.bin model file is a whisper\.cpp speech-to-text model/);
});

test('no cards directory: just the built-ins, no errors', async () => {
  await withDataDir(async (dir) => {
    const catalog = await loadCatalog(dir);
    assert.equal(catalog.entries.size, BUILTIN_CARDS.length);
    assert.deepEqual(catalog.errors, []);
    assert.equal(catalog.entries.get('shoal/tiny')?.origin, 'builtin');
  });
});

test('user cards add to and override the built-ins; a broken file is reported and skipped', async () => {
  await withDataDir(async (dir) => {
    const cards = cardsDir(dir);
    await mkdir(cards, { recursive: true });
    await writeFile(join(cards, 'a-extra.toml'), card('acme/extra'));
    await writeFile(join(cards, 'b-tiny.toml'), card('shoal/tiny', '[runtime]\ncontext_size = 1024\n'));
    await writeFile(join(cards, 'c-broken.toml'), card('acme/broken').replace('llama_cpp-cpu', 'gpu'));
    await writeFile(join(cards, 'd-syntax.toml'), 'id = \n');
    await writeFile(join(cards, 'e-dupe.toml'), card('acme/extra'));
    await writeFile(join(cards, 'notes.txt'), 'not a card');

    const catalog = await loadCatalog(dir);
    assert.equal(catalog.entries.size, BUILTIN_CARDS.length + 1);
    const extra = catalog.entries.get('acme/extra');
    assert.equal(extra?.origin, join(cards, 'a-extra.toml'));
    assert.equal(extra?.overridesBuiltin, false);
    assert.deepEqual(extra?.card.source, { kind: 'file', path: join(cards, 'model.gguf') });
    const tiny = catalog.entries.get('shoal/tiny');
    assert.equal(tiny?.overridesBuiltin, true);
    assert.equal(tiny?.card.runtime.context_size, 1024);
    assert.equal(catalog.entries.get('shoal/tiny-eos')?.origin, 'builtin');

    assert.deepEqual(catalog.errors.map((e) => e.file), ['c-broken.toml', 'd-syntax.toml', 'e-dupe.toml'].map((n) => join(cards, n)));
    assert.match(catalog.errors[0]!.message, /compatible_backends\[0\]/);
    assert.match(catalog.errors[1]!.message, /TOML syntax error at line 1/);
    assert.match(catalog.errors[2]!.message, /already defined by .*a-extra\.toml/);
  });
});

test('reading a missing card file is a CardError naming it', async () => {
  await withDataDir(async (dir) => {
    await assert.rejects(readCardFile(join(dir, 'nope.toml')), (error: Error) => error.name === 'CardError' && error.message.includes('nope.toml'));
  });
});
