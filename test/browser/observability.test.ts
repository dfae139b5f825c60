import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { ensureDashboardBuilt, launchBrowser, openDashboard, PHONE, screenshot } from '../support/browser.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * The dashboard's Observability page in Debian's Chromium against a real node (tier 5): the cluster
 * timeline shows the node's `start` moment and filters by kind, the Nodes tab shows the node
 * reachable with its build, the tracing switch turns tracing on for the cluster, a chat completion
 * sent afterwards appears as a trace whose waterfall opens with the node's spans, and the request
 * shows up as a point of a performance envelope.
 */

/** Playwright waits: the page re-reads every 5 s, and this machine may be busy. */
const WAIT_MS = 30_000;

let node: TestNode;
let nodeId: string;
let browser: Browser;

async function tab(page: Page, name: string): Promise<void> {
  await page.getByRole('tab', { name }).click();
  await page.locator(`[data-tab-panel="${name.toLowerCase()}"]`).waitFor({ timeout: WAIT_MS });
}

before(async () => {
  ensureDashboardBuilt();
  [node, browser] = await Promise.all([startTestNode(), launchBrowser()]);
  nodeId = ((await (await fetch(`${node.url}/state`)).json()) as { nodeId: string }).nodeId;
});

after(async () => {
  await browser?.close();
  await node?.stop();
});

describe('the Observability page', { timeout: 240_000 }, () => {
  test('timeline, node diagnostics, a trace of a chat request and its performance envelope', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/observability' });
    const { page } = dash;
    await page.waitForLoadState('load');
    await page.locator('nav a', { hasText: 'Observability' }).waitFor({ timeout: WAIT_MS });

    // The timeline: the node's own start, on its own clock.
    const start = page.locator(`tr[data-timeline-kind="start"][data-node="${nodeId}"]`);
    await start.first().waitFor({ timeout: WAIT_MS });
    assert.match(await start.first().innerText(), /serving on http:\/\/127\.0\.0\.1/);
    assert.match(await page.locator(`[data-clock="${nodeId}"]`).innerText(), /this node.s clock/);
    await page.getByLabel('Timeline kind').selectOption('start');
    const kinds = await Promise.all((await page.locator('tr[data-timeline-kind]').all()).map((r) => r.getAttribute('data-timeline-kind')));
    assert.ok(kinds.length > 0 && kinds.every((k) => k === 'start'), `only start moments after filtering: ${kinds.join(', ')}`);
    await screenshot(page, 'observability-timeline');

    // Per-node diagnostics: this node, reachable, with its build and its runner.
    await tab(page, 'Nodes');
    const member = page.locator(`[data-member="${nodeId}"][data-reachable="true"]`);
    await member.waitFor({ timeout: WAIT_MS });
    assert.match(await member.innerText(), /reachable/);
    assert.ok((await member.locator('[data-version]').getAttribute('data-version')) !== null, 'the member shows its version');
    await member.locator('[data-runner]').first().waitFor({ timeout: WAIT_MS });
    await screenshot(page, 'observability-nodes');

    // Tracing is off on a fresh cluster, and the page says what to do.
    await tab(page, 'Traces');
    await page.locator('[data-tracing="off"]').waitFor({ timeout: WAIT_MS });
    await page.getByText('Tracing is off: switch it on to record new requests.').waitFor({ timeout: WAIT_MS });
    await page.getByRole('button', { name: 'Switch tracing on' }).click();
    await page.locator('[data-tracing="on"]').waitFor({ timeout: WAIT_MS });
    const settings = (await (await fetch(`${node.url}/settings`)).json()) as { settings: { tracing?: boolean } };
    assert.equal(settings.settings.tracing, true, 'the switch set the cluster setting');

    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'shoal/tiny', messages: [{ role: 'user', content: 'trace me' }], max_tokens: 8 }),
    });
    assert.equal(res.status, 200, await res.text());

    // The trace appears in the list (the page re-reads every 5 s) and opens as a waterfall.
    const row = page.locator('tr[data-trace]').first();
    await row.waitFor({ timeout: WAIT_MS });
    assert.match(await row.innerText(), /chat\/completions/);
    const traceId = await row.getAttribute('data-trace');
    await row.locator('a').click();
    const viewer = page.locator('[data-trace-viewer]');
    await viewer.waitFor({ timeout: WAIT_MS });
    const lane = viewer.locator(`[data-lane="${nodeId}"]`);
    await lane.waitFor({ timeout: WAIT_MS });
    const spans = lane.locator('.wf-row[data-span]');
    assert.ok((await spans.count()) > 0, 'the node’s lane has spans');
    await spans.first().click();
    await page.locator('[data-span-detail]').waitFor({ timeout: WAIT_MS });
    await screenshot(page, 'observability-trace');

    // The request is a point of the model's envelope on this node.
    await tab(page, 'Performance');
    const envelope = page.locator(`[data-envelope^="shoal/tiny|"][data-envelope$="|${nodeId}"]`);
    await envelope.waitFor({ timeout: WAIT_MS });
    await envelope.locator('[data-point]').first().waitFor({ state: 'attached', timeout: WAIT_MS });
    assert.ok((await envelope.locator('svg circle').count()) > 0, 'the chart draws the point');
    await screenshot(page, 'observability-performance');

    // On a phone the waterfall and the tables fit the width (the tables scroll inside their box).
    await page.setViewportSize(PHONE);
    await page.evaluate(`window.location.hash = ${JSON.stringify(`#/observability?tab=traces&trace=${traceId}`)}`);
    await viewer.locator('.wf-row[data-span]').first().waitFor({ timeout: WAIT_MS });
    // Written as text: the root tsconfig has no DOM types.
    const overflow = (await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than a phone`);
    await screenshot(page, 'observability-trace-phone');

    assert.deepEqual(dash.problems, [], 'no console errors, page errors or failed requests');
  });
});
