import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isModelsError } from '../hub/errors.js';
import type { DownloadPlan } from './plan.js';
import { ModelStore } from './store.js';

const BYTES = Buffer.from('GGUF and then some bytes of a model');
const SHA = createHash('sha256').update(BYTES).digest('hex');

function planFor(id: string, sha256 = SHA): DownloadPlan {
  return { modelId: id, repo: id, revision: sha256.slice(0, 40), group: 'x', primaryPath: 'x.gguf', files: [{ path: 'x.gguf', size: BYTES.length, sha256, gitOid: null }] };
}

describe('importing a file from this machine into the store', () => {
  let dir: string;
  let store: ModelStore;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-import-'));
    store = await ModelStore.open({ dataDir: join(dir, 'data'), reserveBytes: 0 });
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test('on the same filesystem it is a hard link, then already present; removing it leaves the original', async () => {
    const file = join(dir, 'x.gguf');
    await writeFile(file, BYTES);
    const first = await store.importFile(planFor('local/x'), file);
    assert.equal(first.how, 'linked');
    assert.equal((await stat(first.stored.path)).ino, (await stat(file)).ino);
    assert.equal(store.get('local/x')?.files[0]?.sha256, SHA);
    assert.equal((await store.importFile(planFor('local/x'), file)).how, 'present');
    assert.equal(await store.remove('local/x'), true);
    assert.equal(existsSync(first.stored.path), false);
    assert.deepEqual(await readFile(file), BYTES);
  });

  // /dev/shm is a tmpfs on Linux: another filesystem than the temporary directory, where links fail.
  const shm = existsSync('/dev/shm') ? '/dev/shm' : null;
  test('across filesystems it is copied and verified against the SHA-256', { skip: shm === null ? 'no /dev/shm' : false }, async (t) => {
    const other = await mkdtemp(join(shm as string, 'shoal-import-'));
    t.after(() => rm(other, { recursive: true, force: true }));
    if ((await stat(other)).dev === (await stat(dir)).dev) return t.skip('/dev/shm is on the same filesystem here');
    const file = join(other, 'y.gguf');
    await writeFile(file, BYTES);
    const copied = await store.importFile(planFor('local/y'), file);
    assert.equal(copied.how, 'copied');
    assert.notEqual((await stat(copied.stored.path)).ino, (await stat(file)).ino);
    assert.deepEqual(await readFile(copied.stored.path), BYTES);
    const wrong = 'f'.repeat(64);
    await assert.rejects(store.importFile(planFor('local/z', wrong), file), (error) => isModelsError(error, 'CHECKSUM_MISMATCH'));
    assert.equal(store.get('local/z'), null);
  });
});
