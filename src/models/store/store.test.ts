import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ggufFixture, HubServer } from '../../../test/support/hub-server.js';
import { isModelsError, ModelsError } from '../hub/errors.js';
import { errorMessage, isShoalError } from '../../common/errors.js';
import { resolveRepo } from '../hub/client.js';
import { ModelStore, type ModelStoreOptions } from './store.js';
import { planDownload } from './plan.js';
import type { ByteSource } from './transfer.js';
import { filePathFor, hubStoreRoot, partPathFor } from './layout.js';
import { progressBarWriter, renderProgressLine, type DownloadProgress } from './progress.js';

const sha256 = async (path: string): Promise<string> => createHash('sha256').update(await readFile(path)).digest('hex');
const sizeOf = async (path: string): Promise<number | null> => (existsSync(path) ? (await stat(path)).size : null);

async function until(what: string, ms: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe('model store against a local hub', () => {
  let dir: string;
  let hub: HubServer;
  const fixtures: Record<string, string> = {};
  let counter = 0;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-store-'));
    for (const [name, seed, vocabSize] of [
      ['a', 1, 1024],
      ['b', 2, 1024],
      ['big', 3, 4096],
      ['s1', 4, 1024],
      ['s2', 5, 1024],
      ['s3', 6, 1024],
      ['s2v2', 7, 1024],
    ] as const) {
      fixtures[name] = await ggufFixture(join(dir, `${name}.gguf`), { seed, vocabSize });
    }
    hub = await HubServer.start([
      {
        repo: 'acme/Tiny-GGUF',
        files: [
          { path: 'Tiny-Q4_K_M.gguf', filePath: fixtures.a },
          { path: 'Tiny-Q8_0.gguf', filePath: fixtures.b },
          { path: 'README.md', bytes: new TextEncoder().encode('# tiny\n'), lfs: false },
        ],
      },
      {
        repo: 'acme/Split-GGUF',
        files: [
          { path: 'Split-Q4_K_M-00001-of-00003.gguf', filePath: fixtures.s1 },
          { path: 'Split-Q4_K_M-00002-of-00003.gguf', filePath: fixtures.s2 },
          { path: 'Split-Q4_K_M-00003-of-00003.gguf', filePath: fixtures.s3 },
        ],
      },
      { repo: 'acme/Big-GGUF', files: [{ path: 'Big-Q4_K_M.gguf', filePath: fixtures.big }] },
    ]);
  });

  after(async () => {
    await hub.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function openStore(extra: Partial<ModelStoreOptions> = {}): Promise<{ store: ModelStore; dataDir: string }> {
    const dataDir = join(dir, `data-${counter++}`);
    const store = await ModelStore.open({ dataDir, hub: { endpoint: hub.url }, reserveBytes: 0, retryDelayMs: 10, progressIntervalMs: 0, ...extra });
    return { store, dataDir };
  }

  test('pull downloads the default quant into <data>/models/hub/<repo>/<revision>/, verified, with progress; a second pull fetches nothing', async () => {
    hub.resetCounters();
    const { store, dataDir } = await openStore();
    const events: DownloadProgress[] = [];
    const model = await store.pull({ repo: 'acme/Tiny-GGUF' }, { onProgress: (p) => events.push(p) });
    const revision = hub.head('acme/Tiny-GGUF');
    assert.equal(model.modelId, 'acme/Tiny-GGUF:Q4_K_M');
    assert.equal(model.revision, revision);
    assert.equal(model.path, join(dataDir, 'models', 'hub', 'acme', 'Tiny-GGUF', revision, 'Tiny-Q4_K_M.gguf'));
    assert.equal(await sha256(model.path), hub.file('acme/Tiny-GGUF', 'Tiny-Q4_K_M.gguf').sha256);
    assert.equal(existsSync(partPathFor(model.path)), false);
    assert.equal(hub.transfers('Tiny-Q8_0.gguf').length, 0, 'only the chosen quant is fetched');

    const size = hub.file('acme/Tiny-GGUF', 'Tiny-Q4_K_M.gguf').size;
    const last = events[events.length - 1] as DownloadProgress;
    assert.equal(last.done, true);
    assert.equal(last.doneBytes, size);
    assert.equal(last.totalBytes, size);
    assert.equal(last.fetchedBytes, size);
    assert.deepEqual(last.files.map((f) => f.state), ['done']);
    for (let i = 1; i < events.length; i += 1) assert.ok((events[i] as DownloadProgress).doneBytes >= (events[i - 1] as DownloadProgress).doneBytes);
    assert.ok(events.some((e) => e.files[0]?.state === 'downloading'));
    assert.ok(events.some((e) => e.files[0]?.state === 'verifying'));

    const index = JSON.parse(await readFile(join(hubStoreRoot(dataDir), 'index.json'), 'utf8')) as { models: Record<string, { revision: string }>; pending: object };
    assert.equal(index.models['acme/Tiny-GGUF:Q4_K_M']?.revision, revision);
    assert.deepEqual(index.pending, {});

    hub.resetCounters();
    const again = await store.pull({ repo: 'acme/Tiny-GGUF', quant: 'Q4_K_M' });
    assert.equal(again.path, model.path);
    assert.equal(hub.requests.filter((r) => r.route === 'resolve').length, 0);

    // A fresh store over the same directory finds it too.
    const reopened = await ModelStore.open({ dataDir, hub: { endpoint: hub.url }, reserveBytes: 0 });
    assert.equal(reopened.get('acme/Tiny-GGUF:Q4_K_M')?.path, model.path);
  });

  test('a split model downloads its shards as one model, at most maxConcurrentFiles at once', async () => {
    const { store } = await openStore({ maxConcurrentFiles: 2 });
    hub.resetCounters();
    hub.throttle(2 * 1024 * 1024);
    try {
      const model = await store.pull({ repo: 'acme/Split-GGUF' });
      assert.equal(model.modelId, 'acme/Split-GGUF:Q4_K_M');
      assert.equal(model.files.length, 3);
      assert.equal(model.primaryPath, 'Split-Q4_K_M-00001-of-00003.gguf');
      for (const f of model.files) assert.equal(await sha256(join(model.dir, f.path)), hub.file('acme/Split-GGUF', f.path).sha256);
      assert.equal(hub.peakConcurrentTransfers, 2);
    } finally {
      hub.throttle(null);
    }
  });

  test('a connection cut mid-file is retried from where the part file ends', async () => {
    const { store } = await openStore();
    const path = 'Big-Q4_K_M.gguf';
    const size = hub.file('acme/Big-GGUF', path).size;
    hub.resetCounters();
    hub.failAfter(path, 700_000);
    const model = await store.pull({ repo: 'acme/Big-GGUF' });
    assert.equal(await sha256(model.path), hub.file('acme/Big-GGUF', path).sha256);
    const transfers = hub.transfers(path);
    assert.equal(transfers.length, 2);
    assert.equal(transfers[0]?.cut, true);
    assert.equal(transfers[0]?.bodyBytes, 700_000);
    assert.equal(transfers[1]?.range, `bytes=700000-${size - 1}`);
    assert.equal(transfers[1]?.bodyBytes, size - 700_000);
    assert.equal(transfers.reduce((s, t) => s + t.bodyBytes, 0), size, 'no byte was fetched twice');
  });

  test('after a SIGKILL mid-download, the next pull fetches only the bytes not on disk', async () => {
    const { dataDir } = await openStore();
    const path = 'Big-Q4_K_M.gguf';
    const served = hub.file('acme/Big-GGUF', path);
    const finalPath = filePathFor(hubStoreRoot(dataDir), 'acme/Big-GGUF', hub.head('acme/Big-GGUF'), path);
    const part = partPathFor(finalPath);
    hub.resetCounters();
    hub.throttle(512 * 1024);
    const script = `
      const { ModelStore } = await import(process.env.STORE_MODULE);
      const store = await ModelStore.open({ dataDir: process.env.DATA_DIR, hub: { endpoint: process.env.HUB_URL }, reserveBytes: 0 });
      await store.pull({ repo: 'acme/Big-GGUF' });
      process.stdout.write('finished');
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, STORE_MODULE: new URL('./store.js', import.meta.url).href, DATA_DIR: dataDir, HUB_URL: hub.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code, sig) => r(sig ? -1 : code)));
    try {
      await until('the child to write part of the file', 20_000, async () => ((await sizeOf(part)) ?? 0) >= 600_000);
      child.kill('SIGKILL');
      assert.equal(await exited, -1, `child was killed, not finished: ${output}`);
    } finally {
      hub.throttle(null);
    }
    const onDisk = (await sizeOf(part)) as number;
    assert.ok(onDisk > 0 && onDisk < served.size, `part file holds ${onDisk} of ${served.size}`);
    assert.equal(existsSync(finalPath), false);

    hub.resetCounters();
    const store = await ModelStore.open({ dataDir, hub: { endpoint: hub.url }, reserveBytes: 0, progressIntervalMs: 0 });
    const events: DownloadProgress[] = [];
    const model = await store.pull({ repo: 'acme/Big-GGUF' }, { onProgress: (p) => events.push(p) });
    assert.equal(model.path, finalPath);
    assert.equal(await sha256(finalPath), served.sha256);
    const transfers = hub.transfers(path);
    assert.equal(transfers.length, 1);
    assert.equal(transfers[0]?.range, `bytes=${onDisk}-${served.size - 1}`);
    assert.equal(transfers[0]?.bodyBytes, served.size - onDisk);
    assert.equal(hub.served(path), served.size - onDisk + 1, 'the missing bytes plus the 1-byte probe, nothing else');
    assert.equal(events.find((e) => e.files[0]?.state === 'downloading')?.files[0]?.doneBytes, onDisk);
    assert.equal(events[events.length - 1]?.fetchedBytes, served.size - onDisk);
  });

  test('bytes that do not match the SHA-256 fail with CHECKSUM_MISMATCH and leave nothing behind', async () => {
    const { store, dataDir } = await openStore();
    const path = 'Tiny-Q8_0.gguf';
    hub.corrupt(path);
    const finalPath = filePathFor(hubStoreRoot(dataDir), 'acme/Tiny-GGUF', hub.head('acme/Tiny-GGUF'), path);
    try {
      await assert.rejects(store.pull({ repo: 'acme/Tiny-GGUF', quant: 'Q8_0' }), (e: unknown) => {
        assert.ok(isModelsError(e, 'CHECKSUM_MISMATCH'), String(e));
        assert.equal(e.code, 'INTERNAL');
        assert.equal(e.details.expected, hub.file('acme/Tiny-GGUF', path).sha256);
        assert.match(e.message, /Tiny-Q8_0\.gguf.*sha256.*part file was deleted/);
        return true;
      });
    } finally {
      hub.corrupt(path, false);
    }
    assert.equal(existsSync(finalPath), false);
    assert.equal(existsSync(partPathFor(finalPath)), false);
    assert.equal(store.get('acme/Tiny-GGUF:Q8_0'), null);
    const model = await store.pull({ repo: 'acme/Tiny-GGUF', quant: 'Q8_0' });
    assert.equal(await sha256(model.path), hub.file('acme/Tiny-GGUF', path).sha256);
  });

  test('a new revision replaces the old copy only once it has fully arrived; unchanged files are linked, not fetched', async () => {
    const repo = 'acme/Moving-GGUF';
    const rev1 = await hub.addRepo({
      repo,
      files: [
        { path: 'Moving-Q4_K_M-00001-of-00002.gguf', filePath: fixtures.s1 },
        { path: 'Moving-Q4_K_M-00002-of-00002.gguf', filePath: fixtures.s2 },
      ],
    });
    const { store } = await openStore();
    const old = await store.pull({ repo });
    assert.equal(old.revision, rev1);
    const rev2 = await hub.addRepo({
      repo,
      files: [
        { path: 'Moving-Q4_K_M-00001-of-00002.gguf', filePath: fixtures.s1 },
        { path: 'Moving-Q4_K_M-00002-of-00002.gguf', filePath: fixtures.s2v2 },
      ],
    });
    hub.resetCounters();
    hub.throttle(1024 * 1024);
    const checks: boolean[] = [];
    try {
      const model = await store.pull({ repo }, {
        onProgress: (p) => {
          if (p.files.some((f) => f.state === 'downloading') && checks.length < 3) {
            checks.push(store.get(old.modelId)?.revision === rev1 && old.files.every((f) => existsSync(join(old.dir, f.path))));
          }
        },
      });
      assert.equal(model.revision, rev2);
      assert.ok(checks.length > 0 && checks.every(Boolean), 'the old copy stayed in place while the new one downloaded');
      assert.equal(await sha256(join(model.dir, 'Moving-Q4_K_M-00002-of-00002.gguf')), hub.file(repo, 'Moving-Q4_K_M-00002-of-00002.gguf').sha256);
      assert.equal(await sha256(model.path), hub.file(repo, 'Moving-Q4_K_M-00001-of-00002.gguf').sha256);
    } finally {
      hub.throttle(null);
    }
    assert.equal(hub.transfers('Moving-Q4_K_M-00001-of-00002.gguf').length, 0, 'the unchanged shard was hard-linked');
    assert.equal(hub.transfers('Moving-Q4_K_M-00002-of-00002.gguf').length, 1);
    assert.equal(existsSync(old.dir), false, 'the old revision is gone');
    assert.equal(store.get(old.modelId)?.revision, rev2);
    // Asking for the old revision by commit still works, and replaces the copy again.
    const back = await store.pull({ repo, revision: rev1 });
    assert.equal(back.revision, rev1);
  });

  /** Bytes of a file on disk, like a member's copy: `flip` changes one byte in the middle. */
  function fileSource(path: string, opts: { flip?: boolean } = {}): ByteSource & { served: number } {
    const source = {
      name: 'member test',
      verb: 'copying' as const,
      badAnswer: 'PEER_COPY_FAILED' as const,
      retries: 0,
      served: 0,
      fetch: async (file: { size: number }, writer: { position: number; write(chunk: Uint8Array): Promise<void> }) => {
        const bytes = await readFile(path);
        const middle = Math.floor(bytes.length / 2);
        if (opts.flip) bytes[middle] = (bytes[middle] as number) ^ 0xff;
        for (let at = writer.position; at < file.size; at += 100_000) {
          const chunk = bytes.subarray(at, Math.min(file.size, at + 100_000));
          source.served += chunk.length;
          await writer.write(chunk);
        }
      },
      retryable: () => false,
      failure: (error: unknown) => new ModelsError('PEER_COPY_FAILED', errorMessage(error)),
    };
    return source;
  }

  test('another byte source (a member) continues the hub’s part file, is verified against the plan, and only indexed files are servable', async () => {
    const { store, dataDir } = await openStore({ retries: 0 });
    const repo = 'acme/Big-GGUF';
    const path = 'Big-Q4_K_M.gguf';
    const served = hub.file(repo, path);
    const plan = planDownload(await resolveRepo(repo, { endpoint: hub.url }));
    const finalPath = filePathFor(hubStoreRoot(dataDir), repo, plan.revision, path);
    assert.equal(store.servable(repo, plan.revision, path), null, 'nothing before it is complete');

    hub.failAfter(path, 300_000);
    await assert.rejects(store.download(plan), (e: unknown) => isModelsError(e, 'DOWNLOAD_FAILED'));
    assert.equal((await sizeOf(partPathFor(finalPath))), 300_000);
    assert.equal(store.servable(repo, plan.revision, path), null, 'a part file is never served');

    const wrong = fileSource(fixtures.big as string, { flip: true });
    await assert.rejects(store.download(plan, { source: wrong }), (e: unknown) => {
      assert.ok(isModelsError(e, 'CHECKSUM_MISMATCH'), String(e));
      assert.match(e.message, /from member test does not match/);
      return true;
    });
    assert.equal(existsSync(partPathFor(finalPath)), false, 'the bad bytes are gone, the prefix with them');

    hub.failAfter(path, 300_000);
    await assert.rejects(store.download(plan));
    hub.resetCounters();
    const good = fileSource(fixtures.big as string);
    const model = await store.download(plan, { source: good });
    assert.equal(good.served, served.size - 300_000, 'it continued where the hub stopped');
    assert.equal(hub.transfers(path).length, 0);
    assert.equal(await sha256(model.path), served.sha256);

    assert.deepEqual(store.servable(repo, plan.revision, path), { path: finalPath, file: { path, size: served.size, sha256: served.sha256, gitOid: served.gitOid } });
    assert.equal(store.servable(repo, plan.revision, `../${plan.revision}/${path}`), null);
    assert.equal(store.servable(repo, 'f'.repeat(40), path), null);
    assert.equal(store.servable('acme/Tiny-GGUF', plan.revision, path), null);
    assert.equal(store.servable(repo, plan.revision, 'index.json'), null);
  });

  test('cancelling keeps the part file; the next pull resumes it', async () => {
    const { store, dataDir } = await openStore();
    const path = 'Big-Q4_K_M.gguf';
    const served = hub.file('acme/Big-GGUF', path);
    const part = partPathFor(filePathFor(hubStoreRoot(dataDir), 'acme/Big-GGUF', hub.head('acme/Big-GGUF'), path));
    hub.throttle(1024 * 1024);
    const controller = new AbortController();
    try {
      const pulling = store.pull({ repo: 'acme/Big-GGUF' }, { signal: controller.signal });
      await until('some bytes', 10_000, async () => ((await sizeOf(part)) ?? 0) > 200_000);
      controller.abort();
      await assert.rejects(pulling, (e: unknown) => isShoalError(e) && e.code === 'CANCELLED');
    } finally {
      hub.throttle(null);
    }
    const onDisk = (await sizeOf(part)) as number;
    assert.ok(onDisk > 0 && onDisk < served.size);
    assert.deepEqual(store.downloading(), []);
    hub.resetCounters();
    await store.pull({ repo: 'acme/Big-GGUF' });
    assert.equal(hub.transfers(path)[0]?.bodyBytes, served.size - onDisk);
  });

  test('evictBeyond evicts idle models least recently used first, never one in use; usage and remove', async () => {
    const inUse = new Set<string>();
    const { store } = await openStore({ inUse: () => inUse });
    const a = await store.pull({ repo: 'acme/Tiny-GGUF', quant: 'Q4_K_M' });
    const b = await store.pull({ repo: 'acme/Tiny-GGUF', quant: 'Q8_0' });
    const s = await store.pull({ repo: 'acme/Split-GGUF' });
    await store.markUsed(a.modelId, 3_000_000_000_000);
    await store.markUsed(b.modelId, 1_000_000_000_000);
    await store.markUsed(s.modelId, 2_000_000_000_000);
    inUse.add(b.modelId);

    const usage = await store.usage();
    assert.deepEqual(usage.models.map((m) => [m.modelId, m.bytes, m.inUse]), [
      [s.modelId, s.bytes, false],
      [a.modelId, a.bytes, false],
      [b.modelId, b.bytes, true],
    ]);
    assert.equal(usage.modelBytes, a.bytes + b.bytes + s.bytes);
    assert.equal(usage.partialBytes, 0);
    assert.equal(usage.untrackedBytes, 0);
    assert.ok(usage.disk.freeBytes > 0);

    // b is least recently used but in use: s goes first, then a.
    const first = await store.evictBeyond(a.bytes + b.bytes);
    assert.deepEqual(first.evicted, [s.modelId]);
    assert.equal(first.keptBytes, a.bytes + b.bytes);
    assert.equal(first.overBudgetBytes, 0);
    assert.equal(existsSync(s.dir), false);
    const second = await store.evictBeyond(0);
    assert.deepEqual(second.evicted, [a.modelId]);
    assert.equal(second.overBudgetBytes, b.bytes);
    assert.ok(existsSync(b.path));

    await assert.rejects(store.remove(b.modelId), (e: unknown) => isModelsError(e, 'MODEL_IN_USE'));
    inUse.clear();
    assert.equal(await store.remove(b.modelId), true);
    assert.equal(await store.remove(b.modelId), false);
    assert.equal(existsSync(b.path), false);
    assert.equal((await store.usage()).totalBytes, 0);
  });

  test('downloads running at once count what the others still have to write', async (t) => {
    const mnt = join(dir, 'tmpfs-concurrent');
    await mkdir(mnt, { recursive: true });
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt], { encoding: 'utf8' });
    if (mounted.status !== 0) {
      t.skip(`cannot mount a tmpfs (needs root): ${mounted.stderr.trim() || mounted.error?.message}`);
      return;
    }
    hub.throttle(2 * 1024 * 1024);
    try {
      const repos: string[] = [];
      for (let i = 0; i < 4; i += 1) {
        const path = await ggufFixture(join(dir, `conc-${i}.gguf`), { seed: 200 + i, vocabSize: 4096 });
        const repo = `conc/Model${i}-GGUF`;
        await hub.addRepo({ repo, files: [{ path: `Conc${i}-Q4_K_M.gguf`, filePath: path }] });
        repos.push(repo);
      }
      const store = await ModelStore.open({ dataDir: join(mnt, 'data'), hub: { endpoint: hub.url }, reserveBytes: 512 * 1024, maxConcurrentFiles: 4 });
      // Each fits alone (~2.4 MiB of 7.5 MiB); all four at once do not, and nothing is idle to evict.
      const results = await Promise.allSettled(repos.map((repo) => store.pull({ repo })));
      const failed = results.filter((r) => r.status === 'rejected');
      assert.equal(failed.length, 1, JSON.stringify(results.map((r) => r.status)));
      const reason = (failed[0] as PromiseRejectedResult).reason as unknown;
      assert.ok(isModelsError(reason, 'INSUFFICIENT_DISK'), String(reason));
      assert.ok((reason.details.reservedByOthersBytes as number) > 0);
      assert.match(reason.message, /promised to other downloads/);
      assert.equal(store.list().length, 3);
    } finally {
      hub.throttle(null);
      const un = spawnSync('umount', [mnt], { encoding: 'utf8' });
      assert.equal(un.status, 0, `umount ${mnt}: ${un.stderr}`);
    }
  });

  test('disk admission on a small filesystem: LRU idle copies are evicted to fit, in-use ones never, and a model that cannot fit fails before writing', async (t) => {
    const mnt = join(dir, 'tmpfs');
    await mkdir(mnt, { recursive: true });
    const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt], { encoding: 'utf8' });
    if (mounted.status !== 0) {
      t.skip(`cannot mount a tmpfs (needs root): ${mounted.stderr.trim() || mounted.error?.message}`);
      return;
    }
    try {
      const repos: string[] = [];
      for (let i = 0; i < 5; i += 1) {
        const path = await ggufFixture(join(dir, `disk-${i}.gguf`), { seed: 100 + i, vocabSize: 4096 });
        const repo = `disk/Model${i}-GGUF`;
        await hub.addRepo({ repo, files: [{ path: `Model${i}-Q4_K_M.gguf`, filePath: path }] });
        repos.push(repo);
      }
      const size = hub.file(repos[0] as string, 'Model0-Q4_K_M.gguf').size; // ~2.4 MiB
      const inUse = new Set<string>();
      const dataDir = join(mnt, 'data');
      const reserveBytes = 512 * 1024;
      let clock = 0;
      const store = await ModelStore.open({ dataDir, hub: { endpoint: hub.url }, reserveBytes, inUse: () => inUse, retryDelayMs: 10, now: () => clock });

      // Nothing fits under a 10 GiB reserve (the default): refused with the numbers, nothing written.
      const strict = await ModelStore.open({ dataDir, hub: { endpoint: hub.url } });
      await assert.rejects(strict.pull({ repo: repos[0] as string }), (e: unknown) => {
        assert.ok(isModelsError(e, 'INSUFFICIENT_DISK'), String(e));
        assert.equal(e.code, 'DISK_FULL');
        assert.equal(e.details.neededBytes, size);
        assert.equal(e.details.reserveBytes, 10 * 1024 ** 3);
        assert.match(e.message, /needs \d\.\d+ MiB more.*free.*10\.0 GiB reserve/);
        return true;
      });

      const ids: string[] = [];
      for (const [i, repo] of repos.slice(0, 3).entries()) {
        clock = [1_000, 3_000, 2_000][i] as number;
        const m = await store.pull({ repo });
        ids.push(m.modelId);
      }
      clock = 10_000;
      // Three copies (~7.1 MiB) leave too little above the reserve for a fourth: model 0 is the least
      // recently used, but in use; model 2 is next and goes.
      inUse.add(ids[0] as string);
      assert.ok((await store.freeBytes()) - reserveBytes < size);
      const fourth = await store.pull({ repo: repos[3] as string });
      ids.push(fourth.modelId);
      assert.deepEqual(store.list().map((m) => m.modelId).sort(), [ids[0], ids[1], ids[3]].sort());
      assert.equal(existsSync(filePathFor(store.root, repos[2] as string, hub.head(repos[2] as string), 'Model2-Q4_K_M.gguf')), false);

      // With every copy in use, a fifth cannot fit: it fails before writing, evicting nothing.
      for (const id of ids) inUse.add(id);
      hub.resetCounters();
      await assert.rejects(store.pull({ repo: repos[4] as string }), (e: unknown) => {
        assert.ok(isModelsError(e, 'INSUFFICIENT_DISK'), String(e));
        assert.equal(e.details.neededBytes, size);
        assert.equal(e.details.evictableBytes, 0);
        assert.equal(e.details.reserveBytes, reserveBytes);
        assert.ok((e.details.freeBytes as number) < size + reserveBytes);
        return true;
      });
      assert.equal(hub.transfers('Model4-Q4_K_M.gguf').length, 0);
      assert.equal(existsSync(join(store.root, 'disk', 'Model4-GGUF')), false, 'nothing written for the refused model');
      assert.equal(store.list().length, 3);

      // Once one is idle again, it is evicted for the fifth.
      inUse.delete(ids[1] as string);
      const fifth = await store.pull({ repo: repos[4] as string });
      assert.ok(existsSync(fifth.path));
      assert.equal(store.get(ids[1] as string), null);
    } finally {
      const un = spawnSync('umount', [mnt], { encoding: 'utf8' });
      assert.equal(un.status, 0, `umount ${mnt}: ${un.stderr}`);
    }
  });
});

test('the progress line fits its width and says percent, sizes, rate and ETA', () => {
  const p: DownloadProgress = {
    modelId: 'bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M',
    repo: 'bartowski/Llama-3.2-1B-Instruct-GGUF',
    revision: 'a'.repeat(40),
    files: [],
    doneBytes: 512 * 1024 * 1024,
    totalBytes: 1024 * 1024 * 1024,
    fetchedBytes: 0,
    bytesPerSecond: 32 * 1024 * 1024,
    etaSeconds: 16,
    done: false,
  };
  const line = renderProgressLine(p, 100);
  assert.ok(line.length <= 100, line);
  assert.match(line, /\[#+-+\]\s+50%\s+512 MiB\/1.00 GiB\s+32.0 MiB\/s\s+ETA 16s$/);
  assert.match(line, /Q4_K_M/);
  assert.ok(renderProgressLine(p, 40).length <= 40);
  assert.match(renderProgressLine({ ...p, doneBytes: p.totalBytes, done: true, etaSeconds: 0 }, 100), /100%.*done$/);
  // Not a terminal: no bar is drawn.
  const written: string[] = [];
  const fake = { isTTY: false, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream;
  const bar = progressBarWriter(fake);
  bar.onProgress(p);
  bar.end();
  assert.equal(written.length, 0);
  const tty = { isTTY: true, columns: 80, write: (s: string) => written.push(s) } as unknown as NodeJS.WriteStream;
  const bar2 = progressBarWriter(tty);
  bar2.onProgress(p);
  bar2.end();
  assert.equal(written.length, 2);
  assert.ok(written[0]?.startsWith('\r') && written[0].endsWith('\x1b[K'), JSON.stringify(written[0]));
});
