// A fresh node (an empty engine cache) serves at once and provisions llama-server / ggml-rpc-server in
// the background from a release host: here a local HTTP server serving a real tar.gz of the real
// binaries, named with its real SHA-256 in a release table (SHOAL_ENGINE_RELEASE_MANIFEST). `GET /state`
// shows the provisioning, and the node advertises the engines once they are in.

import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { create } from 'tar';
import type { StatusView } from '../../src/api/control/control.js';
import { bundledSource, readEngineManifest, engineCacheDir } from '../../src/doctor/engines.js';
import { builtEngines } from '../support/engines.js';
import { startTestNode } from '../support/node-process.js';

const ASSET = 'shoal-test/engines-linux.tar.gz';
let work: string;
let baseUrl: string;
let manifestFile: string;
let archiveSha: string;
let requests = 0;
let skip: string | null = null;
const server = createServer((req, res) => {
  requests += 1;
  if (req.url !== `/dl/${ASSET}`) {
    res.writeHead(404).end();
    return;
  }
  const archive = join(work, 'engines.tar.gz');
  void stat(archive).then((info) => {
    res.writeHead(200, { 'content-length': info.size });
    createReadStream(archive).pipe(res);
  });
});

before(async () => {
  const binaries = await builtEngines();
  const source = bundledSource();
  if (typeof binaries === 'string' || source === null) {
    skip = typeof binaries === 'string' ? binaries : 'no llama.cpp source bundle';
    return;
  }
  work = await mkdtemp(join(tmpdir(), 'shoal-engine-release-'));
  await mkdir(join(work, 'staging', 'bin'), { recursive: true });
  await copyFile(binaries.server, join(work, 'staging', 'bin', 'llama-server'));
  await copyFile(binaries.rpc, join(work, 'staging', 'bin', 'rpc-server'));
  await create({ gzip: true, file: join(work, 'engines.tar.gz'), cwd: join(work, 'staging') }, ['bin']);
  archiveSha = createHash('sha256').update(await readFile(join(work, 'engines.tar.gz'))).digest('hex');
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/dl`;
  manifestFile = join(work, 'releases.json');
  const entry = {
    commit: source.commit,
    platform: process.platform,
    arch: process.arch,
    compute: 'cpu',
    path: ASSET,
    archive: 'tar.gz',
    sha256: archiveSha,
    files: { 'llama-server': 'bin/llama-server', 'ggml-rpc-server': 'bin/rpc-server' },
    libs: [],
  };
  await writeFile(manifestFile, JSON.stringify([entry]));
});

after(async () => {
  server.close();
  if (work) await rm(work, { recursive: true, force: true });
});

async function state(url: string): Promise<StatusView> {
  return (await (await fetch(`${url}/state`)).json()) as StatusView;
}

test('a node with an empty engine cache serves at once and installs the engines from the release host', async (t) => {
  if (skip !== null) return t.skip(skip);
  const cache = join(work, 'cache');
  // CPU only: the release is the CPU build, and a GPU here would make the node want another compute.
  await using node = await startTestNode({
    args: ['--gpu', 'false'],
    env: { SHOAL_PROVISION: '1', SHOAL_ENGINE_CACHE: cache, SHOAL_ENGINE_RELEASE_URL: baseUrl, SHOAL_ENGINE_RELEASE_MANIFEST: manifestFile },
  });
  // Healthy before the engines exist: it serves on node-llama-cpp meanwhile, and keeps serving through
  // the move onto llama-server: one request after another for the whole test, none may fail.
  let serving = true;
  const answered: { status: number }[] = [];
  const traffic = (async () => {
    while (serving) {
      const res = await fetch(`${node.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'shoal/tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }) });
      await res.text();
      answered.push({ status: res.status });
    }
  })();
  const first = await state(node.url);
  assert.ok(first.engines, 'GET /state has the engines view');
  const phases = new Set<string>([first.engines.phase]);
  const deadline = Date.now() + 60_000;
  let last = first;
  while (last.engines?.phase !== 'ready' && Date.now() < deadline) {
    assert.notEqual(last.engines?.phase, 'building', `a verified release must not be built from source: ${node.output()}`);
    assert.notEqual(last.engines?.phase, 'failed', `${JSON.stringify(last.engines)}\n${node.output()}`);
    await new Promise((r) => setTimeout(r, 100));
    last = await state(node.url);
    if (last.engines) phases.add(last.engines.phase);
  }
  assert.equal(last.engines?.phase, 'ready', `${JSON.stringify(last.engines)}\n${node.output()}`);
  assert.equal(last.engines?.source, 'release');
  assert.ok(requests >= 1, 'the release host was asked');
  const manifest = await readEngineManifest(engineCacheDir(cache, (bundledSource() as { commit: string }).commit, 'cpu'));
  assert.equal(manifest?.source, 'release');
  assert.equal(manifest?.sha256, archiveSha);
  // The node takes them up: the new factory's backends are advertised (logged as it does).
  const deadlineLog = Date.now() + 10_000;
  while (!/now advertises [^\n]*llama_server-cpu/.test(node.output()) && Date.now() < deadlineLog) await new Promise((r) => setTimeout(r, 100));
  assert.match(node.output(), /now advertises [^\n]*llama_server-cpu/);
  // The default model moves onto llama-server (src/worker/handover.ts) with no failed request.
  const backendOf = async (): Promise<string | undefined> => ((await (await fetch(`${node.url}/healthz`)).json()) as { models: { backend: string }[] }).models[0]?.backend;
  const deadlineMove = Date.now() + 30_000;
  while ((await backendOf()) !== 'llama_server-cpu' && Date.now() < deadlineMove) await new Promise((r) => setTimeout(r, 100));
  assert.equal(await backendOf(), 'llama_server-cpu', node.output());
  const movedAt = answered.length;
  while (answered.length < movedAt + 3) await new Promise((r) => setTimeout(r, 50));
  serving = false;
  await traffic;
  assert.deepEqual(answered.filter((a) => a.status !== 200), [], 'every request before, during and after the move was served');
  assert.ok(answered.length >= 4);
});

test('a node started with --no-provision says what to run when the engines are missing', async (t) => {
  if (skip !== null) return t.skip(skip);
  await using node = await startTestNode({ args: ['--no-provision', '--gpu', 'false'], env: { SHOAL_PROVISION: '1', SHOAL_ENGINE_CACHE: join(work, 'empty-cache'), SHOAL_ENGINE_RELEASE_MANIFEST: manifestFile, SHOAL_ENGINE_RELEASE_URL: baseUrl } });
  const before = requests;
  const view = (await state(node.url)).engines;
  assert.equal(view?.phase, 'unavailable');
  assert.match(view?.remediation ?? '', /shoal doctor --fix/);
  assert.equal(requests, before, 'nothing was downloaded');
});
