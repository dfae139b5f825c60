import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ShoalError } from '../common/errors.js';
import { resolveBuiltinModel } from '../models/builtin-store.js';
import { ModelCard } from '../models/cards/card.js';
import { BUILTIN_CARDS } from '../models/cards/catalog.js';
import { projectorFor } from './projector.js';

const SHA = '0123456789abcdef0123456789abcdef01234567';
const signal = new AbortController().signal;

async function withDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-worker-projector-'));
  try {
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const visionCard = (source: unknown, projector: unknown): ModelCard =>
  ModelCard.parse({ id: 'acme/vl', name: 'vl', source, projector, tasks: ['chat'], capabilities: { vision: true }, compatible_backends: ['llama_server-cpu'] });

test('a card without a projector launches without one', async () => {
  assert.equal(await projectorFor(null, '/m.gguf', signal), undefined);
  assert.equal(await projectorFor(BUILTIN_CARDS.find((c) => c.id === 'shoal/tiny')!, '/m.gguf', signal), undefined);
});

test("a built-in vision model's projector is generated beside its model file, once", async () => {
  await withDir(async (dir) => {
    const model = (await resolveBuiltinModel('shoal/tiny-vision', dir))!;
    const card = BUILTIN_CARDS.find((c) => c.id === 'shoal/tiny-vision')!;
    const path = (await projectorFor(card, model.path, signal))!;
    assert.match(path, /shoal--tiny-vision-mmproj-[0-9a-f]{12}\.gguf$/);
    assert.equal(join(path, '..'), join(model.path, '..'));
    const first = await stat(path);
    assert.equal(await projectorFor(card, model.path, signal), path);
    assert.equal((await stat(path)).mtimeMs, first.mtimeMs, 'not generated again');
  });
});

test("a hub model's projector sits in the store beside the model, in the same revision", async () => {
  await withDir(async (dir) => {
    const revision = join(dir, 'hub', 'acme', 'vl-gguf', SHA);
    await mkdir(join(revision, 'q4'), { recursive: true });
    await writeFile(join(revision, 'mmproj-f16.gguf'), 'x');
    const card = visionCard({ kind: 'huggingface', repo: 'acme/vl-gguf', file: 'q4/vl.Q4_K_M.gguf', revision: SHA }, { kind: 'huggingface', file: 'mmproj-f16.gguf' });
    assert.equal(await projectorFor(card, join(revision, 'q4', 'vl.Q4_K_M.gguf'), signal), join(revision, 'mmproj-f16.gguf'));
  });
});

test('a projector that is not there fails the launch, saying what to do', async () => {
  await withDir(async (dir) => {
    const file = visionCard({ kind: 'file', path: join(dir, 'vl.gguf') }, { kind: 'file', path: join(dir, 'missing.gguf') });
    await assert.rejects(projectorFor(file, join(dir, 'vl.gguf'), signal), (error: unknown) => error instanceof ShoalError && error.code === 'MODEL_FAILED' && /fix the projector path/.test(error.message));
    await writeFile(join(dir, 'p.gguf'), 'x');
    assert.equal(await projectorFor(visionCard({ kind: 'file', path: join(dir, 'vl.gguf') }, { kind: 'file', path: join(dir, 'p.gguf') }), join(dir, 'vl.gguf'), signal), join(dir, 'p.gguf'));
    const hub = visionCard({ kind: 'huggingface', repo: 'acme/vl-gguf', file: 'vl.gguf', revision: SHA }, { kind: 'huggingface', file: 'mmproj.gguf' });
    await assert.rejects(projectorFor(hub, join(dir, 'vl.gguf'), signal), (error: unknown) => error instanceof ShoalError && error.code === 'MODEL_FAILED' && /shoal models pull /.test(error.message));
  });
});
