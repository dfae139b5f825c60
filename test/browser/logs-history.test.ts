import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { ensureDashboardBuilt, launchBrowser, openDashboard, screenshot } from '../support/browser.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * The Logs page in Chromium against a real node (tier 5) that ran before from the same data dir: the
 * live view has this start's lines, "Earlier lines" adds the previous start's from the log file.
 */

const WAIT_MS = 30_000;
let browser: Browser;
let node: TestNode;
let dataDir: string;

before(async () => {
  ensureDashboardBuilt();
  dataDir = await mkdtemp(join(tmpdir(), 'shoal-browser-history-'));
  const first = await startTestNode({ dataDir, args: ['--name', 'before'] });
  await first.stop();
  [browser, node] = await Promise.all([launchBrowser(), startTestNode({ dataDir, args: ['--name', 'after'] })]);
});
after(async () => {
  await browser?.close();
  await node?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

test('"Earlier lines" shows the previous start’s lines from the log file, then the live ones', { timeout: 120_000 }, async () => {
  await using dash = await openDashboard(browser, node.url, { hash: '#/logs' });
  const { page } = dash;
  await page.locator('.log-line', { hasText: "Shoal node 'after' serving" }).first().waitFor({ timeout: WAIT_MS });
  assert.equal(await page.locator('.log-line', { hasText: "Shoal node 'before' serving" }).count(), 0, 'the ring has this start only');
  await page.getByRole('button', { name: 'Earlier lines' }).click();
  const earlier = page.locator('.log-line', { hasText: "Shoal node 'before' serving" });
  await earlier.first().waitFor({ timeout: WAIT_MS });
  assert.ok(Number(await earlier.first().getAttribute('data-seq')) < 0, 'a line from the file has no ring number');
  // Once each: the lines the page had are replaced by the file's copies, not shown twice.
  assert.equal(await page.locator('.log-line', { hasText: "Shoal node 'after' serving" }).count(), 1);
  const texts = await page.locator('.log-line .log-msg').allInnerTexts();
  assert.ok(texts.findIndex((t) => t.startsWith("Shoal node 'before' serving")) < texts.findIndex((t) => t.startsWith("Shoal node 'after' serving")), 'oldest first');
  await screenshot(page, 'logs-history');
  assert.deepEqual(dash.problems, []);
});
