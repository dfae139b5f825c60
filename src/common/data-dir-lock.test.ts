import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { isShoalError } from './errors.js';
import { createLogger } from './log.js';
import { DataDirLock } from './data-dir-lock.js';

const log = createLogger({ level: 'silent' });

async function withDir(body: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-lock-'));
  try {
    await body(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function plantLock(dir: string, holder: Record<string, unknown>): Promise<void> {
  await mkdir(join(dir, 'run'), { recursive: true });
  await writeFile(join(dir, 'run', 'node.lock'), JSON.stringify({ url: null, startedAtMs: 1, procStart: null, token: 'planted', ...holder }));
}

/** The pid of a process that has exited (and been reaped), so that no process has it now. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((resolve) => child.once('exit', resolve));
  return child.pid!;
}

const refused = (pattern: RegExp) => (error: unknown) => isShoalError(error) && error.code === 'BAD_REQUEST' && pattern.test(error.message);

test('a second lock on a held data dir is refused with the holder and its URL, and is free again after release', async () => {
  await withDir(async (dir) => {
    const lock = await DataDirLock.acquire(dir, log);
    await assert.rejects(DataDirLock.acquire(dir, log), refused(new RegExp(`^a node \\(pid ${process.pid}, still starting\\) already runs from this data dir`)));
    await lock.setUrl('http://127.0.0.1:52600');
    await assert.rejects(DataDirLock.acquire(dir, log), refused(new RegExp(`^a node \\(pid ${process.pid}, http://127\\.0\\.0\\.1:52600\\) already runs`)));
    await lock.release();
    const again = await DataDirLock.acquire(dir, log);
    await again.release();
  });
});

test('the lock of a pid that no longer runs is taken over, with a log line', async () => {
  await withDir(async (dir) => {
    const pid = await deadPid();
    await plantLock(dir, { pid });
    const lines: string[] = [];
    const recording = createLogger({ level: 'warn', pretty: false, recent: { write: (line) => void lines.push(line) } });
    const lock = await DataDirLock.acquire(dir, recording);
    assert.ok(lines.some((l) => l.includes(`took over the data dir lock of pid ${pid}`)), lines.join('\n'));
    assert.equal(JSON.parse(await readFile(join(dir, 'run', 'node.lock'), 'utf8')).pid, process.pid);
    await lock.release();
  });
});

test('a lock naming a live pid that started at another time (a reused pid) is taken over', { skip: process.platform !== 'linux' ? 'start times come from /proc' : false }, async () => {
  await withDir(async (dir) => {
    // The parent of this test runner is alive, but it did not start at this made-up time.
    await plantLock(dir, { pid: process.ppid, procStart: '1' });
    const lock = await DataDirLock.acquire(dir, log);
    await lock.release();
  });
});

test('a lock naming a live process with no start time to compare is respected', async () => {
  await withDir(async (dir) => {
    await plantLock(dir, { pid: process.ppid, url: 'http://127.0.0.1:1' });
    await assert.rejects(DataDirLock.acquire(dir, log), refused(/already runs from this data dir/));
  });
});

test("a lock naming this process's own pid, which this process does not hold, is stale (a container's pid 1 after a restart)", async () => {
  await withDir(async (dir) => {
    await plantLock(dir, { pid: process.pid });
    const lock = await DataDirLock.acquire(dir, log);
    await lock.release();
  });
});

test('a damaged lock file is taken over', async () => {
  await withDir(async (dir) => {
    await mkdir(join(dir, 'run'), { recursive: true });
    await writeFile(join(dir, 'run', 'node.lock'), '{"pid":');
    const lock = await DataDirLock.acquire(dir, log);
    await lock.release();
  });
});

test("release leaves alone a lock that another start took over meanwhile", async () => {
  await withDir(async (dir) => {
    const lock = await DataDirLock.acquire(dir, log);
    await plantLock(dir, { pid: process.ppid, token: 'someone-else' });
    await lock.release();
    assert.equal(JSON.parse(await readFile(join(dir, 'run', 'node.lock'), 'utf8')).token, 'someone-else');
  });
});

test('concurrent takeovers of one stale lock leave exactly one holder', async () => {
  await withDir(async (dir) => {
    await plantLock(dir, { pid: await deadPid() });
    // Children, so that each has its own pid and none reads the other's lock as its own.
    const script = `
      const { DataDirLock } = await import(${JSON.stringify(new URL('./data-dir-lock.js', import.meta.url).href)});
      const { createLogger } = await import(${JSON.stringify(new URL('./log.js', import.meta.url).href)});
      try { await DataDirLock.acquire(process.argv[1], createLogger({ level: 'silent' })); console.log('won'); setInterval(() => {}, 1000); }
      catch (e) { console.log(e.message.startsWith('a node (') ? 'refused' : 'error: ' + e.message); }`;
    const children = Array.from({ length: 4 }, () => spawn(process.execPath, ['--input-type=module', '-e', script, dir], { stdio: ['ignore', 'pipe', 'inherit'] }));
    try {
      // A winner holds its lock until it is killed, after every child has said how it did.
      const outcomes = await Promise.all(
        children.map(
          (child) =>
            new Promise<string>((resolve) => {
              let out = '';
              child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
                out += chunk;
                if (out.includes('\n')) resolve(out.trim());
              });
              child.once('exit', () => resolve(out.trim()));
            }),
        ),
      );
      assert.equal(outcomes.filter((o) => o === 'won').length, 1, outcomes.join(', '));
      assert.ok(outcomes.every((o) => o === 'won' || o === 'refused'), outcomes.join(', '));
    } finally {
      for (const child of children) child.kill('SIGKILL');
    }
  });
});
