import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { ensureDashboardBuilt, launchBrowser, openDashboard } from '../support/browser.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * The dashboard shows a node's GPUs (tier 5, Debian's Chromium against a real node whose detection is
 * replaced by SHOAL_TEST_GPUS, CONTRIBUTING.md): the topology's GPU bar says the device and its VRAM use,
 * the metrics page charts the GPU memory and lists each device with its figures.
 */

const WAIT_MS = 30_000;
const GIB = 1024 ** 3;
const GPUS = [
  { name: 'Test GPU 12G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 12 * GIB, vramFreeBytes: 9 * GIB, utilizationPct: 40, temperatureC: 61, powerW: 150 },
  { name: 'Test GPU 12G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 12 * GIB, vramFreeBytes: 12 * GIB },
];

describe('the dashboard with injected GPUs', { timeout: 300_000 }, () => {
  let browser: Browser;
  let node: TestNode;

  before(async () => {
    ensureDashboardBuilt();
    node = await startTestNode({ env: { SHOAL_TEST_GPUS: JSON.stringify(GPUS) } });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await node?.stop();
  });

  test('the topology bar and the metrics page show the GPUs', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/cluster' });
    const { page } = dash;
    const bar = page.locator('svg.topology [data-self] title', { hasText: /^GPU:/ });
    await bar.waitFor({ state: 'attached', timeout: WAIT_MS });
    assert.equal(await bar.textContent(), 'GPU: 3.00 GiB of 24.0 GiB VRAM (Test GPU 12G, cuda; Test GPU 12G, cuda)');

    await page.evaluate(`window.location.hash = '#/metrics'`);
    const table = page.getByRole('table', { name: 'GPU devices' });
    await table.waitFor({ timeout: WAIT_MS });
    const rows = await table.locator('tbody tr').allInnerTexts();
    assert.equal(rows.length, 2);
    assert.match(rows[0]!, /Test GPU 12G\s+cuda\s+9\.00 GiB of 12\.0 GiB\s+40(\.0+)?%\s+61 °C\s+150 W/);
    assert.match(rows[1]!, /Test GPU 12G\s+cuda\s+12\.0 GiB of 12\.0 GiB\s+-\s+-\s+-/);
    // The sampled GPU figure (the sum of the readings) is charted.
    await page.locator('figure.chart figcaption', { hasText: 'GPU memory' }).waitFor({ timeout: WAIT_MS });
  });
});
