import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { DESKTOP, ensureDashboardBuilt, launchBrowser, openDashboard, PHONE, screenshot, type DashboardPage } from '../support/browser.js';
import { eventually } from '../support/cli.js';
import { ggufFixture, HubServer } from '../support/hub-server.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * The dashboard in Debian's Chromium against a real node (tier 5): every page at desktop and phone
 * width without a console error or a request to another host, chat streaming and Stop, models from a
 * local hub (search, add, download progress, then the hub gone), and launching and stopping an
 * instance with the placement preview. Screenshots land in test-artifacts/screenshots/.
 */

const PAGES = ['cluster', 'models', 'chat', 'metrics', 'logs', 'observability'] as const;
const REPO = 'shoal-test/Tiny-GGUF';
const Q4 = 'Tiny-Q4_K_M.gguf';
/** Playwright waits: long enough for a busy 2-core machine, short enough to fail clearly. */
const WAIT_MS = 30_000;

/** Goes to a page by its hash (no reload) and waits for it to render. */
async function go(page: Page, name: string): Promise<void> {
  // The callback runs in the page; the root tsconfig has no DOM types, so it is written as text.
  await page.evaluate(`window.location.hash = ${JSON.stringify(`#/${name}`)}`);
  await page.locator(`main[data-page="${name}"]`).waitFor({ timeout: WAIT_MS });
}

/** What each page shows once it has its data. */
async function ready(page: Page, name: (typeof PAGES)[number]): Promise<void> {
  const wait = { timeout: WAIT_MS };
  switch (name) {
    case 'cluster':
      await page.locator('svg.topology [data-self]').waitFor(wait);
      break;
    case 'models':
      await page.locator('[data-model-card="shoal/tiny"]').waitFor(wait);
      break;
    case 'chat':
      await page.locator('select[aria-label="Model"] option').first().waitFor({ state: 'attached', ...wait });
      break;
    case 'metrics':
      await page.locator('figure.chart svg').first().waitFor(wait);
      break;
    case 'logs':
      await page.locator('.log-line').first().waitFor(wait);
      break;
    case 'observability':
      await page.locator('[data-timeline-kind="start"]').first().waitFor(wait);
      break;
  }
}

/** `expected`: problems the test caused on purpose (an answer >= 400 is logged by Chromium as a console error too). */
function assertClean(dash: DashboardPage, origin: string, expected: RegExp[] = []): void {
  const problems = dash.problems.filter((p) => !expected.some((re) => re.test(p)));
  assert.deepEqual(problems, [], 'no console errors, page errors or failed requests');
  const elsewhere = dash.requests.filter((url) => !url.startsWith(`${origin}/`) && !url.startsWith('data:'));
  assert.deepEqual(elsewhere, [], 'no request leaves the node the page came from');
}

/** Requests in flight on the node, from GET /state: its own runners and every cluster instance's (a runner may count twice; zero is zero). */
async function inFlight(node: TestNode): Promise<number> {
  const state = (await (await fetch(`${node.url}/state`)).json()) as { instances?: { runners: { inFlight: number }[] }[]; models: { inFlight: number }[] };
  assert.ok(state.models.length > 0 && state.models.every((m) => typeof m.inFlight === 'number'), 'GET /state lists this node\'s runners with their requests in flight');
  const local = state.models.reduce((s, m) => s + m.inFlight, 0);
  return local + (state.instances ?? []).flatMap((i) => i.runners).reduce((s, r) => s + r.inFlight, 0);
}

describe('the dashboard on one node', { timeout: 600_000 }, () => {
  let browser: Browser;
  let node: TestNode;
  let hub: HubServer;
  let dir: string;

  before(async () => {
    ensureDashboardBuilt();
    dir = await mkdtemp(join(tmpdir(), 'shoal-browser-'));
    const model = await ggufFixture(join(dir, 'q4.gguf'), { seed: 21, vocabSize: 3072 });
    hub = await HubServer.start([{ repo: REPO, files: [{ path: Q4, filePath: model }], downloads: 7, likes: 1 }]);
    [browser, node] = await Promise.all([launchBrowser(), startTestNode({ args: ['--name', 'alpha'], env: { SHOAL_HF_ENDPOINT: hub.url } })]);
  });
  after(async () => {
    await browser?.close();
    await node?.stop();
    await hub?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('every page loads without errors at desktop width, in light and dark; screenshots', async () => {
    for (const colorScheme of ['light', 'dark'] as const) {
      await using dash = await openDashboard(browser, node.url, { viewport: DESKTOP, colorScheme });
      const { page } = dash;
      assert.equal(await page.locator('html').getAttribute('data-theme'), colorScheme, 'the theme follows the system preference');
      for (const name of PAGES) {
        await go(page, name);
        await ready(page, name);
        await screenshot(page, `${name}-desktop-${colorScheme}`);
      }
      // The stream pushes state: the header says so.
      await page.locator('.conn[data-stream="live"]').first().waitFor({ timeout: WAIT_MS });
      assertClean(dash, node.url);
    }
  });

  test('at phone width the navigation folds into a menu; the theme toggle is remembered', async () => {
    await using dash = await openDashboard(browser, node.url, { viewport: PHONE });
    const { page } = dash;
    await ready(page, 'cluster');
    const nav = page.locator('#main-nav');
    assert.equal(await nav.isVisible(), false, 'the nav is folded');
    for (const name of PAGES) {
      await page.getByRole('button', { name: 'Menu' }).click();
      await nav.getByRole('link', { name: new RegExp(`^${name}$`, 'i') }).click();
      await page.locator(`main[data-page="${name}"]`).waitFor({ timeout: WAIT_MS });
      await ready(page, name);
      assert.equal(await nav.isVisible(), false, 'the menu closes after a choice');
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - window.innerWidth');
      assert.ok(overflow <= 1, `${name}: nothing wider than the phone (${overflow} px over)`);
      await screenshot(page, `${name}-phone`);
    }
    await page.locator('[data-theme-toggle]').click();
    assert.equal(await page.locator('html').getAttribute('data-theme'), 'dark');
    await page.reload();
    await ready(page, 'observability');
    assert.equal(await page.locator('html').getAttribute('data-theme'), 'dark', 'the choice survives a reload');
    assertClean(dash, node.url);
  });

  test('chat streams a reply with its speed; Stop stops it; the conversation survives a reload', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/chat' });
    const { page } = dash;
    await ready(page, 'chat');
    await page.locator('select[aria-label="Model"]').selectOption('shoal/tiny');

    // A short answer runs to its end and says how fast it came.
    await page.getByLabel('Max tokens').fill('24');
    await page.getByLabel('Message').fill('Say something **short**');
    await page.getByLabel('Message').press('Enter');
    const first = page.locator('.bubble-assistant').first();
    const meta = first.locator('[data-answer-meta]');
    await meta.waitFor({ timeout: WAIT_MS });
    assert.match(await meta.innerText(), /\d+ tokens · [\d.]+ tokens\/s · first token [\d.]+ (ms|s)/);
    assert.ok((await first.locator('.markdown').innerText()).trim().length > 0, 'the answer has text');
    assert.equal(await page.locator('.bubble-user strong').count(), 0, 'the question is shown as typed, not as markdown');

    // A long answer is stopped as soon as it starts to stream.
    await page.getByLabel('Max tokens').fill('4000');
    await page.getByLabel('Message').fill('Now talk for a long time');
    await page.getByLabel('Message').press('Enter');
    const second = page.locator('.bubble-assistant').nth(1);
    await second.locator('.markdown:not(:empty)').waitFor({ timeout: WAIT_MS });
    await page.getByRole('button', { name: 'Stop' }).click();
    const stoppedMeta = second.locator('[data-answer-meta]');
    await stoppedMeta.waitFor({ timeout: WAIT_MS });
    assert.match(await stoppedMeta.innerText(), /stopped/);
    const tokens = Number(/(\d+) tokens/.exec(await stoppedMeta.innerText())?.[1]);
    assert.ok(tokens > 0 && tokens < 4000, `stopped early (${tokens} tokens)`);
    const text = await second.locator('.markdown').innerText();
    await eventually('the node to end the generation', 5000, async () => ((await inFlight(node)) === 0 ? true : undefined));
    assert.equal(await second.locator('.markdown').innerText(), text, 'nothing more arrives after Stop');
    await page.getByRole('button', { name: 'Send' }).waitFor({ timeout: WAIT_MS });
    await screenshot(page, 'chat-answers');

    await page.reload();
    await page.locator('.bubble').nth(3).waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('.bubble').count(), 4, 'two questions and two answers kept in the browser');
    assert.match(await page.locator('.bubble-assistant').nth(1).locator('[data-answer-meta]').innerText(), /stopped/);
    await page.getByRole('button', { name: 'New chat' }).click();
    assert.equal(await page.locator('.bubble').count(), 0);
    assertClean(dash, node.url);
  });

  test('models: search the hub, add, download with a progress bar; a hub that is gone is said so', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/models' });
    const { page } = dash;
    await ready(page, 'models');
    assert.equal(await page.locator('[data-model-card="shoal/tiny"] .tag').innerText(), 'Built-in');

    await page.getByLabel('Search Hugging Face').fill('tiny');
    await page.getByRole('button', { name: 'Search' }).click();
    const result = page.locator(`[data-search-result="${REPO}"]`);
    await result.waitFor({ timeout: WAIT_MS });
    assert.match(await result.innerText(), /7 downloads/);
    await result.getByRole('button', { name: 'Add' }).click();
    const card = page.locator('[data-model-card]', { hasText: 'From Hugging Face' });
    await card.waitFor({ timeout: WAIT_MS });
    assert.match(await card.innerText(), /Not downloaded/);

    // Slow enough to see the bar move.
    hub.throttle(256 * 1024);
    await card.getByRole('button', { name: 'Download' }).click();
    await page.locator('[data-download] [role="progressbar"]:not([aria-valuenow="0"])').first().waitFor({ timeout: WAIT_MS });
    await screenshot(page, 'models-downloading');
    await eventually('the download to finish', 60_000, async () => ((await card.innerText()).includes('On disk') ? true : undefined));
    hub.throttle(null);
    assert.equal(await page.locator('[data-download] [role="progressbar"]').first().getAttribute('aria-valuenow'), '100');
    assertClean(dash, node.url);

    await hub.close();
    await page.getByRole('button', { name: 'Search' }).click();
    const error = page.locator('.error-box', { hasText: 'Hugging Face is unreachable' });
    await error.waitFor({ timeout: WAIT_MS });
    assert.match(await error.innerText(), /cannot be reached/);
    await screenshot(page, 'models-hub-unreachable');
  });

  test('metrics: pushed samples extend the charts, summed and per node', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/metrics' });
    const { page } = dash;
    await ready(page, 'metrics');
    const memoryLine = page.locator('figure[data-chart="Memory"] path').first();
    const before = await memoryLine.getAttribute('d');
    await eventually('a pushed sample to extend the memory line', WAIT_MS, async () => ((await memoryLine.getAttribute('d')) !== before ? true : undefined));
    const nodeId = ((await (await fetch(`${node.url}/state`)).json()) as { nodeId: string }).nodeId;
    await page.getByLabel('Node').selectOption(nodeId);
    await page.waitForURL(new RegExp(`#/metrics\\?node=${nodeId}$`));
    // A flat line has no height, which Playwright calls hidden: wait for it to be drawn instead.
    await page.locator('figure[data-chart="Generated tokens/s"] path[d^="M"]').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    assert.match(await page.locator('figure[data-chart="CPU"] .legend').innerText(), /busy: /);
    assertClean(dash, node.url);
  });

  test('launch an instance with a placement preview, see its runner ready, stop it', async () => {
    // A second page follows the node's log meanwhile: the instance's runner shows up there live.
    await using logs = await openDashboard(browser, node.url, { hash: '#/logs' });
    await ready(logs.page, 'logs');
    await using dash = await openDashboard(browser, node.url, { hash: '#/models' });
    const { page } = dash;
    await ready(page, 'models');
    await page.locator('[data-model-card="shoal/tiny-eos"]').getByRole('button', { name: 'Launch…' }).click();
    const dialog = page.getByRole('dialog');
    const plan = dialog.locator('[data-plan-shape]');
    await plan.waitFor({ timeout: WAIT_MS });
    assert.equal(await plan.getAttribute('data-plan-shape'), 'single');
    // A figure only where the node measured its memory bandwidth (`shoal doctor`); a fresh CI machine has not.
    assert.match(await plan.innerText(), /tokens\/s|No prediction \(not measured\)/);
    assert.match(await plan.innerText(), /alpha/);
    // Slots come from the memory fit (16 for the tiny model), and the dialog sets them.
    const slots = plan.locator('[data-plan-slots]');
    assert.equal(await slots.getAttribute('data-plan-slots'), '16');
    assert.match(await plan.innerText(), /what fits/);
    await screenshot(page, 'models-launch-preview');
    await dialog.getByLabel('Slots').fill('2');
    await plan.locator('[data-plan-slots="2"]').waitFor({ timeout: WAIT_MS });
    assert.match(await plan.innerText(), /as asked/);
    assert.match(await plan.innerText(), /KV cache f16 · flash attention auto/);
    await dialog.getByLabel('Slots').fill('');
    await plan.locator('[data-plan-slots="16"]').waitFor({ timeout: WAIT_MS });

    // An impossible ask is refused in words, before anything runs.
    await dialog.getByLabel('Replicas').fill('3');
    const refusal = dialog.locator('.error-box');
    await refusal.waitFor({ timeout: WAIT_MS });
    assert.match(await refusal.innerText(), /No suitable nodes/);
    await dialog.getByLabel('Replicas').fill('');
    await plan.waitFor({ timeout: WAIT_MS });

    await dialog.getByRole('button', { name: 'Launch' }).click();
    const instance = page.locator('[data-instance][data-model="shoal/tiny-eos"]:not([data-local])');
    await instance.locator('[data-runner-state="ready"]').waitFor({ timeout: 60_000 });
    await screenshot(page, 'models-running');
    await logs.page.locator('.log-line', { hasText: 'shoal/tiny-eos' }).first().waitFor({ timeout: WAIT_MS });
    assertClean(logs, node.url);
    await instance.getByRole('button', { name: 'Stop' }).click();
    await instance.waitFor({ state: 'detached', timeout: WAIT_MS });
    // The refused dry run answered 409; nothing else may fail.
    assertClean(dash, node.url, [/\b409\b.*\/place_instance/]);
  });
});

describe('two nodes on loopback: invite on one dashboard, approve on the other', { timeout: 300_000 }, () => {
  let browser: Browser;
  let a: TestNode;
  let b: TestNode;

  before(async () => {
    ensureDashboardBuilt();
    [browser, a] = await Promise.all([launchBrowser(), startTestNode({ args: ['--name', 'alpha'] })]);
    const addr = ((await (await fetch(`${a.url}/state`)).json()) as { addrs: string[] }).addrs[0]!;
    // Discovery is off on loopback; a bootstrap address makes the two meet instead.
    b = await startTestNode({ args: ['--name', 'beta', '--bootstrap', addr] });
  });
  after(async () => {
    await browser?.close();
    await Promise.all([a, b].map((n) => n?.stop()));
  });

  test('both topologies show two members after the invitation is approved; leave asks first', async () => {
    await using pageA = await openDashboard(browser, a.url, { hash: '#/cluster' });
    await using pageB = await openDashboard(browser, b.url, { hash: '#/cluster' });
    const fingerprintA = await pageA.page.locator('.cluster-page .fingerprint').first().innerText();

    const beta = pageA.page.locator('[data-discovered-row]', { hasText: 'beta' });
    await beta.waitFor({ timeout: WAIT_MS });
    await beta.getByRole('button', { name: 'Invite' }).click();

    const invitation = pageB.page.locator('[data-invitation]');
    await invitation.waitFor({ timeout: WAIT_MS });
    assert.match(await invitation.innerText(), /alpha/);
    assert.equal(await invitation.locator('.fingerprint').innerText(), fingerprintA, 'the inviter’s fingerprint, to compare');
    await screenshot(pageB.page, 'cluster-invitation');
    await invitation.getByRole('button', { name: 'Approve' }).click();

    for (const { page } of [pageA, pageB]) {
      await page.locator('svg.topology[data-members="2"]').waitFor({ timeout: WAIT_MS });
      assert.equal(await page.locator('svg.topology [data-member]').count(), 2);
      assert.equal(await page.locator('svg.topology [data-master]').count(), 1, 'one master');
      assert.equal(await page.locator('svg.topology [data-self]').count(), 1);
      assert.match(await page.locator('svg.topology [data-self]').innerHTML(), /This node/);
      // Links come from live connections, which the next pushed state carries.
      await page.locator('svg.topology [data-edge]').first().waitFor({ state: 'attached', timeout: WAIT_MS });
      assert.equal(await page.locator('svg.topology [data-edge]').count(), 1, 'a link between the two');
    }
    await screenshot(pageA.page, 'cluster-two-nodes');

    // A nickname given on one dashboard shows on the other.
    await pageA.page.locator('[data-member-row]', { hasText: 'beta' }).getByRole('button', { name: 'Nickname' }).click();
    await pageA.page.getByRole('dialog').getByLabel(/Nickname/).fill('b2');
    await pageA.page.getByRole('dialog').getByRole('button', { name: 'Save' }).click();
    await pageB.page.locator('svg.topology [data-self]', { hasText: 'b2' }).waitFor({ timeout: WAIT_MS });

    // Another member's logs and metrics, fetched over the cluster.
    const betaId = await pageB.page.locator('svg.topology [data-self]').getAttribute('data-member');
    assert.ok(betaId);
    await go(pageA.page, 'logs');
    await pageA.page.getByLabel('Machine').selectOption(betaId);
    await pageA.page.locator('.log-line', { hasText: "Shoal node 'beta' serving" }).waitFor({ timeout: WAIT_MS });
    await screenshot(pageA.page, 'logs-other-member');
    await go(pageA.page, 'metrics');
    await eventually('the cluster sum to hold both nodes', WAIT_MS, async () => ((await pageA.page.locator('.metrics-page .toolbar').innerText()).includes('2 nodes in the newest sample') ? true : undefined));
    await pageA.page.getByLabel('Node').selectOption(betaId);
    await pageA.page.locator('figure[data-chart="Memory"] path[d^="M"]').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    await go(pageA.page, 'cluster');

    await pageB.page.getByRole('button', { name: 'Leave cluster' }).click();
    const dialog = pageB.page.getByRole('dialog');
    await dialog.waitFor({ timeout: WAIT_MS });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    assert.equal(await pageB.page.locator('svg.topology [data-member]').count(), 2, 'cancel does nothing');
    await pageB.page.getByRole('button', { name: 'Leave cluster' }).click();
    await dialog.getByRole('button', { name: 'Leave' }).click();
    await pageA.page.locator('svg.topology[data-members="1"]').waitFor({ timeout: WAIT_MS });
    await pageB.page.locator('svg.topology[data-members="0"]').waitFor({ timeout: WAIT_MS });

    assertClean(pageA, a.url);
    assertClean(pageB, b.url);
  });
});
