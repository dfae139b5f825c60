// Models between the members of a real two-node cluster on loopback (tier 3), both nodes pointed at
// one local hub: each node's copies in GET /state, a pull that copies from the member holding the
// model (the hub serves no file), a copy that fails verification falling back to the hub,
// cluster-wide DELETE /models/:id, and the keep budget evicting a model when its instance ends.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { StatusView } from '../../src/api/control/control.js';
import { filePathFor, hubStoreRoot } from '../../src/models/store/layout.js';
import type { ClusterRemoveResult, DownloadView, ModelView, NodeRemoval, StorageView } from '../../src/models/views.js';
import { api, downloaded, sha256 } from '../support/control-api.js';
import { eventually, shoal, status } from '../support/cli.js';
import { ggufFixture, HubServer } from '../support/hub-server.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

const REPO = 'shoal-test/Copy-GGUF';
const Q4 = 'Copy-Q4_K_M.gguf';
const Q8 = 'Copy-Q8_0.gguf';
const Q4_ID = `${REPO}:Q4_K_M`;
const Q8_ID = `${REPO}:Q8_0`;

describe('models between the members of a two-node cluster', { timeout: 240_000 }, () => {
  let dir: string;
  let hub: HubServer;
  let a: TestNode;
  let b: TestNode;
  let aId: string;
  let bId: string;
  let head: string;
  const storePath = (node: TestNode, file: string): string => filePathFor(hubStoreRoot(node.dataDir), REPO, head, file);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-model-copy-'));
    const q4 = await ggufFixture(join(dir, 'q4.gguf'), { seed: 31, vocabSize: 3072 });
    const q8 = await ggufFixture(join(dir, 'q8.gguf'), { seed: 32, vocabSize: 1024 });
    hub = await HubServer.start([{ repo: REPO, files: [{ path: Q4, filePath: q4 }, { path: Q8, filePath: q8 }] }]);
    head = hub.head(REPO);
    const env = { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: String(1024 * 1024) };
    // alpha keeps at most 1 MB of idle copies: Q4 (about 1.8 MB) goes once nothing uses it.
    [a, b] = await Promise.all([
      startTestNode({ args: ['--name', 'alpha'], env: { ...env, SHOAL_MODEL_KEEP_BYTES: String(1_000_000) } }),
      // beta's info lines say how each copied file travelled (the test reads them).
      startTestNode({ args: ['--name', 'beta'], env: { ...env, SHOAL_LOG_LEVEL: 'info' } }),
    ]);
    const code = /shoal1-\S+/.exec((await shoal(a, 'invite', '--code')).stdout)?.[0];
    assert.ok(code);
    const joined = await shoal(b, 'join', code);
    assert.equal(joined.code, 0, joined.stderr);
    aId = (await status(a)).nodeId;
    bId = (await status(b)).nodeId;
  });

  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('GET /state shows which node holds which models; a pull copies from the member that holds it, verified, and the hub serves no file', async () => {
    const added = await api<{ download: DownloadView }>(a, 'POST', '/models/add', { repo: REPO, quant: 'Q4_K_M', pull: true });
    assert.equal(added.status, 201, JSON.stringify(added.body));
    const atA = await downloaded(a, added.body.download.id);
    assert.equal(atA.state, 'done', JSON.stringify(atA.error));
    assert.equal(atA.source?.kind, 'hub');

    const q4 = { modelId: Q4_ID, revision: head, bytes: hub.file(REPO, Q4).size };
    await eventually('beta to see alpha’s copy in /state', 20_000, async () => {
      const s: StatusView = await status(b);
      return s.artifacts[aId]?.models.some((m) => m.modelId === Q4_ID) ? true : undefined;
    });
    const seenByB = (await status(b)).artifacts;
    assert.deepEqual(seenByB[aId]?.models, [q4]);
    assert.ok((seenByB[aId]?.ageMs ?? -1) >= 0);
    assert.deepEqual(seenByB[bId], { models: [], ageMs: 0 }, 'its own entry, read now');

    // beta knows the card (from the hub's listing) but downloads nothing from it.
    assert.equal((await api(b, 'POST', '/models/add', { repo: REPO, quant: 'Q4_K_M' })).status, 201);
    hub.resetCounters();
    const pulled = await shoal(b, 'models', 'pull', Q4_ID, '--json');
    assert.equal(pulled.code, 0, `${pulled.stdout}\n${pulled.stderr}`);
    const copy = JSON.parse(pulled.stdout) as DownloadView;
    assert.equal(copy.state, 'done');
    assert.deepEqual(copy.source, { kind: 'peer', nodeId: aId, name: 'alpha' });
    assert.deepEqual(copy.peerFailures, []);
    assert.equal(copy.fetchedBytes, q4.bytes);
    assert.deepEqual(hub.requests.map((r) => r.url), [], 'the hub saw no request from beta');
    assert.equal(await sha256(storePath(b, Q4)), hub.file(REPO, Q4).sha256);
    // Two processes on loopback: the bytes went over a direct TLS socket, not the libp2p stream.
    const copied = b.output().split('\n').filter((line) => line.includes('copied a model file from a member'));
    assert.equal(copied.length, 1, copied.join('\n'));
    assert.match(copied[0]!, /"transport":"direct"/);
    assert.match(copied[0]!, new RegExp(`"bytes":${q4.bytes}\\b`));
    const model = await api<ModelView>(b, 'GET', `/models/${Q4_ID}`);
    assert.equal(model.body.state, 'on-disk');
    await eventually('alpha to see beta’s copy', 20_000, async () => ((await status(a)).artifacts[bId]?.models.some((m) => m.modelId === Q4_ID) ? true : undefined));

    // ?local=1 removes beta's copy (and card) only; without a card, a pull still copies from alpha.
    const local = await api<Record<string, unknown>>(b, 'DELETE', `/models/${Q4_ID}?local=1`);
    assert.equal(local.status, 200, JSON.stringify(local.body));
    assert.equal(local.body.nodes, undefined);
    assert.equal(existsSync(storePath(b, Q4)), false);
    assert.ok(existsSync(storePath(a, Q4)));
    const again = await shoal(b, 'models', 'pull', Q4_ID, '--json');
    assert.equal(again.code, 0, again.stderr);
    assert.equal((JSON.parse(again.stdout) as DownloadView).source?.kind, 'peer');
    assert.deepEqual(hub.requests.map((r) => r.url), []);
  });

  test('a copy that fails verification falls back to the hub, and the failure is reported', async () => {
    const added = await api<{ download: DownloadView }>(a, 'POST', '/models/add', { repo: REPO, quant: 'Q8_0', pull: true });
    assert.equal((await downloaded(a, added.body.download.id)).state, 'done');
    // alpha's copy rots on its disk: same size, one byte different.
    const rotten = await open(storePath(a, Q8), 'r+');
    const byte = Buffer.alloc(1);
    await rotten.read(byte, 0, 1, 5000);
    await rotten.write(Buffer.from([byte[0]! ^ 0xff]), 0, 1, 5000);
    await rotten.close();
    await eventually('beta to see alpha’s Q8', 20_000, async () => ((await status(b)).artifacts[aId]?.models.some((m) => m.modelId === Q8_ID) ? true : undefined));

    hub.resetCounters();
    // No card on beta: it takes alpha's description, then the hub when alpha's bytes do not verify.
    const started = await api<{ download: DownloadView }>(b, 'POST', '/models/pull', { id: Q8_ID });
    assert.equal(started.status, 202, JSON.stringify(started.body));
    const done = await downloaded(b, started.body.download.id);
    assert.equal(done.state, 'done', JSON.stringify(done.error));
    assert.deepEqual(done.source, { kind: 'hub', endpoint: hub.url });
    assert.equal(done.peerFailures.length, 1);
    assert.equal(done.peerFailures[0]?.nodeId, aId);
    assert.match(done.peerFailures[0]?.message ?? '', /from member alpha does not match the hub's sha256/);
    assert.equal(hub.transfers(Q8).length, 1, 'one download from the hub');
    assert.equal(await sha256(storePath(b, Q8)), hub.file(REPO, Q8).sha256);
  });

  test('DELETE /models/:id removes the model on every member that holds it and says what each freed', async () => {
    const res = await api<ClusterRemoveResult>(b, 'DELETE', `/models/${Q8_ID}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.nodes.map((n) => [n.nodeId, n.self, n.outcome]),
      [
        [bId, true, 'removed'],
        [aId, false, 'removed'],
      ],
    );
    assert.equal(res.body.cardFile, null, 'beta had no card of it');
    assert.ok(res.body.nodes[1]!.cardFile?.endsWith('shoal-test--Copy-GGUF--Q8_0.toml'));
    assert.equal(res.body.totalFreedBytes, res.body.nodes[0]!.freedBytes + res.body.nodes[1]!.freedBytes);
    assert.ok(res.body.nodes.every((n) => n.freedBytes >= hub.file(REPO, Q8).size));
    assert.equal(existsSync(storePath(a, Q8)), false);
    assert.equal(existsSync(storePath(b, Q8)), false);
    const again = await api<{ error: { code: string; message: string; nodes: NodeRemoval[] } }>(a, 'DELETE', `/models/${Q8_ID}`);
    assert.equal(again.status, 404);
    assert.match(again.body.error.message, /no model 'shoal-test\/Copy-GGUF:Q8_0' on any of the 2 members/);
    assert.deepEqual(again.body.error.nodes.map((n) => n.outcome), ['absent', 'absent']);
  });

  test('a member using the model refuses its removal; when the instance ends, the keep budget evicts the idle copy', async () => {
    const placed = await api<{ instance: { instanceId: string } }>(a, 'POST', '/place_instance', { model: Q4_ID, exclude: [bId] });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const instanceId = placed.body.instance.instanceId;
    await eventually('the instance ready on alpha', 60_000, async () => {
      const s = await status(a);
      return s.instances.find((i) => i.instanceId === instanceId)?.runners.every((r) => r.state === 'ready') ? true : undefined;
    });

    const partly = await api<ClusterRemoveResult>(b, 'DELETE', `/models/${Q4_ID}`);
    assert.equal(partly.status, 200, JSON.stringify(partly.body));
    const byNode = new Map(partly.body.nodes.map((n) => [n.nodeId, n]));
    assert.equal(byNode.get(bId)?.outcome, 'removed');
    assert.equal(byNode.get(aId)?.outcome, 'refused');
    assert.equal(byNode.get(aId)?.error?.reason, 'MODEL_IN_USE');
    assert.ok(existsSync(storePath(a, Q4)), 'in use: never removed, never evicted');

    assert.equal((await api(a, 'DELETE', `/instance/${instanceId}`)).status, 200);
    await eventually('alpha to evict the idle Q4 beyond its 1 MB budget', 30_000, async () => (existsSync(storePath(a, Q4)) ? undefined : true));
    const storage = await api<StorageView>(a, 'GET', '/store/storage');
    assert.deepEqual(storage.body.models, []);
    assert.equal((await api<ModelView>(a, 'GET', `/models/${Q4_ID}`)).body.state, 'not-downloaded', 'the card stays; the file can come back');
    await eventually('beta to see alpha hold nothing', 20_000, async () => ((await status(b)).artifacts[aId]?.models.length === 0 ? true : undefined));
  });
});
