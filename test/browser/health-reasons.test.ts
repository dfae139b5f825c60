import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser } from 'playwright-core';
import { ensureDashboardBuilt, launchBrowser, openDashboard, screenshot } from '../support/browser.js';
import { api } from '../support/control-api.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Health that explains (issue #18), in Debian's Chromium against two real nodes (tier 5): beta's store
 * reserve is larger than any disk, so beta finds its models disk short of headroom and says so on the
 * telemetry plane; alpha's `/state` shows the reason with its remediation, and alpha's dashboard draws
 * it as a badge in beta's topology box and in beta's member row, the remediation in the hover text.
 */

/** Playwright and polling waits: the page re-reads every few seconds, and this machine may be busy. */
const WAIT_MS = 30_000;
/** More than any disk has free (a safe integer of bytes, about 7 PiB). */
const HUGE_RESERVE_BYTES = String(2 ** 52 + 2 ** 51);

interface Reason {
  code: string;
  text: string;
  remediation: string;
}
interface State {
  nodeId: string;
  addrs: string[];
  discovered: { nodeId: string; name: string }[];
  invitations: { id: string }[];
  members: { nodeId: string; name: string; health: { level: string; reasons: Reason[] } }[];
}

async function eventually<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

const state = async (node: TestNode): Promise<State> => (await api<State>(node, 'GET', '/state')).body;

describe('health reasons as badges', { timeout: 240_000 }, () => {
  let browser: Browser;
  let alpha: TestNode;
  let beta: TestNode;
  let betaId: string;

  before(async () => {
    ensureDashboardBuilt();
    // Alpha keeps no reserve, so its own disk never gives it the reason whatever this machine has free.
    [browser, alpha] = await Promise.all([launchBrowser(), startTestNode({ args: ['--name', 'alpha'], env: { SHOAL_DISK_RESERVE_BYTES: '0' } })]);
    const addr = (await state(alpha)).addrs[0]!;
    beta = await startTestNode({ args: ['--name', 'beta', '--bootstrap', addr], env: { SHOAL_DISK_RESERVE_BYTES: HUGE_RESERVE_BYTES } });
    betaId = (await state(beta)).nodeId;
    await eventually('alpha to discover beta', async () => ((await state(alpha)).discovered.some((d) => d.nodeId === betaId) ? true : undefined));
    assert.equal((await api(alpha, 'POST', '/cluster/invite', { node: betaId })).status, 200);
    await eventually('beta to get the invitation', async () => ((await state(beta)).invitations.length > 0 ? true : undefined));
    assert.equal((await api(beta, 'POST', '/cluster/approve', {})).status, 200);
  });
  after(async () => {
    await browser?.close();
    await Promise.all([alpha, beta].map((n) => n?.stop()));
  });

  test("a member's own reason reaches another member's /state and dashboard, with its remediation", async () => {
    const reason = await eventually('alpha to show beta short of disk headroom', async () => {
      const member = (await state(alpha)).members.find((m) => m.nodeId === betaId);
      const found = member?.health.reasons.find((r) => r.code === 'models-disk-low');
      return found && member ? { member, found } : undefined;
    });
    assert.equal(reason.member.health.level, 'degraded');
    assert.match(reason.found.text, /free on the models disk, under the .* reserve: downloads are refused/);
    assert.match(reason.found.remediation, /shoal models rm/);
    const alphaSelf = (await state(alpha)).members.find((m) => m.name === 'alpha');
    assert.ok(alphaSelf && !alphaSelf.health.reasons.some((r) => r.code === 'models-disk-low'), 'alpha keeps no reserve');

    await using dash = await openDashboard(browser, alpha.url, { hash: '#/cluster' });
    const { page } = dash;
    await page.locator('svg.topology[data-members="2"]').waitFor({ timeout: WAIT_MS });

    const box = page.locator(`svg.topology [data-member="${betaId}"] [data-reason="models-disk-low"]`);
    await box.waitFor({ timeout: WAIT_MS });
    assert.equal(await box.locator('text').textContent(), 'disk low');
    assert.match((await box.locator('title').textContent()) ?? '', /downloads are refused\nWhat to do: remove idle models/);

    const row = page.locator(`[data-member-row="${betaId}"] [data-reason="models-disk-low"]`);
    await row.waitFor({ timeout: WAIT_MS });
    assert.equal(await row.innerText(), 'disk low');
    assert.match((await row.getAttribute('title')) ?? '', /What to do: remove idle models \(`shoal models rm`\)/);
    assert.equal(await page.locator(`[data-member-row]:not([data-member-row="${betaId}"]) [data-reason="models-disk-low"]`).count(), 0, 'only on beta');
    await screenshot(page, 'cluster-health-reasons');
  });
});
