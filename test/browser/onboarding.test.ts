import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import type { Browser, Page } from 'playwright-core';
import type { StatusView } from '../../src/api/control/control.js';
import type { Plan } from '../../src/placement/plan.js';
import { DESKTOP, ensureDashboardBuilt, launchBrowser, openDashboard, PHONE, screenshot, type DashboardPage } from '../support/browser.js';
import { eventually } from '../support/cli.js';
import { ggufFixture } from '../support/hub-server.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * What a first-time user meets on the dashboard (tier 5, Debian's Chromium against real nodes): the
 * version and a "Connect a client" panel whose curl example runs as shown, a notice when the chat
 * model is a built-in random one, the typing indicator and each answer's speed line, the launch
 * preview's prediction as the node computes it, a node on its own shown as standalone even after its
 * first launch founded a cluster of one, a topology that fits a 390 px phone at a readable size, and
 * names, never peer ids, in the topology and the logs of a two-node cluster.
 */

const WAIT_MS = 30_000;
/** A peer id as the node prints it. */
const PEER_ID = /12D3KooW[1-9A-HJ-NP-Za-km-z]{44}/;
const CONTROL_HEADERS = { 'content-type': 'application/json', 'x-shoal-client': 'test' };
const execFileAsync = promisify(execFile);

async function state(node: TestNode): Promise<StatusView> {
  return (await (await fetch(`${node.url}/state`)).json()) as StatusView;
}

async function control<T>(node: TestNode, path: string, body: unknown): Promise<T> {
  const res = await fetch(`${node.url}/${path}`, { method: 'POST', headers: CONTROL_HEADERS, body: JSON.stringify(body) });
  const text = await res.text();
  assert.ok(res.ok, `POST /${path} answered ${res.status}: ${text}`);
  return JSON.parse(text) as T;
}

async function go(page: Page, name: string): Promise<void> {
  // The callback runs in the page; the root tsconfig has no DOM types, so it is written as text.
  await page.evaluate(`window.location.hash = ${JSON.stringify(`#/${name}`)}`);
  await page.locator(`main[data-page="${name}"]`).waitFor({ timeout: WAIT_MS });
}

function assertClean(dash: DashboardPage, expected: RegExp[] = []): void {
  assert.deepEqual(
    dash.problems.filter((p) => !expected.some((re) => re.test(p))),
    [],
    'no console errors, page errors or failed requests',
  );
}

async function packageVersion(): Promise<string> {
  const pkg = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

describe('onboarding on one node', { timeout: 600_000 }, () => {
  let browser: Browser;
  let node: TestNode;
  let dir: string;
  /** The node's default model: a GGUF file of its own, not a built-in. */
  const OWN = 'own';

  before(async () => {
    ensureDashboardBuilt();
    dir = await mkdtemp(join(tmpdir(), 'shoal-onboarding-'));
    const file = await ggufFixture(join(dir, `${OWN}.gguf`), { seed: 33 });
    [browser, node] = await Promise.all([launchBrowser(), startTestNode({ args: ['--name', 'alpha', '--default-model', file] })]);
  });
  after(async () => {
    await browser?.close();
    await node?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('the version shows; the connect panel gives the base URL, the key and snippets, and its curl runs as shown', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/cluster' });
    const { page } = dash;
    const version = await packageVersion();
    assert.equal((await state(node)).version, version, 'GET /state says the version');
    await page.locator(`header [data-version="${version}"]`).waitFor({ timeout: WAIT_MS });
    assert.equal(await page.locator('header [data-version]').innerText(), `v${version}`);

    const panel = page.locator('[data-connect]');
    await panel.waitFor({ timeout: WAIT_MS });
    assert.equal(await panel.locator('[data-base-url]').innerText(), `${node.url}/v1`);
    assert.equal(await panel.locator('[data-api-key]').getAttribute('data-api-key'), 'none');
    assert.match(await panel.locator('[data-api-key]').innerText(), /Not needed/);
    assert.match(await panel.locator(`[data-version="${version}"]`).innerText(), new RegExp(`Shoal ${version.replace(/\./g, '\\.')}`));

    const curl = await panel.locator('[data-snippet="curl"] code').innerText();
    assert.match(curl, new RegExp(`curl ${node.url}/v1/chat/completions`));
    assert.match(curl, new RegExp(`"model":"${OWN}"`), 'the example names a model the node serves');
    // The example is the real thing: run by a shell, it gets an answer.
    const { stdout } = await execFileAsync('sh', ['-c', `${curl} --silent --show-error --fail`], { timeout: 60_000 });
    const answer = JSON.parse(stdout) as { object: string; model: string; choices: { message: { content: string } }[] };
    assert.equal(answer.object, 'chat.completion');
    assert.equal(answer.model, OWN);

    await panel.getByRole('tab', { name: 'Python' }).click();
    assert.match(await panel.locator('[data-snippet="python"] code').innerText(), new RegExp(`OpenAI\\(base_url="${node.url}/v1", api_key="none"\\)`));
    await panel.getByRole('tab', { name: 'JavaScript' }).click();
    assert.match(await panel.locator('[data-snippet="javascript"] code').innerText(), new RegExp(`new OpenAI\\(\\{ baseURL: "${node.url}/v1", apiKey: 'none' \\}\\)`));
    await screenshot(page, 'onboarding-connect');
    assertClean(dash);
  });

  test('a node on its own is standalone: no Leave or Dissolve', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/cluster' });
    const { page } = dash;
    await page.locator('[data-cluster-role="standalone"]').waitFor({ timeout: WAIT_MS });
    assert.equal((await state(node)).role, 'standalone');
    assert.equal(await page.getByRole('button', { name: 'Leave cluster' }).count(), 0);
    assert.equal(await page.getByRole('button', { name: 'Dissolve cluster' }).count(), 0);
    assertClean(dash);
  });

  test('the launch preview shows the prediction the node computed (or none); after the first launch the node is still standalone', async () => {
    const dry = await control<{ plan: Plan }>(node, 'place_instance', { model: 'shoal/tiny-eos', dry_run: true });
    await using dash = await openDashboard(browser, node.url, { hash: '#/models' });
    const { page } = dash;
    await page.locator('[data-model-card="shoal/tiny-eos"]').getByRole('button', { name: 'Launch…' }).click();
    const plan = page.getByRole('dialog').locator('[data-plan-shape]');
    await plan.waitFor({ timeout: WAIT_MS });
    // This node never measured its memory bandwidth, so it predicts nothing (a measured node's figure: prediction.test.ts).
    assert.equal(dry.plan.predictedDecodeTokPerS, null, 'no prediction from an unmeasured node');
    assert.equal(await plan.locator('[data-predicted]').getAttribute('data-predicted'), 'none', 'no figure where the node has none');
    assert.match(await plan.locator('[data-predicted]').innerText(), /no prediction \(not measured\)/i);
    await page.getByRole('dialog').getByRole('button', { name: 'Launch' }).click();
    await page.locator('[data-instance][data-model="shoal/tiny-eos"]:not([data-local]) [data-runner-state="ready"]').waitFor({ timeout: 60_000 });

    // Placing needs a log, so the first launch founded a cluster of one; to the operator nothing changed.
    await eventually('the launch to found a cluster of one', WAIT_MS, async () => ((await state(node)).role === 'member' ? true : undefined));
    assert.equal((await state(node)).members.length, 1);
    await go(page, 'cluster');
    await page.locator('[data-cluster-role="standalone"]').waitFor({ timeout: WAIT_MS });
    assert.match(await page.locator('[data-cluster-role]').innerText(), /Standalone/);
    assert.equal(await page.getByRole('button', { name: 'Leave cluster' }).count(), 0, 'no Leave offered to a node on its own');
    assert.equal(await page.getByRole('button', { name: 'Dissolve cluster' }).count(), 0, 'no Dissolve either');
    assert.match(await page.locator('.cluster-page').innerText(), /on its own/);
    await screenshot(page, 'onboarding-standalone-after-launch');
    assertClean(dash);
  });

  test('chat: a notice for a built-in random model and none for the node’s own; a typing indicator; each answer’s speed line', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/chat' });
    const { page } = dash;
    const select = page.locator('select[aria-label="Model"]');
    await select.locator('option[value="shoal/tiny-eos"]').waitFor({ state: 'attached', timeout: WAIT_MS });
    await select.selectOption('shoal/tiny-eos');
    const notice = page.locator('[data-random-model]');
    await notice.waitFor({ timeout: WAIT_MS });
    assert.match(await notice.innerText(), /shoal\/tiny-eos is a built-in test model with random weights/);
    assert.match(await notice.innerText(), /Models page/);
    await screenshot(page, 'onboarding-chat-random-model');
    await select.selectOption(OWN);
    await notice.waitFor({ state: 'detached', timeout: WAIT_MS });

    // A long answer (this model never ends by itself) shows the indicator while it streams.
    await page.getByLabel('Max tokens').fill('4000');
    await page.getByLabel('Message').fill('Tell me a long story');
    await page.getByLabel('Message').press('Enter');
    const answer = page.locator('.bubble-assistant').first();
    await answer.locator('[data-typing]').waitFor({ timeout: WAIT_MS });
    await answer.locator('.markdown:not(:empty)').waitFor({ timeout: WAIT_MS });
    assert.equal(await answer.locator('[data-typing]').count(), 1, 'still typing while text arrives');
    await page.getByRole('button', { name: 'Stop' }).click();
    await answer.locator('[data-answer-meta]').waitFor({ timeout: WAIT_MS });
    assert.equal(await answer.locator('[data-typing]').count(), 0, 'the indicator goes when the answer ends');

    await page.getByLabel('Max tokens').fill('24');
    await page.getByLabel('Message').fill('And a short one');
    await page.getByLabel('Message').press('Enter');
    const meta = page.locator('.bubble-assistant').nth(1).locator('[data-answer-meta]');
    await meta.waitFor({ timeout: WAIT_MS });
    assert.match(await meta.innerText(), new RegExp(`^${OWN} · \\d+ tokens · [\\d.]+ tokens/s · first token [\\d.]+ (ms|s)`));
    assertClean(dash);
  });

  test('at 390 px the topology is a column at full size inside its card', async () => {
    await using dash = await openDashboard(browser, node.url, { viewport: PHONE, hash: '#/cluster' });
    const { page } = dash;
    const svg = page.locator('svg.topology[data-layout="column"]');
    await svg.locator('[data-self]').waitFor({ timeout: WAIT_MS });
    const fit = await page.evaluate<{ cardOver: number; svgRight: number; cardRight: number; scale: number; pageOver: number; smallest: number }>(`(() => {
      const svg = document.querySelector('svg.topology');
      const card = svg.closest('.card');
      const smallest = Math.min(...[...svg.querySelectorAll('text')].map((t) => t.getBoundingClientRect().height).filter((h) => h > 0));
      return {
        cardOver: card.scrollWidth - card.clientWidth,
        svgRight: svg.getBoundingClientRect().right,
        cardRight: card.getBoundingClientRect().right,
        scale: svg.getScreenCTM().a,
        pageOver: document.documentElement.scrollWidth - window.innerWidth,
        smallest,
      };
    })()`);
    assert.ok(fit.cardOver <= 0, `nothing overflows the topology card (${fit.cardOver} px)`);
    assert.ok(fit.svgRight <= fit.cardRight, 'the graph ends inside its card');
    assert.ok(fit.pageOver <= 1, `nothing wider than the phone (${fit.pageOver} px over)`);
    assert.ok(fit.scale >= 1, `drawn at full size or larger, not shrunk (${fit.scale.toFixed(2)}x)`);
    assert.ok(fit.smallest >= 10, `the smallest text is readable (${fit.smallest.toFixed(1)} px tall)`);
    await screenshot(page, 'onboarding-topology-phone');
    assertClean(dash);
  });
});

describe('the connect panel on a node that asks for an API key', { timeout: 300_000 }, () => {
  let browser: Browser;
  let node: TestNode;
  const KEY = 'onboarding-secret';

  before(async () => {
    ensureDashboardBuilt();
    [browser, node] = await Promise.all([launchBrowser(), startTestNode({ args: ['--name', 'keyed', '--api-key', KEY] })]);
  });
  after(async () => {
    await browser?.close();
    await node?.stop();
  });

  test('says a key is needed, and its curl runs with the key from the environment (and fails without)', async () => {
    assert.equal((await state(node)).apiKeyRequired, true);
    await using dash = await openDashboard(browser, node.url, { hash: '#/cluster' });
    const panel = dash.page.locator('[data-connect]');
    await panel.locator('[data-api-key="required"]').waitFor({ timeout: WAIT_MS });
    assert.match(await panel.locator('[data-api-key]').innerText(), /Needed/);
    const curl = await panel.locator('[data-snippet="curl"] code').innerText();
    assert.doesNotMatch(curl, new RegExp(KEY), 'the key itself is never on the page');
    const shell = (env: NodeJS.ProcessEnv): Promise<{ stdout: string }> => execFileAsync('sh', ['-c', `${curl} --silent --show-error --fail`], { timeout: 60_000, env: { ...process.env, ...env } });
    const { stdout } = await shell({ SHOAL_API_KEY: KEY });
    assert.equal((JSON.parse(stdout) as { object: string }).object, 'chat.completion');
    await assert.rejects(shell({ SHOAL_API_KEY: 'wrong' }), /401/);
    assertClean(dash);
  });
});

describe('two nodes: names, not peer ids, in the topology and the logs', { timeout: 300_000 }, () => {
  let browser: Browser;
  let a: TestNode;
  let b: TestNode;

  before(async () => {
    ensureDashboardBuilt();
    [browser, a, b] = await Promise.all([launchBrowser(), startTestNode({ args: ['--name', 'alpha'] }), startTestNode({ args: ['--name', 'beta'] })]);
    const { code } = await control<{ code: string }>(a, 'cluster/invite-code', {});
    await control(b, 'cluster/join', { code });
    await eventually('both nodes to be members', WAIT_MS, async () => ((await Promise.all([state(a), state(b)])).every((s) => s.members.length === 2) ? true : undefined));
  });
  after(async () => {
    await browser?.close();
    await Promise.all([a, b].map((n) => n?.stop()));
  });

  test('both topologies and member lists name the nodes; a real cluster offers Leave', async () => {
    for (const node of [a, b]) {
      for (const viewport of [DESKTOP, PHONE]) {
        await using dash = await openDashboard(browser, node.url, { viewport, hash: '#/cluster' });
        const { page } = dash;
        await page.locator('svg.topology[data-members="2"]').waitFor({ timeout: WAIT_MS });
        // textContent includes the hover titles.
        const drawn = (await page.locator('svg.topology').textContent()) ?? '';
        assert.match(drawn, /alpha/);
        assert.match(drawn, /beta/);
        assert.doesNotMatch(drawn, PEER_ID, 'no peer id in the topology');
        assert.doesNotMatch(await page.locator('.cluster-page').innerText(), PEER_ID, 'no peer id anywhere on the page');
        assert.equal(await page.locator('[data-cluster-role]').getAttribute('data-cluster-role'), 'member');
        await page.getByRole('button', { name: 'Leave cluster' }).waitFor({ timeout: WAIT_MS });
        if (node === a) await screenshot(page, `onboarding-two-nodes-${viewport.width}`);
        assertClean(dash);
      }
    }
  });

  test('log lines name the nodes their fields and messages mention', async () => {
    const ids = { alpha: (await state(a)).nodeId, beta: (await state(b)).nodeId };
    await using dash = await openDashboard(browser, a.url, { hash: '#/logs' });
    const { page } = dash;
    for (const [name, id] of Object.entries(ids)) {
      await page.getByLabel('Machine').selectOption(id);
      // The start line carries the node's id in its fields (nodeId=...).
      const start = page.locator('.log-line', { hasText: `Shoal node '${name}' serving` });
      await start.waitFor({ timeout: WAIT_MS });
      assert.match(await start.innerText(), new RegExp(`nodeId=${name}\\b`));
      assert.match((await start.getAttribute('title')) ?? '', new RegExp(id), 'the hover keeps the id, to copy');
      const text = await page.locator('.log-box').innerText();
      assert.doesNotMatch(text, PEER_ID, `no peer id in ${name}'s log lines`);
    }
    assertClean(dash);
  });
});
