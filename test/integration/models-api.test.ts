// Models on disk through a real node: `shoal run` with SHOAL_HF_ENDPOINT pointing at a local hub that
// serves generated GGUF files. Search (HTTP and CLI), add (a card the cards parser accepts), pull
// through the CLI (the file arrives and hashes to what the hub lists), downloads with progress and
// cancellation, ls, the storage report, rm, and the message an unreachable hub gives.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readCardFile } from '../../src/models/cards/parse.js';
import { filePathFor, hubStoreRoot } from '../../src/models/store/layout.js';
import type { AddResult, DownloadView, ModelListView, RemoveResult, SearchView, StorageView } from '../../src/models/views.js';
import { api, sha256 } from '../support/control-api.js';
import { eventually, shoal } from '../support/cli.js';
import { ggufFixture, HubServer } from '../support/hub-server.js';
import { CLI_PATH, freePort, startTestNode, type TestNode } from '../support/node-process.js';

const REPO = 'shoal-test/Tiny-GGUF';
const Q4 = 'Tiny-Q4_K_M.gguf';
const Q8 = 'Tiny-Q8_0.gguf';
const Q4_ID = `${REPO}:Q4_K_M`;
const Q8_ID = `${REPO}:Q8_0`;
const RESERVE = 1024 * 1024;

type ErrorBody = { error: { code: string; message: string; reason?: string } };

describe('models on disk through a real node and a local hub', () => {
  let dir: string;
  let hub: HubServer;
  let node: TestNode;
  let head: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-models-api-'));
    const q4 = await ggufFixture(join(dir, 'q4.gguf'), { seed: 11, vocabSize: 3072 });
    const q8 = await ggufFixture(join(dir, 'q8.gguf'), { seed: 12, vocabSize: 1024 });
    hub = await HubServer.start([
      {
        repo: REPO,
        files: [
          { path: Q4, filePath: q4 },
          { path: Q8, filePath: q8 },
          { path: 'README.md', bytes: new TextEncoder().encode('# tiny\n'), lfs: false },
        ],
        downloads: 42,
        likes: 3,
      },
      { repo: 'shoal-test/Tiny-safetensors', files: [{ path: 'model.safetensors', bytes: new Uint8Array(64) }], tags: ['gguf-less'] },
    ]);
    head = hub.head(REPO);
    node = await startTestNode({ env: { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: String(RESERVE) } });
  });

  after(async () => {
    await node?.stop();
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const storePath = (file: string): string => filePathFor(hubStoreRoot(node.dataDir), REPO, head, file);

  test('search through HTTP and the CLI: the repo, its GGUF files with sizes, the default quant', async () => {
    const { status, body } = await api<SearchView>(node, 'GET', '/models/search?q=tiny');
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(body.endpoint, hub.url);
    assert.equal(body.results.length, 1, 'only the repo with GGUF files');
    const r = body.results[0]!;
    assert.equal(r.repo, REPO);
    assert.equal(r.revision, head);
    assert.equal(r.downloads, 42);
    assert.equal(r.defaultQuant, 'Q4_K_M');
    assert.equal(r.defaultBytes, hub.file(REPO, Q4).size);
    assert.deepEqual(
      r.models.map((m) => [m.tag, m.file, m.bytes, m.isDefault]),
      [
        ['Q4_K_M', Q4, hub.file(REPO, Q4).size, true],
        ['Q8_0', Q8, hub.file(REPO, Q8).size, false],
      ],
    );
    assert.equal(r.models[0]!.files[0]!.sha256, hub.file(REPO, Q4).sha256);

    const text = await shoal(node, 'models', 'search', 'tiny');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`^${REPO}  \\(42 downloads, 3 likes`, 'm'));
    assert.match(text.stdout, /Q4_K_M .*Tiny-Q4_K_M\.gguf\s+\[default\]/);
    assert.match(text.stdout, /shoal models add shoal-test\/Tiny-GGUF/);
    const json = await shoal(node, 'models', 'search', 'tiny', '--json');
    assert.equal(json.code, 0, json.stderr);
    assert.equal((JSON.parse(json.stdout) as SearchView).results[0]!.repo, REPO);

    const empty = await api<ErrorBody>(node, 'GET', '/models/search');
    assert.equal(empty.status, 400);
    assert.match(empty.body.error.message, /q=/);
  });

  test('add writes a card the cards parser accepts, pinned to the commit, and downloads nothing', async () => {
    hub.resetCounters();
    const out = await shoal(node, 'models', 'add', REPO, '--json');
    assert.equal(out.code, 0, out.stderr);
    const added = JSON.parse(out.stdout) as AddResult;
    assert.equal(added.card.id, Q4_ID);
    assert.equal(added.created, true);
    assert.equal(added.hub.chosen, 'default');
    assert.equal(added.cardFile, join(node.dataDir, 'cards', 'shoal-test--Tiny-GGUF--Q4_K_M.toml'));
    assert.equal(added.download, null);
    assert.equal(added.model.state, 'not-downloaded');

    const card = await readCardFile(added.cardFile);
    assert.deepEqual(card, added.card);
    assert.deepEqual(card.source, { kind: 'huggingface', repo: REPO, file: Q4, revision: head });
    assert.deepEqual(card.tasks, ['chat', 'completion']);
    assert.ok(card.compatible_backends.includes('llama_cpp-cpu') && card.compatible_backends.includes('rpc-cuda'));
    const text = await readFile(added.cardFile, 'utf8');
    assert.match(text, /^# Written by `shoal models add` from http:\/\/127\.0\.0\.1:\d+\/shoal-test\/Tiny-GGUF\n/);
    assert.match(text, /# GGUF header: not read yet/);
    assert.equal(hub.transfers(Q4).length, 0, 'add alone downloads nothing');

    // The text form, naming a quant; the HTTP form naming a file.
    const q8 = await shoal(node, 'models', 'add', `${REPO}:Q8_0`);
    assert.equal(q8.code, 0, q8.stderr);
    assert.match(q8.stdout, /Added shoal-test\/Tiny-GGUF:Q8_0: Tiny-Q8_0\.gguf/);
    assert.match(q8.stdout, /shoal models pull shoal-test\/Tiny-GGUF:Q8_0/);
    const again = await api<AddResult>(node, 'POST', '/models/add', { repo: REPO, file: Q8, revision: head });
    assert.equal(again.status, 200, JSON.stringify(again.body));
    assert.equal(again.body.created, false);
    assert.equal(again.body.card.id, Q8_ID);

    const list = await api<ModelListView>(node, 'GET', '/models');
    assert.equal(list.status, 200);
    const byId = new Map(list.body.models.map((m) => [m.id, m]));
    assert.equal(byId.get('shoal/tiny')?.state, 'builtin');
    assert.equal(byId.get(Q4_ID)?.state, 'not-downloaded');
    assert.equal(byId.get(Q4_ID)?.origin, 'added');
    assert.equal(byId.get(Q8_ID)?.state, 'not-downloaded');
    assert.deepEqual(list.body.errors, []);

    const noGguf = await api<ErrorBody>(node, 'POST', '/models/add', { repo: 'shoal-test/Tiny-safetensors' });
    assert.equal(noGguf.status, 404);
    assert.equal(noGguf.body.error.reason, 'NO_GGUF');
    assert.match(noGguf.body.error.message, /has no GGUF files/);
    const missing = await shoal(node, 'models', 'add', 'shoal-test/Nope');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /repo shoal-test\/Nope not found on http:\/\/127\.0\.0\.1:\d+/);
    const badQuant = await api<ErrorBody>(node, 'POST', '/models/add', { repo: REPO, quant: 'Q2_K' });
    assert.equal(badQuant.status, 404);
    assert.match(badQuant.body.error.message, /has no GGUF "Q2_K": it has Q4_K_M, Q8_0/);
  });

  test('pull through the CLI: the file arrives verified, the card gains the GGUF facts, ls shows it on disk', async () => {
    hub.resetCounters();
    // Paced so that the 200 ms polls see it under way (~2 s for 1.8 MB).
    hub.throttle(1_000_000);
    const out = await shoal(node, 'models', 'pull', Q4_ID).finally(() => hub.throttle(null));
    assert.equal(out.code, 0, `${out.stdout}\n${out.stderr}`);
    assert.match(out.stdout, /^Pulled shoal-test\/Tiny-GGUF:Q4_K_M \(.*verified; fetched/m);
    assert.match(out.stderr, /shoal-test\/Tiny-GGUF:Q4_K_M: downloading \d+%/, 'plain progress lines when not on a terminal');
    assert.match(out.stderr, /: done 100%/);
    assert.equal(hub.transfers(Q4).length, 1);

    const path = storePath(Q4);
    assert.equal((await stat(path)).size, hub.file(REPO, Q4).size);
    assert.equal(await sha256(path), hub.file(REPO, Q4).sha256);

    const cardFile = join(node.dataDir, 'cards', 'shoal-test--Tiny-GGUF--Q4_K_M.toml');
    const card = await readCardFile(cardFile);
    assert.equal(card.id, Q4_ID);
    const text = await readFile(cardFile, 'utf8');
    assert.match(text, /# GGUF header: architecture llama, trained context \d+ tokens, \d+ layers/);

    const ls = await shoal(node, 'models', 'ls', '--json');
    assert.equal(ls.code, 0, ls.stderr);
    const entry = (JSON.parse(ls.stdout) as ModelListView).models.find((m) => m.id === Q4_ID);
    assert.ok(entry);
    assert.equal(entry.state, 'on-disk');
    assert.equal(entry.bytes, hub.file(REPO, Q4).size);
    assert.equal(entry.path, path);
    assert.equal(entry.diskRevision, head);
    assert.equal(entry.facts?.architecture, 'llama');
    const lsText = await shoal(node, 'models', 'ls');
    assert.equal(lsText.code, 0, lsText.stderr);
    assert.match(lsText.stdout, /^ID\s+STATE\s+SIZE\s+SOURCE$/m);
    assert.match(lsText.stdout, new RegExp(`^${Q4_ID.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s+on-disk\\s+\\S+ \\S+\\s+${REPO}@${head.slice(0, 12)} ${Q4}$`, 'm'));
    assert.match(lsText.stdout, /^shoal\/tiny\s+builtin/m);

    // A second pull finds the copy complete and fetches nothing.
    hub.resetCounters();
    const second = await shoal(node, 'models', 'pull', Q4_ID, '--json');
    assert.equal(second.code, 0, second.stderr);
    const done = JSON.parse(second.stdout) as DownloadView;
    assert.equal(done.state, 'done');
    assert.equal(done.fetchedBytes, 0);
    assert.equal(hub.transfers(Q4).length, 0);
  });

  test('downloads report progress, a second pull joins, a downloading model cannot be removed, DELETE cancels', async () => {
    hub.throttle(100_000);
    try {
      const started = await api<{ download: DownloadView; joined: boolean }>(node, 'POST', '/models/pull', { id: Q8_ID });
      assert.equal(started.status, 202, JSON.stringify(started.body));
      assert.equal(started.body.joined, false);
      const id = started.body.download.id;
      const joined = await api<{ download: DownloadView; joined: boolean }>(node, 'POST', '/models/pull', { id: Q8_ID });
      assert.equal(joined.status, 202);
      assert.equal(joined.body.joined, true);
      assert.equal(joined.body.download.id, id);

      const moving = await eventually('bytes and a rate in /models/downloads', 10_000, async () => {
        const { body } = await api<{ downloads: DownloadView[] }>(node, 'GET', '/models/downloads');
        const d = body.downloads.find((x) => x.id === id);
        return d && d.state === 'downloading' && d.doneBytes > 0 && d.bytesPerSecond > 0 ? d : undefined;
      });
      assert.equal(moving.modelId, Q8_ID);
      assert.equal(moving.totalBytes, hub.file(REPO, Q8).size);
      assert.ok(moving.doneBytes < moving.totalBytes);
      assert.ok(moving.etaSeconds !== null && moving.etaSeconds > 0);
      assert.equal(moving.files[0]?.path, Q8);

      const busy = await api<ErrorBody>(node, 'DELETE', `/models/${Q8_ID}`);
      assert.equal(busy.status, 409);
      assert.equal(busy.body.error.reason, 'MODEL_IN_USE');
      assert.match(busy.body.error.message, /is downloading .*cancel the download first/);
      const busyCli = await shoal(node, 'models', 'rm', Q8_ID);
      assert.equal(busyCli.code, 1);
      assert.match(busyCli.stderr, /is downloading/);

      const cancelled = await api<{ download: DownloadView }>(node, 'DELETE', `/models/downloads/${id}`);
      assert.equal(cancelled.status, 200);
      assert.equal(cancelled.body.download.state, 'cancelled');
      assert.match(cancelled.body.download.error?.message ?? '', /cancelled/);

      const storage = await api<StorageView>(node, 'GET', '/store/storage');
      assert.ok(storage.body.partialBytes > 0, 'the part file stays for a resume');
      const listed = await api<ModelListView>(node, 'GET', '/models');
      const q8 = listed.body.models.find((m) => m.id === Q8_ID);
      assert.equal(q8?.state, 'partial');
      assert.ok((q8?.partialBytes ?? 0) > 0);

      const unknown = await api<ErrorBody>(node, 'DELETE', '/models/downloads/dl-nope');
      assert.equal(unknown.status, 404);
    } finally {
      hub.throttle(null);
    }
  });

  test('Ctrl-C in shoal models pull cancels the download on the node', async () => {
    hub.throttle(100_000);
    try {
      const child = spawn(process.execPath, [CLI_PATH, 'models', 'pull', Q8_ID, '--data-dir', node.dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      await eventually('the CLI to show the download under way', 10_000, async () => (/: downloading \d+%/.test(stderr) ? true : undefined));
      child.kill('SIGINT');
      assert.equal(await exited, 130, stderr);
      assert.match(stderr, /cancelling the download of shoal-test\/Tiny-GGUF:Q8_0/);
      assert.match(stderr, /Cancelled the download of shoal-test\/Tiny-GGUF:Q8_0; what arrived is kept/);
      const { body } = await api<{ downloads: DownloadView[] }>(node, 'GET', '/models/downloads');
      const q8 = body.downloads.filter((d) => d.modelId === Q8_ID);
      assert.equal(q8.at(-1)?.state, 'cancelled');
      assert.ok(q8.every((d) => d.finishedAt !== null), 'nothing left running');
    } finally {
      hub.throttle(null);
    }
  });

  test('the storage report adds up', async () => {
    const { status, body } = await api<StorageView>(node, 'GET', '/store/storage');
    assert.equal(status, 200);
    const q4 = hub.file(REPO, Q4).size;
    assert.deepEqual(
      body.models.map((m) => [m.modelId, m.bytes, m.revision]),
      [[Q4_ID, q4, head]],
    );
    assert.equal(body.modelBytes, q4);
    assert.equal(body.models.reduce((s, m) => s + m.bytes, 0), body.modelBytes);
    assert.ok(body.partialBytes > 0 && body.partialBytes < hub.file(REPO, Q8).size);
    assert.equal(body.untrackedBytes, 0);
    assert.equal(body.totalBytes, body.modelBytes + body.partialBytes + body.untrackedBytes);
    assert.equal(body.disk.reserveBytes, RESERVE);
    assert.ok(body.disk.freeBytes > 0);
    assert.equal(body.availableBytes, Math.max(0, body.disk.freeBytes - body.disk.reserveBytes));
    assert.equal(body.root, hubStoreRoot(node.dataDir));
    assert.deepEqual(body.downloads, []);
    assert.ok(body.builtin.bytes > 0, 'the generated default model');
  });

  test('rm removes the files and the card; built-in and unknown models are refused', async () => {
    const partial = await shoal(node, 'models', 'rm', Q8_ID, '--json');
    assert.equal(partial.code, 0, partial.stderr);
    const removedQ8 = JSON.parse(partial.stdout) as RemoveResult;
    assert.equal(removedQ8.removedFiles, true);
    assert.ok(removedQ8.freedBytes > 0, 'the part file');
    assert.ok(removedQ8.cardFile && !existsSync(removedQ8.cardFile));

    const out = await shoal(node, 'models', 'rm', Q4_ID);
    assert.equal(out.code, 0, out.stderr);
    assert.match(out.stdout, /^Removed shoal-test\/Tiny-GGUF:Q4_K_M: freed .*; deleted its card /);
    assert.equal(existsSync(storePath(Q4)), false);
    assert.equal(existsSync(join(node.dataDir, 'cards', 'shoal-test--Tiny-GGUF--Q4_K_M.toml')), false);

    const list = await api<ModelListView>(node, 'GET', '/models');
    assert.deepEqual(list.body.models.map((m) => m.id).filter((id) => id.startsWith(REPO)), []);
    const storage = await api<StorageView>(node, 'GET', '/store/storage');
    assert.equal(storage.body.modelBytes, 0);
    assert.equal(storage.body.partialBytes, 0);
    assert.equal(storage.body.totalBytes, 0);

    const twice = await shoal(node, 'models', 'rm', Q4_ID);
    assert.equal(twice.code, 1);
    assert.match(twice.stderr, /no model 'shoal-test\/Tiny-GGUF:Q4_K_M' on this node/);
    const builtin = await api<ErrorBody>(node, 'DELETE', '/models/shoal/tiny');
    assert.equal(builtin.status, 400);
    assert.match(builtin.body.error.message, /built-in/);
    const encoded = await api<ErrorBody>(node, 'DELETE', `/models/${encodeURIComponent(Q4_ID)}`);
    assert.equal(encoded.status, 404);
    // The route pulls only a model with a card (the CLI's pull adds a hub repo first: launch.test.ts).
    const pullUnknown = await api<ErrorBody>(node, 'POST', '/models/pull', { id: Q4_ID });
    assert.equal(pullUnknown.status, 404);
    assert.match(pullUnknown.body.error.message, /no model card 'shoal-test\/Tiny-GGUF:Q4_K_M': add it first/);
    const notARepo = await shoal(node, 'models', 'pull', 'no-such-model');
    assert.equal(notARepo.code, 1);
    assert.match(notARepo.stderr, /no model 'no-such-model' on this node/);
  });

  test('add --pull adds and downloads in one step', async () => {
    const out = await shoal(node, 'models', 'add', `${REPO}:${Q8}`, '--pull');
    assert.equal(out.code, 0, `${out.stdout}\n${out.stderr}`);
    assert.match(out.stdout, /^Added shoal-test\/Tiny-GGUF:Q8_0/m);
    assert.match(out.stdout, /^Pulled shoal-test\/Tiny-GGUF:Q8_0/m);
    assert.equal(await sha256(storePath(Q8)), hub.file(REPO, Q8).sha256);
    const rmOut = await shoal(node, 'models', 'rm', Q8_ID);
    assert.equal(rmOut.code, 0, rmOut.stderr);
    assert.equal(existsSync(storePath(Q8)), false);
  });

  test('an unreachable hub gives a clear message over HTTP and in the CLI', async () => {
    const closed = `http://127.0.0.1:${await freePort()}`;
    const lonely = await startTestNode({ env: { SHOAL_HF_ENDPOINT: closed } });
    try {
      const search = await api<ErrorBody>(lonely, 'GET', '/models/search?q=tiny');
      assert.equal(search.status, 502, JSON.stringify(search.body));
      assert.equal(search.body.error.reason, 'HUB_UNREACHABLE');
      assert.match(search.body.error.message, new RegExp(`^the model hub at ${closed.replace(/\./g, '\\.')} cannot be reached \\(.*ECONNREFUSED.*\\): check the network or set SHOAL_HF_ENDPOINT`));
      const add = await api<ErrorBody>(lonely, 'POST', '/models/add', { repo: REPO });
      assert.equal(add.status, 502);
      assert.match(add.body.error.message, /cannot be reached/);
      const cli = await shoal(lonely, 'models', 'search', 'tiny');
      assert.equal(cli.code, 1);
      assert.match(cli.stderr, /the model hub at http:\/\/127\.0\.0\.1:\d+ cannot be reached .*set SHOAL_HF_ENDPOINT/);
    } finally {
      await lonely.stop();
    }
  });
});
