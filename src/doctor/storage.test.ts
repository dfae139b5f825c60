import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixStorage, inspectStorage, MODEL_STORAGE_RESERVE_BYTES, storageChecks, type StorageFacts } from './storage.js';

const GiB = 1024 ** 3;

function facts(overrides: Partial<StorageFacts> = {}): StorageFacts {
  return {
    dataDir: '/d',
    modelsDir: '/d/models',
    dataDirExists: true,
    modelsDirExists: true,
    modelsDirNotDirectory: false,
    writable: true,
    writeError: null,
    freeBytes: 100 * GiB,
    totalBytes: 200 * GiB,
    probedPath: '/d/models',
    ...overrides,
  };
}

const levels = (checks: ReturnType<typeof storageChecks>) => Object.fromEntries(checks.map((c) => [c.id, c.level]));

test('a healthy models dir passes all three checks', () => {
  const checks = storageChecks(facts());
  assert.deepEqual(levels(checks), { 'storage.models_dir': 'ok', 'storage.writable': 'ok', 'storage.free_space': 'ok' });
  assert.match(checks[2]?.summary ?? '', /100 GiB free .*90.0 GiB beyond the 10.0 GiB reserve/);
});

test('a missing models dir is a warning that --fix repairs', () => {
  const checks = storageChecks(facts({ modelsDirExists: false, dataDirExists: false, probedPath: '/' }));
  assert.equal(levels(checks)['storage.models_dir'], 'warn');
  assert.match(checks[0]?.remediation ?? '', /shoal doctor --fix/);
});

test('an unwritable dir is an error naming the reason', () => {
  const checks = storageChecks(facts({ writable: false, writeError: 'EROFS: read-only file system' }));
  const check = checks.find((c) => c.id === 'storage.writable');
  assert.equal(check?.level, 'error');
  assert.equal(check?.detail, 'EROFS: read-only file system');
});

test('a file where the models dir should be is an error', () => {
  const checks = storageChecks(facts({ modelsDirExists: false, modelsDirNotDirectory: true, writable: false, writeError: 'not a directory' }));
  assert.equal(levels(checks)['storage.models_dir'], 'error');
  assert.equal(checks.filter((c) => c.level === 'error').length, 1, 'one error, not two, for one problem');
});

test('free space under the reserve warns; unknown free space warns', () => {
  const low = storageChecks(facts({ freeBytes: MODEL_STORAGE_RESERVE_BYTES - 1 })).find((c) => c.id === 'storage.free_space');
  assert.equal(low?.level, 'warn');
  assert.match(low?.summary ?? '', /under the 10.0 GiB reserve/);
  assert.equal(storageChecks(facts({ freeBytes: 5 * GiB }), 1 * GiB).find((c) => c.id === 'storage.free_space')?.level, 'ok');
  assert.equal(storageChecks(facts({ freeBytes: null })).find((c) => c.id === 'storage.free_space')?.level, 'warn');
});

test('inspect, fix, inspect: --fix creates the data and models dirs', async () => {
  const parent = await mkdtemp(join(tmpdir(), 'shoal-storage-'));
  try {
    const dataDir = join(parent, 'node', 'data');
    const before = await inspectStorage(dataDir);
    assert.equal(before.dataDirExists, false);
    assert.equal(before.modelsDirExists, false);
    assert.equal(before.writable, true);
    assert.equal(before.probedPath, parent);
    assert.ok((before.freeBytes ?? 0) > 0);

    assert.deepEqual(await fixStorage(dataDir), [dataDir, join(dataDir, 'models')]);
    assert.equal((await stat(dataDir)).mode & 0o777, 0o700);
    const after = await inspectStorage(dataDir);
    assert.equal(after.modelsDirExists, true);
    assert.equal(after.probedPath, join(dataDir, 'models'));
    assert.deepEqual(storageChecks(after, 0).map((c) => c.level), ['ok', 'ok', 'ok']);
    assert.deepEqual(await fixStorage(dataDir), [], 'nothing left to create');
  } finally {
    await rm(parent, { recursive: true, force: true });
  }
});

test('a file in place of the models dir is found', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'shoal-storage-'));
  try {
    await writeFile(join(dataDir, 'models'), 'oops');
    const facts = await inspectStorage(dataDir);
    assert.equal(facts.modelsDirNotDirectory, true);
    assert.equal(facts.writable, false);
    assert.equal(storageChecks(facts).find((c) => c.id === 'storage.models_dir')?.level, 'error');
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});
