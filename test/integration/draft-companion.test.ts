// A speculative draft as its target's companion on a real node: pulling a card that names a draft
// fetches the draft too; while the target's part runs with its draft, the keep budget never evicts
// the draft (it is in use), even when another model stopping triggers an eviction pass; once the
// target stops, both go as idle copies. Drafts run on llama-server, from the engine cache.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { appendFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel, speculativePairSpecs } from '../../src/models/generate/random-model.js';
import { filePathFor, hubStoreRoot } from '../../src/models/store/layout.js';
import type { AddResult, DownloadView, PullView } from '../../src/models/views.js';
import { api } from '../support/control-api.js';
import { eventually, status } from '../support/cli.js';
import { builtEngines } from '../support/engines.js';
import { ggufFixture, HubServer } from '../support/hub-server.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

const found = await builtEngines();
const skip = typeof found === 'string' ? found : false;

const TARGET_REPO = 'shoal-test/Target-GGUF';
const DRAFT_REPO = 'shoal-test/Draft-GGUF';
const OTHER_REPO = 'shoal-test/Other-GGUF';
const TARGET = `${TARGET_REPO}:F16`;
const DRAFT = `${DRAFT_REPO}:F16`;
const OTHER = `${OTHER_REPO}:Q8_0`;

async function done(node: TestNode, id: string): Promise<DownloadView> {
  return eventually(`download ${id}`, 30_000, async () => {
    const { body } = await api<{ download: DownloadView }>(node, 'GET', `/models/downloads/${id}`);
    return body.download.finishedAt !== null ? body.download : undefined;
  });
}

async function placed(node: TestNode, model: string): Promise<string> {
  const res = await api<{ instance: { instanceId: string } }>(node, 'POST', '/place_instance', { model });
  assert.equal(res.status, 201, JSON.stringify(res.body));
  const instanceId = res.body.instance.instanceId;
  await eventually(`${model} to be ready`, 60_000, async () => ((await status(node)).instances.find((i) => i.instanceId === instanceId)?.runners.some((r) => r.state === 'ready') ? true : undefined));
  return instanceId;
}

async function stopped(node: TestNode, instanceId: string): Promise<void> {
  const res = await fetch(`${node.url}/instance/${instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } });
  assert.equal(res.status, 200);
  await eventually(`${instanceId} to be gone`, 20_000, async () => ((await status(node)).instances.some((i) => i.instanceId === instanceId) ? undefined : true));
}

describe('a speculative draft goes with its target', { skip, timeout: 300_000 }, () => {
  let dir: string;
  let hub: HubServer;
  let node: TestNode;
  const stored = (repo: string, file: string): string => filePathFor(hubStoreRoot(node.dataDir), repo, hub.head(repo), file);

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-draft-companion-'));
    const { target, draft } = speculativePairSpecs({ ...TINY_MODEL_SPEC, name: 'companion', tensorType: 'f16' }, 6);
    await generateRandomModel(target, join(dir, 'target.gguf'));
    await generateRandomModel(draft, join(dir, 'draft.gguf'));
    await ggufFixture(join(dir, 'other.gguf'), { seed: 51 });
    hub = await HubServer.start([
      { repo: TARGET_REPO, files: [{ path: 'Target-F16.gguf', filePath: join(dir, 'target.gguf') }] },
      { repo: DRAFT_REPO, files: [{ path: 'Draft-F16.gguf', filePath: join(dir, 'draft.gguf') }] },
      { repo: OTHER_REPO, files: [{ path: 'Other-Q8_0.gguf', filePath: join(dir, 'other.gguf') }] },
    ]);
    // A keep budget of one byte: every idle copy goes at the next eviction pass.
    node = await startTestNode({ env: { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: String(1024 * 1024), SHOAL_MODEL_KEEP_BYTES: '1' } });
    for (const repo of [TARGET_REPO, DRAFT_REPO, OTHER_REPO]) {
      const added = await api<AddResult>(node, 'POST', '/models/add', { repo });
      assert.equal(added.status, 201, JSON.stringify(added.body));
      // The target's card names the draft (cards are the user's to edit).
      if (repo === TARGET_REPO) await appendFile(added.body.cardFile, `\n[runtime.speculative]\ndraft = "${DRAFT}"\n`);
    }
  });

  after(async () => {
    await node?.stop();
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('pulling the target fetches its draft; the draft stays while the target runs and goes with it after', async () => {
    const pull = await api<PullView>(node, 'POST', '/models/pull', { id: TARGET });
    assert.equal(pull.status, 202, JSON.stringify(pull.body));
    assert.equal(pull.body.draft?.modelId, DRAFT, 'the draft is fetched with its target');
    assert.equal((await done(node, pull.body.download.id)).state, 'done');
    assert.equal((await done(node, pull.body.draft.id)).state, 'done');
    assert.ok(existsSync(stored(DRAFT_REPO, 'Draft-F16.gguf')));

    const target = await placed(node, TARGET);
    // Another model placed and stopped makes the keeper evict what is idle beyond its one byte.
    const other = await api<{ download: DownloadView }>(node, 'POST', '/models/pull', { id: OTHER });
    assert.equal((await done(node, other.body.download.id)).state, 'done');
    await stopped(node, await placed(node, OTHER));
    await eventually('the idle model to be evicted', 20_000, async () => (existsSync(stored(OTHER_REPO, 'Other-Q8_0.gguf')) ? undefined : true));
    assert.ok(existsSync(stored(DRAFT_REPO, 'Draft-F16.gguf')), 'the draft of a running part is in use, never evicted');
    assert.ok(existsSync(stored(TARGET_REPO, 'Target-F16.gguf')));

    await stopped(node, target);
    await eventually('the target and its draft to be evicted once idle', 20_000, async () =>
      existsSync(stored(TARGET_REPO, 'Target-F16.gguf')) || existsSync(stored(DRAFT_REPO, 'Draft-F16.gguf')) ? undefined : true,
    );
  });
});
