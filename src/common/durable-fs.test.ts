import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fsyncDir, writeFileAtomic } from './durable-fs.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-durable-fs-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

test('writeFileAtomic creates, then replaces a file whole, leaving no temp file', async () => {
  const path = join(dir, 'state.json');
  await writeFileAtomic(path, '{"v":1}\n');
  assert.equal(await readFile(path, 'utf8'), '{"v":1}\n');
  await writeFileAtomic(path, new TextEncoder().encode('{"v":2}\n'));
  assert.equal(await readFile(path, 'utf8'), '{"v":2}\n');
  assert.deepEqual(await readdir(dir), ['state.json']);
});

test('writeFileAtomic gives the file exactly the mode asked for', { skip: process.platform === 'win32' && 'no POSIX modes' }, async () => {
  const path = join(dir, 'secret');
  const umask = process.umask(0o077);
  try {
    await writeFileAtomic(path, 'x', { mode: 0o640 });
  } finally {
    process.umask(umask);
  }
  assert.equal((await stat(path)).mode & 0o777, 0o640);
});

test('a failed rename removes the temp file and leaves the target as it was', async () => {
  const sub = join(dir, 'failed-rename');
  const target = join(sub, 'occupied');
  await mkdir(target, { recursive: true });
  await writeFile(join(target, 'inside'), 'keep');
  await assert.rejects(writeFileAtomic(target, 'new'));
  assert.deepEqual(await readdir(sub), ['occupied']);
  assert.equal(await readFile(join(target, 'inside'), 'utf8'), 'keep');
});

test('the temp file is named <path>.tmp-<pid>-<hex>, which crash sweeps recognise', async () => {
  const sub = join(dir, 'temp-name');
  const target = join(sub, 'record.json');
  await mkdir(target, { recursive: true });
  await writeFile(join(target, 'inside'), '');
  // Fails at the rename, so the temp file existed under its name; check the sweep pattern matches that name form.
  const seen: string[] = [];
  await assert.rejects(writeFileAtomic(target, 'x'), (error: NodeJS.ErrnoException) => {
    if (typeof error.path === 'string') seen.push(error.path);
    return true;
  });
  assert.equal(seen.length, 1);
  assert.match(seen[0] ?? '', new RegExp(`record\\.json\\.tmp-${process.pid}-[0-9a-f]{8}$`));
});

test('fsyncDir syncs a directory and rejects a missing one', async () => {
  await fsyncDir(dir);
  await assert.rejects(fsyncDir(join(dir, 'missing')), { code: 'ENOENT' });
});

test('a named temp file left by a crash is written through, and gone once the target is replaced', async () => {
  const sub = join(dir, 'named-temp');
  await mkdir(sub, { recursive: true });
  await writeFile(join(sub, 'term.tmp'), 'partial write from a crash');
  await writeFileAtomic(join(sub, 'term'), 'new', { tempPath: join(sub, 'term.tmp') });
  assert.deepEqual(await readdir(sub), ['term']);
  assert.equal(await readFile(join(sub, 'term'), 'utf8'), 'new');
});
