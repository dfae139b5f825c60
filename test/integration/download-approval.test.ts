// Downloads the whole cluster sees and approves, on a real two-node cluster on loopback (tier 3) with
// one local hub: a member's download in progress (bytes, rate, source) and a failed one (its error) in
// the other member's GET /state, and a placement above the cluster's approval threshold that starts no
// download until `shoal models approve`, then runs on both nodes.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { InstanceView, StatusView } from '../../src/api/control/control.js';
import { filePathFor, hubStoreRoot } from '../../src/models/store/layout.js';
import type { DownloadView } from '../../src/models/views.js';
import type { DownloadsPlan } from '../../src/placement/downloads.js';
import { api } from '../support/control-api.js';
import { eventually, shoal, status } from '../support/cli.js';
import { ggufFixture, HubServer } from '../support/hub-server.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { sleep } from '../support/wait.js';

const REPO = 'shoal-test/Approve-GGUF';
const Q4 = 'Approve-Q4_K_M.gguf';
const Q8 = 'Approve-Q8_0.gguf';
const Q4_ID = `${REPO}:Q4_K_M`;
const Q8_ID = `${REPO}:Q8_0`;

describe('downloads the whole cluster sees and approves', { timeout: 240_000 }, () => {
  let dir: string;
  let hub: HubServer;
  let a: TestNode;
  let b: TestNode;
  let aId: string;
  let bId: string;
  let approvedId: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-approve-'));
    const q4 = await ggufFixture(join(dir, 'q4.gguf'), { seed: 41, vocabSize: 3072 });
    const q8 = await ggufFixture(join(dir, 'q8.gguf'), { seed: 42, vocabSize: 1024 });
    hub = await HubServer.start([{ repo: REPO, files: [{ path: Q4, filePath: q4 }, { path: Q8, filePath: q8 }] }]);
    const env = { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: String(1024 * 1024) };
    [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'], env }), startTestNode({ args: ['--name', 'beta'], env })]);
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

  test('a member’s download in progress is in the other member’s GET /state with bytes, total, rate and source; a failed one with its error', async () => {
    const total = hub.file(REPO, Q4).size;
    // About 10 s for the file: several telemetry beats while it runs.
    hub.throttle(Math.ceil(total / 10));
    try {
      const added = await api<{ download: DownloadView }>(a, 'POST', '/models/add', { repo: REPO, quant: 'Q4_K_M', pull: true });
      assert.equal(added.status, 201, JSON.stringify(added.body));
      const seen = await eventually('beta to see alpha’s download under way', 20_000, async () => {
        const d = (await status(b)).downloads[aId]?.downloads.find((x) => x.modelId === Q4_ID);
        return d && d.state === 'downloading' && d.doneBytes > 0 && d.bytesPerSecond > 0 ? d : undefined;
      });
      assert.equal(seen.totalBytes, total);
      assert.ok(seen.doneBytes < total, 'seen before the end');
      assert.deepEqual(seen.source, { kind: 'hub' });
      assert.equal(seen.error, null);
      assert.equal(seen.id, added.body.download.id, 'the id alpha’s own GET /models/downloads/:id answers to');
    } finally {
      hub.throttle(null);
    }
    await eventually('alpha’s download to end and leave the reports', 30_000, async () => ((await status(b)).downloads[aId]?.downloads.length === 0 ? true : undefined));

    // Every attempt at Q8 is cut: it fails after the store's retries, and beta sees why.
    hub.failAfter(Q8, 1000, 1000);
    const failing = await api<{ download: DownloadView }>(a, 'POST', '/models/add', { repo: REPO, quant: 'Q8_0', pull: true });
    assert.equal(failing.status, 201, JSON.stringify(failing.body));
    const failed = await eventually('beta to see alpha’s failed download', 40_000, async () => {
      const d = (await status(b)).downloads[aId]?.downloads.find((x) => x.modelId === Q8_ID);
      return d?.state === 'failed' ? d : undefined;
    });
    assert.ok(failed.error !== null && failed.error.code.length > 0 && failed.error.message.length > 0, JSON.stringify(failed));
    const own = await api<{ download: DownloadView }>(a, 'GET', `/models/downloads/${failed.id}`);
    assert.equal(own.body.download.error?.code, failed.error.code, 'the same error alpha reports itself');
  });

  test('a placement that would download above the threshold onto beta waits for approval, starts no download, and runs after `shoal models approve`', async () => {
    // Q4 is on alpha's disk (the test above); beta has none.
    const set = await api(a, 'PUT', '/settings', { downloadApprovalBytes: 1000 });
    assert.equal(set.status, 200, JSON.stringify(set.body));
    await eventually('the setting on beta', 10_000, async () => {
      const s = await api<{ settings: { downloadApprovalBytes: number } }>(b, 'GET', '/settings');
      return s.body.settings.downloadApprovalBytes === 1000 ? true : undefined;
    });
    const bytes = hub.file(REPO, Q4).size;

    const dry = await api<{ downloads: DownloadsPlan }>(a, 'POST', '/place_instance', { model: Q4_ID, replicas: 2, dry_run: true });
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    assert.deepEqual(dry.body.downloads, { downloads: [{ nodeId: bId, name: 'beta', bytes, source: 'peer', needsApproval: true }], approvalBytes: 1000, needsApproval: true });

    const placed = await api<{ instance: { instanceId: string; awaitingApproval?: unknown } }>(a, 'POST', '/place_instance', { model: Q4_ID, replicas: 2 });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const id = placed.body.instance.instanceId;
    approvedId = id;
    assert.deepEqual(placed.body.instance.awaitingApproval, [{ nodeId: bId, bytes, source: 'peer' }]);

    const waiting = await eventually('beta to see the instance wait', 10_000, async () => (await status(b)).instances.find((i) => i.instanceId === id));
    assert.deepEqual(waiting.awaitingApproval, [{ nodeId: bId, name: 'beta', bytes, source: 'peer' }]);
    // Several seconds and heartbeats later nothing has started anywhere: no download on beta, no runner on either.
    await sleep(4000);
    const still = await status(b);
    const view = still.instances.find((i) => i.instanceId === id) as InstanceView;
    assert.notEqual(view.awaitingApproval, null);
    assert.ok(view.runners.every((r) => r.state === 'unknown'), JSON.stringify(view.runners));
    assert.deepEqual(still.downloads[bId]?.downloads, []);
    const listed = await api<{ downloads: DownloadView[] }>(b, 'GET', '/models/downloads');
    assert.deepEqual(listed.body.downloads.filter((d) => d.modelId === Q4_ID), [], 'beta started no download');

    const ls = await shoal(b, 'models', 'ls');
    assert.match(ls.stdout, new RegExp(`waits for approval: download .* onto beta\\? Approve with \`shoal models approve ${id}\``));
    const approved = await shoal(b, 'models', 'approve', id);
    assert.equal(approved.code, 0, approved.stderr);
    assert.match(approved.stdout, new RegExp(`Approved the downloads of ${id}`));

    const running = await eventually('both replicas ready after the approval', 90_000, async () => {
      const i = (await status(a)).instances.find((x) => x.instanceId === id);
      return i && i.awaitingApproval === null && i.runners.length === 2 && i.runners.every((r) => r.state === 'ready') ? i : undefined;
    });
    assert.deepEqual(running.runners.map((r) => r.nodeId).sort(), [aId, bId].sort());
    const head = hub.head(REPO);
    assert.ok(existsSync(filePathFor(hubStoreRoot(b.dataDir), REPO, head, Q4)), 'beta downloaded the file once approved');
    assert.equal((await shoal(b, 'models', 'approve', 'inst-nobody')).code, 1, 'an unknown instance fails');
  });

  test('`launch --yes` approves up front: nothing waits', async () => {
    // beta gives its copy back, so the next placement needs the download again.
    assert.equal((await api(a, 'DELETE', `/instance/${approvedId}`)).status, 200);
    await eventually('beta’s copy removed once nothing uses it', 30_000, async () => ((await api(b, 'DELETE', `/models/${Q4_ID}?local=1`)).status === 200 ? true : undefined));
    await eventually('alpha to hear beta holds no copy', 15_000, async () => {
      const dry = await api<{ downloads: DownloadsPlan }>(a, 'POST', '/place_instance', { model: Q4_ID, replicas: 2, dry_run: true });
      return dry.body.downloads.needsApproval ? true : undefined;
    });
    const preview = await shoal(a, 'models', 'launch', Q4_ID, '--replicas', '2', '--dry-run');
    assert.equal(preview.code, 0, preview.stderr);
    assert.match(preview.stdout, /download [\d.]+ MiB onto beta from a member \(over 1000 B: needs approval\)/);
    // Without --yes the CLI asks the question and leaves the instance waiting.
    const asked = await shoal(a, 'models', 'launch', Q4_ID, '--replicas', '2');
    assert.equal(asked.code, 0, asked.stderr);
    const waitingId = /Download [\d.]+ MiB onto beta\? (inst-\S+) waits until you approve/.exec(asked.stderr)?.[1];
    assert.ok(waitingId, asked.stderr);
    assert.notEqual((await status(a)).instances.find((i) => i.instanceId === waitingId)?.awaitingApproval, null);
    assert.equal((await api(a, 'DELETE', `/instance/${waitingId}`)).status, 200);

    const launched = await shoal(a, 'models', 'launch', Q4_ID, '--replicas', '2', '--yes', '--json');
    assert.equal(launched.code, 0, `${launched.stdout}\n${launched.stderr}`);
    const { instance } = JSON.parse(launched.stdout) as { instance: { instanceId: string; awaitingApproval?: unknown } };
    assert.equal(instance.awaitingApproval, undefined);
    const view = await eventually('the instance in /state', 10_000, async () => (await status(a) as StatusView).instances.find((i) => i.instanceId === instance.instanceId));
    assert.equal(view.awaitingApproval, null);
  });
});
