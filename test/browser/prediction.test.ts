import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import type { StatusView } from '../../src/api/control/control.js';
import type { Plan } from '../../src/placement/plan.js';
import { bandwidthCachePath, type BandwidthMeasurement } from '../../src/doctor/hardware.js';
import { formatNumber } from '../../dashboard/src/lib/format.js';
import { ensureDashboardBuilt, launchBrowser, openDashboard } from '../support/browser.js';
import { eventually } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * The launch preview shows a speed only where the node measured what the speed model needs (tier 5,
 * Debian's Chromium against real nodes): a node that never measured its memory bandwidth shows "no
 * prediction (not measured)" and no number, and so does an instance placed there (its row and GET
 * /state); the same node with a measurement shows the node's figure.
 */

const WAIT_MS = 30_000;
const CONTROL_HEADERS = { 'content-type': 'application/json', 'x-shoal-client': 'test' };
const MODEL = 'shoal/tiny-eos';

async function dryRun(node: TestNode): Promise<Plan> {
  return eventually('a dry-run plan', WAIT_MS, async () => {
    const res = await fetch(`${node.url}/place_instance`, { method: 'POST', headers: CONTROL_HEADERS, body: JSON.stringify({ model: MODEL, dry_run: true }) });
    // 409 INFO_PENDING until the node's first resources report.
    return res.ok ? ((await res.json()) as { plan: Plan }).plan : undefined;
  });
}

/** The launch preview's speed line for MODEL. */
async function previewSpeed(browser: Browser, node: TestNode): Promise<{ attribute: string | null; text: string }> {
  await using dash = await openDashboard(browser, node.url, { hash: '#/models' });
  const { page } = dash;
  await page.locator(`[data-model-card="${MODEL}"]`).getByRole('button', { name: 'Launch…' }).click();
  const plan = page.getByRole('dialog').locator('[data-plan-shape]');
  await plan.waitFor({ timeout: WAIT_MS });
  const speed = plan.locator('[data-predicted]');
  return { attribute: await speed.getAttribute('data-predicted'), text: await plan.locator('.plan-head').innerText() };
}

describe('the launch preview predicts only from measurements', { timeout: 300_000 }, () => {
  let browser: Browser;
  let unmeasured: TestNode;
  let measured: TestNode;
  let dir: string;

  before(async () => {
    ensureDashboardBuilt();
    dir = await mkdtemp(join(tmpdir(), 'shoal-prediction-'));
    const measuredDir = join(dir, 'measured');
    await mkdir(join(measuredDir, 'doctor'), { recursive: true });
    // What `shoal doctor` caches after measuring (src/doctor/hardware.ts); the node reads it at start.
    const measurement: BandwidthMeasurement = { gbPerSecond: 31, threads: 2, bufferBytes: 256 * 1024 * 1024, measuredAt: new Date().toISOString() };
    await writeFile(bandwidthCachePath(measuredDir), JSON.stringify(measurement));
    [browser, unmeasured, measured] = await Promise.all([launchBrowser(), startTestNode({ dataDir: join(dir, 'unmeasured') }), startTestNode({ dataDir: measuredDir })]);
  });
  after(async () => {
    await browser?.close();
    await unmeasured?.stop();
    await measured?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('a node that never measured its memory bandwidth: no number, "no prediction (not measured)"', async () => {
    const plan = await dryRun(unmeasured);
    assert.equal(plan.predictedDecodeTokPerS, null, 'the plan carries no figure');
    assert.ok(plan.speedArithmetic.some((line) => /not measured its memory bandwidth/.test(line)), plan.speedArithmetic.join('\n'));
    const shown = await previewSpeed(browser, unmeasured);
    assert.equal(shown.attribute, 'none');
    assert.match(shown.text, /no prediction \(not measured\)/i);
    assert.doesNotMatch(shown.text, /tokens\/s/, 'no speed figure anywhere in the preview head');
  });

  test('an instance placed without a prediction shows none, in GET /state and in its row', async () => {
    const res = await fetch(`${unmeasured.url}/place_instance`, { method: 'POST', headers: CONTROL_HEADERS, body: JSON.stringify({ model: MODEL }) });
    assert.equal(res.status, 201, await res.text());
    const state = (await (await fetch(`${unmeasured.url}/state`)).json()) as StatusView;
    assert.equal(state.instances?.find((i) => i.modelId === MODEL)?.predictedDecodeTokPerS, null, 'no figure, not 0');
    await using dash = await openDashboard(browser, unmeasured.url, { hash: '#/models' });
    const row = dash.page.locator(`[data-instance][data-model="${MODEL}"]:not([data-local]) .row-title`);
    await row.waitFor({ timeout: WAIT_MS });
    assert.match(await row.innerText(), /no prediction \(not measured\)/);
    assert.doesNotMatch(await row.innerText(), /tokens\/s/);
  });

  test('a node that measured it: the node’s own figure', async () => {
    const plan = await dryRun(measured);
    assert.ok(plan.predictedDecodeTokPerS !== null && plan.predictedDecodeTokPerS > 0, `a figure (${plan.predictedDecodeTokPerS})`);
    assert.ok(plan.speedArithmetic.some((line) => /31\.0 GB\/s/.test(line)), plan.speedArithmetic.join('\n'));
    // RAM-bandwidth-only arithmetic said ~55,000 tok/s for this model where a few hundred are served.
    assert.ok(plan.predictedDecodeTokPerS < 5000, `a per-token cost bounds the prediction (${plan.predictedDecodeTokPerS} tok/s)`);
    const shown = await previewSpeed(browser, measured);
    assert.notEqual(shown.attribute, 'none');
    assert.match(shown.text, new RegExp(`Predicted ${formatNumber(plan.predictedDecodeTokPerS).replace(/[.,]/g, '\\$&')} tokens/s`));
  });
});
