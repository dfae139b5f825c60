import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { extract } from 'tar';
import { BUNDLE_FILES_MAX, bundleFiles, capText, captureBundle } from './bundle.js';
import { openDescriptors, processTree } from './procfs.js';

const SECRET = 'f00d'.repeat(16);

describe('the capture bundle', () => {
  test('a source that hangs or fails leaves a file saying so; the others are there', async () => {
    const files = await bundleFiles({
      timeoutMs: 50,
      secrets: [],
      sources: [
        { file: 'hangs.json', read: () => new Promise(() => {}) },
        { file: 'fails.json', read: () => { throw new Error('no such thing'); } },
        { file: 'ok.json', read: () => ({ a: 1 }) },
        { file: 'empty.txt', read: () => '' },
      ],
    });
    assert.deepEqual(files, [
      { file: 'hangs.json', text: 'could not read hangs.json: timed out after 50 ms\n' },
      { file: 'fails.json', text: 'could not read fails.json: no such thing\n' },
      { file: 'ok.json', text: '{\n  "a": 1\n}\n' },
      { file: 'empty.txt', text: '(empty.txt: empty)\n' },
    ]);
  });

  test('every file is redacted, also a secret in an error message', async () => {
    const files = await bundleFiles({
      secrets: [SECRET],
      sources: [
        { file: 'a.txt', read: () => `token ${SECRET}` },
        { file: 'b.json', read: () => ({ nested: { note: `x${SECRET}y` } }) },
        { file: 'c.txt', read: () => Promise.reject(new Error(`bad token ${SECRET}`)) },
      ],
    });
    for (const { file, text } of files) assert.ok(!text.includes(SECRET) && text.includes('[redacted]'), `${file}: ${text}`);
  });

  test('a long file is cut at the limit and says how much was left out', () => {
    const cut = capText('é'.repeat(200), 120);
    assert.ok(Buffer.byteLength(cut) <= 120, `${Buffer.byteLength(cut)} bytes`);
    assert.match(cut, /cut: \d+ more bytes were left out \(limit 120 bytes per file\)\n$/);
    assert.ok(!cut.includes('\uFFFD'), 'no half character');
    assert.equal(capText('short', 120), 'short');
  });

  test('too many sources are refused', async () => {
    const sources = Array.from({ length: BUNDLE_FILES_MAX + 1 }, (_, i) => ({ file: `${i}.txt`, read: () => 'x' }));
    await assert.rejects(bundleFiles({ secrets: [], sources }), RangeError);
  });

  test('the archive unpacks to one folder with the files', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-bundle-test-'));
    try {
      const archive = await captureBundle('shoal-diagnose-x', { secrets: [], sources: [{ file: 'a.txt', read: () => 'alpha\n' }, { file: 'b.json', read: () => [1] }] });
      assert.deepEqual([...archive.subarray(0, 2)], [0x1f, 0x8b], 'gzip');
      await writeFile(join(dir, 'b.tar.gz'), archive);
      await mkdir(join(dir, 'out'));
      await extract({ file: join(dir, 'b.tar.gz'), cwd: join(dir, 'out') });
      assert.deepEqual(await readdir(join(dir, 'out')), ['shoal-diagnose-x']);
      assert.deepEqual((await readdir(join(dir, 'out', 'shoal-diagnose-x'))).sort(), ['a.txt', 'b.json']);
      assert.equal(await readFile(join(dir, 'out', 'shoal-diagnose-x', 'a.txt'), 'utf8'), 'alpha\n');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the process tree and descriptors from /proc', { skip: process.platform !== 'linux' && 'no /proc here' }, () => {
  test('lists this process and a child with its command line, and their descriptors', async () => {
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)', '--', '--api-key', 'k'], { stdio: 'ignore' });
    try {
      await new Promise((resolve) => child.once('spawn', resolve));
      const tree = await processTree(process.pid);
      assert.ok(tree);
      assert.equal(tree[0]!.pid, process.pid);
      const entry = tree.find((p) => p.pid === child.pid);
      assert.ok(entry, `the child is in the tree: ${JSON.stringify(tree)}`);
      assert.equal(entry.ppid, process.pid);
      assert.match(entry.command, /setTimeout.* -- --api-key k$/);
      assert.ok(entry.rssKiB === null || entry.rssKiB > 0);
      const fds = await openDescriptors([process.pid, 999_999_999]);
      assert.match(fds, new RegExp(`^# pid ${process.pid}: \\d+ open\\n${process.pid}\\t0\\t`, 'm'));
      assert.match(fds, /^# pid 999999999: ENOENT$/m);
    } finally {
      child.kill('SIGKILL');
    }
  });

  test('a pid that is not there gives an empty tree; no /proc gives null', async () => {
    assert.deepEqual(await processTree(999_999_999), []);
    assert.equal(await processTree(process.pid, '/nonexistent-proc'), null);
  });
});
