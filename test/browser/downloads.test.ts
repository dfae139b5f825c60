import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { StatusView } from '../../src/api/control/control.js';
import { ensureDashboardBuilt, launchBrowser, openDashboard, screenshot } from '../support/browser.js';
import { eventually, shoal, status } from '../support/cli.js';
import { ggufFixture, HubServer } from '../support/hub-server.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Downloads in the dashboard (tier 5), two real nodes on loopback and a local hub: another member's
 * download in progress on the Cluster page (progress, rate, source), and an instance that waits for
 * the approval of its downloads on the Models page ("Download it there?" with the size), approved
 * with its button, then running on both nodes.
 */

const REPO = 'shoal-test/Dash-GGUF';
const Q4 = 'Dash-Q4_K_M.gguf';
const Q4_ID = `${REPO}:Q4_K_M`;
const WAIT_MS = 30_000;

async function call(node: TestNode, method: string, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${node.url}${path}`, { method, headers: { 'x-shoal-client': 'test', 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe('downloads in the dashboard: seen cluster-wide, approved with a button', { timeout: 300_000 }, () => {
  let browser: Browser;
  let hub: HubServer;
  let a: TestNode;
  let b: TestNode;
  let dir: string;

  before(async () => {
    ensureDashboardBuilt();
    dir = await mkdtemp(join(tmpdir(), 'shoal-browser-dl-'));
    const model = await ggufFixture(join(dir, 'q4.gguf'), { seed: 51, vocabSize: 3072 });
    hub = await HubServer.start([{ repo: REPO, files: [{ path: Q4, filePath: model }] }]);
    const env = { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: String(1024 * 1024) };
    [browser, a, b] = await Promise.all([launchBrowser(), startTestNode({ args: ['--name', 'alpha'], env }), startTestNode({ args: ['--name', 'beta'], env })]);
    const code = /shoal1-\S+/.exec((await shoal(a, 'invite', '--code')).stdout)?.[0];
    assert.ok(code);
    assert.equal((await shoal(b, 'join', code)).code, 0);
  });

  after(async () => {
    await browser?.close();
    await Promise.all([a, b].map((n) => n?.stop()));
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('beta’s Cluster page shows alpha’s download with progress and source; alpha’s Models page asks "Download it there?" and its button starts the instance', async () => {
    const aId = (await status(a)).nodeId;
    await using pageB = await openDashboard(browser, b.url, { hash: '#/cluster' });
    hub.throttle(Math.ceil(hub.file(REPO, Q4).size / 12));
    try {
      assert.equal((await call(a, 'POST', '/models/add', { repo: REPO, quant: 'Q4_K_M', pull: true })).status, 201);
      const row = pageB.page.locator(`[data-cluster-download][data-download-node="${aId}"][data-download-state="downloading"]`);
      await row.waitFor({ timeout: WAIT_MS });
      assert.match(await row.innerText(), new RegExp(`${Q4_ID.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[\\s\\S]*on alpha`));
      await row.locator('[role="progressbar"]').waitFor({ timeout: WAIT_MS });
      await eventually('a rate and the source', WAIT_MS, async () => (/\/s · from the hub/.test(await row.locator('[data-download-detail]').innerText()) ? true : undefined));
      await screenshot(pageB.page, 'cluster-downloads');
    } finally {
      hub.throttle(null);
    }
    await eventually('alpha’s download done', WAIT_MS, async () => ((await status(a)).downloads[aId]?.downloads.length === 0 ? true : undefined));

    assert.equal((await call(a, 'PUT', '/settings', { downloadApprovalBytes: 1000 })).status, 200);
    await using pageA = await openDashboard(browser, a.url, { hash: '#/models' });
    // The launch preview lists the download onto beta and says it will wait.
    await pageA.page.locator(`[data-model-card="${Q4_ID}"]`).getByRole('button', { name: 'Launch…' }).click();
    const dialog = pageA.page.getByRole('dialog');
    await dialog.getByLabel('Replicas').fill('2');
    const planned = dialog.locator('.planned-downloads[data-needs-approval="yes"]');
    await planned.waitFor({ timeout: WAIT_MS });
    assert.match(await planned.innerText(), /MiB onto beta from a member · over 1000 B: waits for your approval after launch/);
    await screenshot(pageA.page, 'models-launch-downloads');
    await dialog.getByRole('button', { name: 'Launch' }).click();
    const id = await eventually('the placed instance', WAIT_MS, async () => (await status(a)).instances.find((i) => i.modelId === Q4_ID)?.instanceId);

    const prompt = pageA.page.locator(`[data-approval="${id}"]`);
    await prompt.waitFor({ timeout: WAIT_MS });
    assert.match(await prompt.innerText(), /Download it there\? .*onto beta/);
    await screenshot(pageA.page, 'models-download-approval');
    await prompt.getByRole('button', { name: 'Download' }).click();
    await pageA.page.locator(`[data-instance="${id}"] [data-runner-state="ready"]`).nth(1).waitFor({ timeout: 90_000 });
    assert.equal(await prompt.count(), 0, 'the prompt is gone once approved');
    const view = ((await status(a)) as StatusView).instances.find((i) => i.instanceId === id);
    assert.equal(view?.awaitingApproval, null);
    assert.deepEqual(pageA.problems, []);
    assert.deepEqual(pageB.problems, []);
  });
});
