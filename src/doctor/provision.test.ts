import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { create } from 'tar';
import { createLogger } from '../common/log.js';
import { builtEngines } from '../../test/support/engines.js';
import {
  bundledSource,
  engineBinaryPath,
  engineCacheDir,
  ENGINE_NAMES,
  manifestPath,
  readEngineManifest,
  type BuildEnginesOptions,
  type BuildEnginesResult,
  type EngineManifest,
  type EngineSource,
} from './engines.js';
import { EngineProvisioner, enginesAtStartState, type ProvisionPhase } from './provision.js';
import type { EngineRelease } from './releases.js';
import { engineReleaseBaseUrl, engineReleases, findEngineRelease, releaseUrl } from './releases.js';
import { ShoalError } from '../common/errors.js';

const source = bundledSource() as EngineSource;
const tools = { ok: true, missing: [], installHint: null };

function capturingLog(): { log: ReturnType<typeof createLogger>; lines: () => { msg: string; phase?: string }[] } {
  const lines: string[] = [];
  const log = createLogger({ level: 'info', pretty: false, recent: { write: (line) => lines.push(line) } });
  return { log, lines: () => lines.map((line) => JSON.parse(line) as { msg: string; phase?: string }) };
}

/** A release host standing in for the real one: serves the files it is given, 404 for anything else, counting requests. */
async function releaseHost(files: Record<string, string>): Promise<{ url: string; requests: string[]; server: Server }> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(req.url ?? '');
    const path = files[req.url ?? ''];
    if (path === undefined) {
      res.writeHead(404).end('not found');
      return;
    }
    void stat(path).then((info) => {
      res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': info.size });
      createReadStream(path).pipe(res);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/releases/download`, requests, server };
}

async function sha256Of(path: string): Promise<string> {
  return createHash('sha256').update(await readFile(path)).digest('hex');
}

/** A builder standing in for buildEngines: records what it was asked, installs `binaries` as a build would. */
function recordingBuilder(root: string, binaries: { server: string; rpc: string }): { build: (options: BuildEnginesOptions) => Promise<BuildEnginesResult>; calls: BuildEnginesOptions[] } {
  const calls: BuildEnginesOptions[] = [];
  return {
    calls,
    build: async (options) => {
      calls.push(options);
      options.onProgress?.({ phase: 'build', percent: 50, message: 'compiling llama-server' });
      const compute = options.compute ?? 'cpu';
      const dir = engineCacheDir(root, source.commit, compute);
      await mkdir(join(dir, 'bin'), { recursive: true });
      await copyFile(binaries.server, engineBinaryPath(dir, 'llama-server'));
      await copyFile(binaries.rpc, engineBinaryPath(dir, 'ggml-rpc-server'));
      const manifest: EngineManifest = { commit: source.commit, compute, engines: [...ENGINE_NAMES], cmakeFlags: [], builtAt: new Date().toISOString(), buildSeconds: 1, source: 'build' };
      await writeFile(manifestPath(dir), JSON.stringify(manifest));
      return { dir, commit: source.commit, compute, cached: false, buildSeconds: 1, binaries: { 'llama-server': engineBinaryPath(dir, 'llama-server'), 'ggml-rpc-server': engineBinaryPath(dir, 'ggml-rpc-server') } };
    },
  };
}

describe('releases', () => {
  test('the release URL resolves a path under the base, with or without a trailing slash', () => {
    assert.equal(releaseUrl('http://h:1/dl', { path: 'b1/x.tar.gz' }), 'http://h:1/dl/b1/x.tar.gz');
    assert.equal(releaseUrl('http://h:1/dl/', { path: '/b1/x.tar.gz' }), 'http://h:1/dl/b1/x.tar.gz');
    assert.equal(engineReleaseBaseUrl({ SHOAL_ENGINE_RELEASE_URL: 'http://mirror/x' }), 'http://mirror/x');
    assert.match(engineReleaseBaseUrl({}), /^https:\/\//);
  });

  test('only the entry for this commit, platform, architecture and compute is chosen', () => {
    const entry = { commit: 'a'.repeat(40), platform: 'linux', arch: 'x64', compute: 'cpu' } as EngineRelease;
    assert.equal(findEngineRelease([entry], { commit: 'a'.repeat(40), compute: 'cpu', platform: 'linux', arch: 'x64' }), entry);
    assert.equal(findEngineRelease([entry], { commit: 'b'.repeat(40), compute: 'cpu', platform: 'linux', arch: 'x64' }), null);
    assert.equal(findEngineRelease([entry], { commit: 'a'.repeat(40), compute: 'cuda', platform: 'linux', arch: 'x64' }), null);
    assert.equal(findEngineRelease([entry], { commit: 'a'.repeat(40), compute: 'cpu', platform: 'linux', arch: 'arm64' }), null);
  });
});

describe('the release table from SHOAL_ENGINE_RELEASE_MANIFEST', () => {
  test('a table that parses replaces the pinned one; one that does not is a typed error naming the setting', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-release-table-'));
    try {
      const entry = { commit: source.commit, platform: 'linux', arch: 'x64', compute: 'cpu', path: 'a/b.tar.gz', archive: 'tar.gz', sha256: 'AB'.repeat(32), files: { 'llama-server': 'bin/llama-server', 'ggml-rpc-server': 'bin/rpc-server' } };
      await writeFile(join(dir, 'good.json'), JSON.stringify([entry]));
      const table = await engineReleases({ SHOAL_ENGINE_RELEASE_MANIFEST: join(dir, 'good.json') });
      assert.equal(table.length, 1);
      assert.equal(table[0]?.sha256, 'ab'.repeat(32));
      assert.deepEqual(table[0]?.libs, []);
      assert.deepEqual(await engineReleases({}), []);
      await writeFile(join(dir, 'bad.json'), JSON.stringify([{ ...entry, archive: 'zip' }]));
      await assert.rejects(engineReleases({ SHOAL_ENGINE_RELEASE_MANIFEST: join(dir, 'bad.json') }), (error: unknown) => error instanceof ShoalError && error.code === 'BAD_REQUEST' && /SHOAL_ENGINE_RELEASE_MANIFEST/.test(error.message));
      await assert.rejects(engineReleases({ SHOAL_ENGINE_RELEASE_MANIFEST: join(dir, 'missing.json') }), (error: unknown) => error instanceof ShoalError && error.code === 'BAD_REQUEST');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('EngineProvisioner', { concurrency: false }, () => {
  let binaries: { server: string; rpc: string } | string;
  let work: string;
  let archive: string;
  let archiveSha: string;
  let host: Awaited<ReturnType<typeof releaseHost>>;
  const assetPath = 'test-tag/llama-test-bin-linux-x64.tar.gz';

  before(async () => {
    binaries = await builtEngines();
    work = await mkdtemp(join(tmpdir(), 'shoal-provision-'));
    if (typeof binaries === 'string') return;
    // Laid out as upstream lays out its archives: the rpc server under another name, in a subfolder.
    const staging = join(work, 'staging');
    await mkdir(join(staging, 'build', 'bin'), { recursive: true });
    await copyFile(binaries.server, join(staging, 'build', 'bin', 'llama-server'));
    await copyFile(binaries.rpc, join(staging, 'build', 'bin', 'rpc-server'));
    await writeFile(join(staging, 'build', 'bin', 'libstand-in.so'), 'a library the engines would load');
    archive = join(work, 'release.tar.gz');
    await create({ gzip: true, file: archive, cwd: staging }, ['build']);
    archiveSha = await sha256Of(archive);
    host = await releaseHost({ [`/releases/download/${assetPath}`]: archive });
  });

  after(async () => {
    host?.server.close();
    await rm(work, { recursive: true, force: true });
  });

  const release = (sha256: string): EngineRelease => ({
    commit: source.commit,
    platform: process.platform,
    arch: process.arch,
    compute: 'cpu',
    path: assetPath,
    archive: 'tar.gz',
    sha256,
    files: { 'llama-server': 'build/bin/llama-server', 'ggml-rpc-server': 'build/bin/rpc-server' },
    libs: ['build/bin/libstand-in.so'],
  });

  test('a release archive is downloaded from the release host, verified, probed and installed with its checksum', async (t) => {
    if (typeof binaries === 'string') return t.skip(binaries);
    const root = join(work, 'release-ok');
    const { log, lines } = capturingLog();
    const builder = recordingBuilder(root, binaries);
    const phases: ProvisionPhase[] = [];
    const provisioner = new EngineProvisioner({ log, cacheRoot: root, source, compute: 'cpu', releases: [release(archiveSha)], releaseBaseUrl: host.url, build: builder.build, buildTools: async () => tools });
    provisioner.onChange((state) => {
      if (phases.at(-1) !== state.phase) phases.push(state.phase);
    });
    const ready = await provisioner.whenReady();
    assert.ok(ready);
    assert.equal(ready.source, 'release');
    assert.deepEqual(phases, ['checking', 'downloading', 'verifying', 'ready']);
    assert.equal(builder.calls.length, 0, 'a verified release needs no build');
    assert.ok(host.requests.includes(`/releases/download/${assetPath}`));
    const manifest = await readEngineManifest(ready.dir);
    assert.equal(manifest?.source, 'release');
    assert.equal(manifest?.sha256, archiveSha);
    assert.deepEqual(await readFile(ready.binaries['ggml-rpc-server']), await readFile(binaries.rpc));
    assert.ok((await stat(join(ready.dir, 'bin', 'libstand-in.so'))).isFile());
    assert.equal(provisioner.state().source, 'release');
    assert.ok(lines().some((l) => l.phase === 'downloading'), 'the download shows in the log');

    // A second provisioner (the next start) finds them in the cache and fetches nothing.
    const before = host.requests.length;
    const again = new EngineProvisioner({ log, cacheRoot: root, source, compute: 'cpu', releases: [release(archiveSha)], releaseBaseUrl: host.url, build: builder.build, buildTools: async () => tools });
    const cached = await again.whenReady();
    assert.equal(cached?.source, 'cache');
    assert.equal(again.state().phase, 'cached');
    assert.equal(host.requests.length, before);
  });

  test('an archive with another checksum is refused and the engines are built from source, at low priority', async (t) => {
    if (typeof binaries === 'string') return t.skip(binaries);
    const root = join(work, 'release-bad-sum');
    const { log, lines } = capturingLog();
    const builder = recordingBuilder(root, binaries);
    const provisioner = new EngineProvisioner({ log, cacheRoot: root, source, compute: 'cpu', releases: [release('0'.repeat(64))], releaseBaseUrl: host.url, build: builder.build, buildTools: async () => tools });
    const ready = await provisioner.whenReady();
    assert.equal(ready?.source, 'build');
    assert.equal(builder.calls.length, 1);
    assert.equal(builder.calls[0]?.lowPriority, true);
    assert.equal(builder.calls[0]?.compute, 'cpu');
    assert.ok(lines().some((l) => l.msg.includes('SHA-256') && l.msg.includes('refused')), 'the refusal is logged');
    assert.equal((await readEngineManifest(ready.dir))?.source, 'build');
  });

  test('a release the host does not have falls back to building', async (t) => {
    if (typeof binaries === 'string') return t.skip(binaries);
    const root = join(work, 'release-404');
    const builder = recordingBuilder(root, binaries);
    const missing = { ...release(archiveSha), path: 'other/none.tar.gz' };
    const provisioner = new EngineProvisioner({ log: createLogger({ level: 'silent' }), cacheRoot: root, source, compute: 'cpu', releases: [missing], releaseBaseUrl: host.url, build: builder.build, buildTools: async () => tools });
    assert.equal((await provisioner.whenReady())?.source, 'build');
    assert.equal(builder.calls.length, 1);
  });

  test('a release host that stops sending mid-download is given up and the engines are built', async (t) => {
    if (typeof binaries === 'string') return t.skip(binaries);
    const root = join(work, 'release-stalled');
    const builder = recordingBuilder(root, binaries);
    // Headers and a first chunk, then silence with the connection held open.
    const stalled = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/gzip', 'content-length': 1_000_000 });
      res.write(Buffer.alloc(1024));
    });
    stalled.listen(0, '127.0.0.1');
    await once(stalled, 'listening');
    try {
      const url = `http://127.0.0.1:${(stalled.address() as AddressInfo).port}/releases/download`;
      const lines = capturingLog();
      const provisioner = new EngineProvisioner({ log: lines.log, cacheRoot: root, source, compute: 'cpu', releases: [release(archiveSha)], releaseBaseUrl: url, releaseIdleMs: 300, build: builder.build, buildTools: async () => tools });
      assert.equal((await provisioner.whenReady())?.source, 'build');
      assert.equal(builder.calls.length, 1);
      assert.ok(lines.lines().some((l) => l.msg.includes('sent nothing for 0.3 s')), JSON.stringify(lines.lines()));
    } finally {
      stalled.closeAllConnections();
      stalled.close();
    }
  });

  test('with no release for this platform the build runs and its progress shows', async (t) => {
    if (typeof binaries === 'string') return t.skip(binaries);
    const root = join(work, 'no-release');
    const builder = recordingBuilder(root, binaries);
    const percents: number[] = [];
    const provisioner = new EngineProvisioner({ log: createLogger({ level: 'silent' }), cacheRoot: root, source, compute: 'cpu', releases: [], build: builder.build, buildTools: async () => tools });
    provisioner.onChange((state) => {
      if (state.phase === 'building' && state.percent !== null) percents.push(state.percent);
    });
    assert.equal((await provisioner.whenReady())?.source, 'build');
    assert.deepEqual(percents, [0, 50]);
  });

  test('a machine without build tools gets the install command and no engines', async () => {
    const root = join(work, 'no-tools');
    let built = false;
    const provisioner = new EngineProvisioner({
      log: createLogger({ level: 'silent' }),
      cacheRoot: root,
      source,
      compute: 'cpu',
      releases: [],
      build: async () => {
        built = true;
        throw new Error('must not build');
      },
      buildTools: async () => ({ ok: false, missing: ['cmake', 'c++ compiler'], installHint: 'sudo apt-get install -y cmake g++' }),
    });
    assert.equal(await provisioner.whenReady(), null);
    const state = provisioner.state();
    assert.equal(state.phase, 'unavailable');
    assert.match(state.message, /cmake, c\+\+ compiler/);
    assert.match(state.message, /keeps serving/);
    assert.match(state.remediation ?? '', /sudo apt-get install -y cmake g\+\+/);
    assert.equal(built, false);
  });

  test('a cached build is found at once, with nothing downloaded or built', async () => {
    const root = join(work, 'cached');
    const dir = engineCacheDir(root, source.commit, 'cpu');
    await mkdir(join(dir, 'bin'), { recursive: true });
    for (const name of ENGINE_NAMES) {
      await writeFile(engineBinaryPath(dir, name), '#!/bin/sh\n');
      await chmod(engineBinaryPath(dir, name), 0o755);
    }
    await writeFile(manifestPath(dir), JSON.stringify({ commit: source.commit, compute: 'cpu', engines: [...ENGINE_NAMES], cmakeFlags: [], builtAt: 'x', buildSeconds: 1 }));
    const provisioner = new EngineProvisioner({
      log: createLogger({ level: 'silent' }),
      cacheRoot: root,
      source,
      releases: [release('0'.repeat(64))],
      releaseBaseUrl: 'http://127.0.0.1:9/never',
      build: () => Promise.reject(new Error('must not build')),
      buildTools: () => Promise.reject(new Error('must not check tools')),
    });
    const ready = await provisioner.whenReady();
    assert.equal(ready?.source, 'cache');
    assert.equal(ready?.dir, dir);
    assert.equal(provisioner.state().phase, 'cached');
  });

  test('disposing cancels a build in progress; the state says so', async () => {
    const root = join(work, 'cancel');
    let sawSignal: AbortSignal | undefined;
    const provisioner = new EngineProvisioner({
      log: createLogger({ level: 'silent' }),
      cacheRoot: root,
      source,
      compute: 'cpu',
      releases: [],
      buildTools: async () => tools,
      build: (options) =>
        new Promise((_resolve, reject) => {
          sawSignal = options.signal;
          options.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
        }),
    }).start();
    while (provisioner.state().phase !== 'building') await new Promise((r) => setTimeout(r, 5));
    await provisioner[Symbol.asyncDispose]();
    assert.equal(sawSignal?.aborted, true);
    assert.equal(provisioner.state().phase, 'failed');
    assert.match(provisioner.state().message, /cancelled/);
    assert.equal(await provisioner.whenReady(), null);
  });

  test('with provisioning off, the state names the cached engines or what to run', () => {
    assert.equal(enginesAtStartState({ compute: 'cuda' }).phase, 'cached');
    const off = enginesAtStartState(null);
    assert.equal(off.phase, 'unavailable');
    assert.match(off.remediation ?? '', /shoal doctor --fix/);
  });
});
