import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createServer } from 'node:net';
import { ggufFixture, HubServer } from '../../../test/support/hub-server.js';
import { resolveRepo, search } from './client.js';
import { isModelsError } from './errors.js';

const bytes = (n: number, fill: number): Uint8Array => new Uint8Array(n).fill(fill);

describe('hub client against a local hub', () => {
  let dir: string;
  let hub: HubServer;
  let firstMain: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-hub-'));
    const q4 = await ggufFixture(join(dir, 'q4.gguf'), { seed: 1 });
    hub = await HubServer.start([
      {
        repo: 'bartowski/Tiny-Llama-1B-Instruct-GGUF',
        downloads: 10,
        files: [
          { path: 'Tiny-Llama-1B-Instruct-Q4_K_M.gguf', filePath: q4 },
          { path: 'Tiny-Llama-1B-Instruct-Q8_0.gguf', bytes: bytes(3000, 8) },
          { path: 'README.md', bytes: bytes(10, 65), lfs: false },
        ],
      },
      {
        repo: 'popular/Tiny-Llama-1B-Instruct-GGUF',
        downloads: 1000,
        files: [{ path: 'tiny-llama-1b-instruct.Q5_K_M.gguf', bytes: bytes(2000, 5) }],
      },
      { repo: 'meta/Tiny-Llama-1B-Instruct', downloads: 5000, files: [{ path: 'model.safetensors', bytes: bytes(100, 1) }] },
      {
        repo: 'split/Big-GGUF',
        files: [
          { path: 'Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf', bytes: bytes(1000, 1) },
          { path: 'Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf', bytes: bytes(1000, 2) },
          { path: 'Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf', bytes: bytes(500, 3) },
          { path: 'Big-Q8_0.gguf', bytes: bytes(5000, 8) },
          { path: 'tiny-notes.gguf', bytes: bytes(40, 9), lfs: false },
        ],
      },
    ]);
    firstMain = hub.head('split/Big-GGUF');
  });

  after(async () => {
    await hub.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('a pasted GGUF file name finds its repo first, by the file name stem', async () => {
    hub.resetCounters();
    const results = await search('Tiny-Llama-1B-Instruct-Q4_K_M.gguf', { endpoint: hub.url });
    assert.deepEqual(results.map((r) => r.repo), ['bartowski/Tiny-Llama-1B-Instruct-GGUF', 'popular/Tiny-Llama-1B-Instruct-GGUF']);
    const first = results[0];
    assert.equal(first?.matchedFile, 'Tiny-Llama-1B-Instruct-Q4_K_M.gguf');
    assert.equal(results[1]?.matchedFile, null);
    const served = hub.file('bartowski/Tiny-Llama-1B-Instruct-GGUF', 'Tiny-Llama-1B-Instruct-Q4_K_M.gguf');
    const listed = first?.files.find((f) => f.path === served.path);
    assert.deepEqual(listed, { path: served.path, size: served.size, sha256: served.sha256, gitOid: served.gitOid });
    assert.deepEqual(first?.files.map((f) => f.path), ['Tiny-Llama-1B-Instruct-Q4_K_M.gguf', 'Tiny-Llama-1B-Instruct-Q8_0.gguf']);
    assert.equal(first?.defaultGroup, 'Tiny-Llama-1B-Instruct-Q4_K_M.gguf');
    assert.equal(first?.revision, hub.head('bartowski/Tiny-Llama-1B-Instruct-GGUF'));
    const list = hub.requests.find((r) => r.route === 'list');
    assert.equal(new URL(list?.url as string, hub.url).searchParams.get('search'), 'Tiny-Llama-1B-Instruct');
    assert.ok(hub.requests.some((r) => r.route === 'paths-info'), 'sizes come from paths-info');
  });

  test('free text finds GGUF repos, most downloaded first; repos without GGUF are left out', async () => {
    const results = await search('tiny-llama', { endpoint: hub.url });
    assert.deepEqual(results.map((r) => r.repo), ['popular/Tiny-Llama-1B-Instruct-GGUF', 'bartowski/Tiny-Llama-1B-Instruct-GGUF']);
    assert.equal(results[0]?.files[0]?.size, 2000);
    assert.deepEqual(await search('no-such-model', { endpoint: hub.url }), []);
    assert.equal((await search('tiny-llama', { endpoint: hub.url, limit: 1 })).length, 1);
  });

  test('a file name with words the repo lacks is retried with fewer words', async () => {
    const results = await search('Tiny-Llama-1B-Instruct-v2-Q4_K_M.gguf', { endpoint: hub.url });
    assert.ok(results.length >= 1);
    assert.ok(results.every((r) => r.repo.includes('Tiny-Llama-1B-Instruct')));
  });

  test('a repo id answers with that repo first', async () => {
    const results = await search('split/Big-GGUF', { endpoint: hub.url });
    assert.equal(results[0]?.repo, 'split/Big-GGUF');
    assert.equal(results[0]?.revision, hub.head('split/Big-GGUF'));
  });

  test('resolveRepo pins the commit and lists GGUF files with sizes and SHA-256, split files grouped', async () => {
    const r = await resolveRepo('split/Big-GGUF', { endpoint: hub.url });
    assert.equal(r.revision, firstMain);
    assert.equal(r.requestedRevision, 'main');
    assert.deepEqual(r.files.map((f) => [f.path, f.size]), [
      ['Big-Q8_0.gguf', 5000],
      ['Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf', 1000],
      ['Q4_K_M/Big-Q4_K_M-00002-of-00003.gguf', 1000],
      ['Q4_K_M/Big-Q4_K_M-00003-of-00003.gguf', 500],
      ['tiny-notes.gguf', 40],
    ]);
    for (const f of r.files) {
      const served = hub.file('split/Big-GGUF', f.path);
      assert.equal(f.sha256, served.lfs ? served.sha256 : null);
      assert.equal(f.gitOid, served.gitOid);
    }
    const q4 = r.groups.find((g) => g.quant === 'Q4_K_M');
    assert.equal(q4?.files.length, 3);
    assert.equal(q4?.totalBytes, 2500);
    assert.equal(q4?.primaryPath, 'Q4_K_M/Big-Q4_K_M-00001-of-00003.gguf');
    assert.equal(r.defaultGroup, 'Q4_K_M/Big-Q4_K_M.gguf');
  });

  test('a pinned revision keeps resolving to its files after main moves on', async () => {
    const next = await hub.addRepo({ repo: 'split/Big-GGUF', files: [{ path: 'Big-Q8_0.gguf', bytes: bytes(6000, 7) }] });
    const now = await resolveRepo('split/Big-GGUF', { endpoint: hub.url });
    assert.equal(now.revision, next);
    assert.deepEqual(now.files.map((f) => f.size), [6000]);
    const old = await resolveRepo('split/Big-GGUF', { endpoint: hub.url, revision: firstMain });
    assert.equal(old.revision, firstMain);
    assert.equal(old.files.length, 5);
  });

  test('unknown repos and revisions are NOT_FOUND; an unreachable hub says so', async () => {
    await assert.rejects(resolveRepo('nobody/nothing', { endpoint: hub.url }), (e: unknown) => isModelsError(e, 'REPO_NOT_FOUND') && e.code === 'NOT_FOUND' && /nobody\/nothing/.test(e.message));
    await assert.rejects(resolveRepo('split/Big-GGUF', { endpoint: hub.url, revision: 'f'.repeat(40) }), (e: unknown) => isModelsError(e, 'REVISION_NOT_FOUND'));
    await assert.rejects(resolveRepo('not a repo'), (e: unknown) => isModelsError(e, 'INVALID_NAME') && e.code === 'BAD_REQUEST');
    // A port nobody listens on: take one, then free it.
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    await assert.rejects(search('tiny', { endpoint: `http://127.0.0.1:${port}` }), (e: unknown) => isModelsError(e, 'HUB_UNREACHABLE') && /127\.0\.0\.1/.test(e.message));
  });
});
