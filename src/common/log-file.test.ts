import assert from 'node:assert/strict';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { LOG_FILE_NAME, readLogTail, RotatingLogFile } from './log-file.js';

async function withDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-log-file-'));
  try {
    await body(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const line = (n: number): string => `${JSON.stringify({ level: 30, time: n, msg: `line ${String(n).padStart(4, '0')}` })}\n`;

test('lines are appended to a private file, asynchronously, and flushed on demand', async () => {
  await withDir(async (dir) => {
    const file = await RotatingLogFile.open(join(dir, 'logs'));
    for (let i = 1; i <= 100; i += 1) file.write(line(i));
    await file.flush();
    const text = await readFile(join(dir, 'logs', LOG_FILE_NAME), 'utf8');
    assert.equal(text, Array.from({ length: 100 }, (_, i) => line(i + 1)).join(''));
    assert.equal((await stat(join(dir, 'logs', LOG_FILE_NAME))).mode & 0o777, 0o600);
    assert.equal((await stat(join(dir, 'logs'))).mode & 0o777, 0o700);
    await file.close();
    // A new start appends to what is there.
    const again = await RotatingLogFile.open(join(dir, 'logs'));
    again.write(line(101));
    await again.close();
    assert.equal((await readFile(join(dir, 'logs', LOG_FILE_NAME), 'utf8')).split('\n').length, 102);
  });
});

test('the file rotates between lines at the size limit, keeping maxFiles files', async () => {
  await withDir(async (dir) => {
    const each = Buffer.byteLength(line(1));
    // Three whole lines fit a file, a fourth would not.
    const file = await RotatingLogFile.open(dir, { maxBytes: each * 3 + 5, maxFiles: 3, maxPendingBytes: 1 << 20 });
    for (let i = 1; i <= 20; i += 1) {
      file.write(line(i));
      // Some lines in separate batches, some queued together: both paths must rotate the same way.
      if (i % 4 === 0) await file.flush();
    }
    await file.close();
    assert.deepEqual((await readdir(dir)).sort(), [LOG_FILE_NAME, `${LOG_FILE_NAME}.1`, `${LOG_FILE_NAME}.2`]);
    for (const name of await readdir(dir)) assert.ok((await stat(join(dir, name))).size <= each * 3 + 5, `${name} is within the limit`);
    assert.equal(await readFile(join(dir, LOG_FILE_NAME), 'utf8'), [line(19), line(20)].join(''));
    assert.equal(await readFile(join(dir, `${LOG_FILE_NAME}.1`), 'utf8'), [line(16), line(17), line(18)].join(''));
    assert.equal(await readFile(join(dir, `${LOG_FILE_NAME}.2`), 'utf8'), [line(13), line(14), line(15)].join(''));
    // The tail reads across the rotated files, oldest first.
    const tail = await readLogTail(dir, { maxLines: 5, maxBytes: 1 << 20, maxFiles: 3 });
    assert.deepEqual(tail, [16, 17, 18, 19, 20].map((n) => line(n).trimEnd()));
    assert.equal((await readLogTail(dir, { maxLines: 100, maxBytes: 1 << 20, maxFiles: 3 })).length, 8);
  });
});

test('a queue the disk cannot keep up with drops lines and says how many', async () => {
  await withDir(async (dir) => {
    const each = Buffer.byteLength(line(1));
    const file = await RotatingLogFile.open(dir, { maxBytes: 1 << 20, maxFiles: 2, maxPendingBytes: each * 10 + 10 });
    // Synchronously, before the writer runs once: only ten lines fit the queue.
    for (let i = 1; i <= 25; i += 1) file.write(line(i));
    await file.close();
    const lines = (await readFile(join(dir, LOG_FILE_NAME), 'utf8')).trimEnd().split('\n');
    assert.equal(lines.length, 11);
    assert.match(lines[10]!, /15 log lines were not written to this file/);
  });
});

test('flushSync writes what is queued, for the exit handler', async () => {
  await withDir(async (dir) => {
    const file = await RotatingLogFile.open(dir);
    file.write(line(1));
    file.write(line(2));
    // The writer has not run yet (no await since the writes): both lines are still queued.
    file.flushSync();
    assert.equal(await readFile(join(dir, LOG_FILE_NAME), 'utf8'), line(1) + line(2));
    await file.close();
    assert.equal(await readFile(join(dir, LOG_FILE_NAME), 'utf8'), line(1) + line(2), 'nothing written twice');
  });
});

test('tail reads: chunk boundaries, byte budget, a snapshot end and an unfinished last line', async () => {
  await withDir(async (dir) => {
    // Lines long enough that several straddle the reader's 64 KiB chunks.
    const long = Array.from({ length: 300 }, (_, i) => JSON.stringify({ level: 30, time: i, msg: `${i} ${'x'.repeat(1000 + i)}` }));
    await writeFile(join(dir, `${LOG_FILE_NAME}.1`), `${long.slice(0, 150).join('\n')}\n`);
    await writeFile(join(dir, LOG_FILE_NAME), `${long.slice(150).join('\n')}\n`);
    assert.deepEqual(await readLogTail(dir, { maxLines: 1000, maxBytes: 1 << 30 }), long);
    const budget = await readLogTail(dir, { maxLines: 1000, maxBytes: 20_000 });
    assert.deepEqual(budget, long.slice(-budget.length));
    assert.ok(budget.reduce((n, l) => n + Buffer.byteLength(l), 0) <= 20_000 && budget.length > 0);
    assert.equal((await readLogTail(dir, { maxLines: 1000, maxBytes: 10 })).length, 1, 'at least one line');
    const firstCurrent = Buffer.byteLength(long[150]!) + 1;
    assert.deepEqual(await readLogTail(dir, { maxLines: 2, maxBytes: 1 << 30, endBytes: firstCurrent }), [long[149], long[150]]);
    await writeFile(join(dir, LOG_FILE_NAME), `${long[0]}\n{"level":30,"ti`);
    assert.deepEqual(await readLogTail(dir, { maxLines: 2, maxBytes: 1 << 30 }), [long[0], '{"level":30,"ti']);
    assert.deepEqual(await readLogTail(join(dir, 'missing'), { maxLines: 5, maxBytes: 100 }), []);
  });
});
