import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page, Response } from 'playwright-core';
import { ensureDashboardBuilt, launchBrowser, openDashboard } from '../support/browser.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Web pages in Chromium against a real node's control routes, without the admin token: a page from
 * another origin (a second HTTP server) and a DNS-rebinding page (a foreign name Chromium resolves
 * to loopback) try to read the state and to leave, dissolve or get a join code. Every such request
 * must be refused while the node's own dashboard keeps working.
 */

const REBIND_HOST = 'rebind.evil.example';
const WAIT_MS = 30_000;

let node: TestNode;
let foreign: Server;
let foreignUrl: string;
let browser: Browser;

/** The attacker's script: every call a page can make on its own, results kept on `window`. */
function attackPage(target: string): string {
  return `<!doctype html><html><body><script>
  (async () => {
    const target = ${JSON.stringify(target)};
    const tries = [
      ['read state', () => fetch(target + '/state')],
      ['read logs', () => fetch(target + '/logs')],
      ['leave (no-cors)', () => fetch(target + '/cluster/leave', { method: 'POST', mode: 'no-cors' })],
      ['dissolve (no-cors)', () => fetch(target + '/cluster/dissolve', { method: 'POST', mode: 'no-cors' })],
      ['join code (no-cors)', () => fetch(target + '/cluster/invite-code', { method: 'POST', mode: 'no-cors' })],
      ['join code (text body)', () => fetch(target + '/cluster/invite-code', { method: 'POST', mode: 'no-cors', body: '{}', headers: { 'content-type': 'text/plain' } })],
      ['join code (header)', () => fetch(target + '/cluster/invite-code', { method: 'POST', headers: { 'x-shoal-client': 'page' } })],
    ];
    const results = {};
    for (const [name, run] of tries) {
      try {
        const res = await run();
        results[name] = res.type === 'opaque' ? 'opaque' : res.status + ' ' + (await res.text());
      } catch (error) {
        results[name] = 'blocked: ' + error.message;
      }
    }
    window.results = results;
  })();
  </script></body></html>`;
}

/** Node answers the page saw (Playwright sees opaque ones too), and the page's own results. */
async function attack(page: Page, url: string): Promise<{ answers: string[]; results: Record<string, string> }> {
  const answers: string[] = [];
  page.on('response', (response: Response) => {
    const at = new URL(response.url());
    if (at.port === String(node.port) && at.pathname !== '/') answers.push(`${response.status()} ${response.request().method()} ${at.host}${at.pathname}`);
  });
  await page.goto(url);
  await page.waitForFunction('window.results !== undefined', undefined, { timeout: WAIT_MS });
  const results = (await page.evaluate('window.results')) as Record<string, string>;
  // A form post is a navigation: the browser sends it whatever the node says about CORS.
  await page.evaluate(`(() => {
    const form = document.createElement('form');
    form.method = 'POST';
    form.action = ${JSON.stringify(new URL('/cluster/leave', url.includes(REBIND_HOST) ? url : `http://127.0.0.1:${node.port}`).href)};
    document.body.append(form);
    form.submit();
  })()`);
  await page.waitForURL(/\/cluster\/leave$/, { timeout: WAIT_MS });
  return { answers, results };
}

before(async () => {
  ensureDashboardBuilt();
  node = await startTestNode();
  foreign = createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end(attackPage(`http://127.0.0.1:${node.port}`)));
  await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve));
  foreignUrl = `http://127.0.0.1:${(foreign.address() as AddressInfo).port}/`;
  browser = await launchBrowser([
    `--host-resolver-rules=MAP ${REBIND_HOST} 127.0.0.1`,
    // Chromium's own guard (Private/Local Network Access) would stop the rebound page's fetches
    // before they reach the node; other browsers have none, so the node must refuse them itself.
    '--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks',
  ]);
});

after(async () => {
  await browser?.close();
  foreign?.close();
  await node?.stop();
});

/** What a leave, a dissolve or a join code would change. */
async function membership(): Promise<unknown> {
  const state = (await (await fetch(`${node.url}/state`)).json()) as { clusterId: unknown; role: unknown; lastIdx: unknown; members: unknown };
  return { clusterId: state.clusterId, role: state.role, lastIdx: state.lastIdx, members: state.members };
}

describe('web pages cannot drive the control plane', { timeout: 180_000 }, () => {
  test('a page from another origin reaches no control route', async () => {
    const context = await browser.newContext();
    const was = await membership();
    try {
      const { answers, results } = await attack(await context.newPage(), foreignUrl);
      for (const [name, result] of Object.entries(results)) assert.doesNotMatch(result, /^2\d\d/, `${name}: ${result}`);
      assert.ok(answers.length > 0, 'the page reached the node');
      // A preflight finds no CORS grant (404), so the call it announced is never sent.
      for (const answer of answers) assert.match(answer, /^(403 |404 OPTIONS )/, `the node answered ${answer}`);
      assert.deepEqual(await membership(), was);
    } finally {
      await context.close();
    }
  });

  test('a DNS-rebinding page (a foreign name on the node itself) reads nothing and gets no join code', async () => {
    const context = await browser.newContext();
    try {
      const was = await membership();
      const page = await context.newPage();
      const origin = `http://${REBIND_HOST}:${node.port}`;
      // The attacker's page, as if its DNS name had pointed at the attacker a moment before.
      await page.route(`${origin}/`, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: attackPage(origin) }));
      const { answers, results } = await attack(page, `${origin}/`);
      for (const [name, result] of Object.entries(results)) assert.doesNotMatch(result, /^2\d\d/, `${name}: ${result}`);
      assert.ok(answers.length >= 7, `the page calls reached the node: ${answers.join(", ")} ${JSON.stringify(results)}`);
      for (const answer of answers) assert.match(answer, /^403 /, `the node answered ${answer}`);
      assert.deepEqual(await membership(), was);
    } finally {
      await context.close();
    }
  });

  test("the node's own dashboard still reads and acts", async () => {
    await using dashboard = await openDashboard(browser, node.url, { hash: '#/cluster' });
    await dashboard.page.locator('svg.topology [data-self]').waitFor({ timeout: WAIT_MS });
    // A body-less state-changing call, made the way the dashboard makes them.
    const status = await dashboard.page.evaluate(`fetch('/cluster/invite-code', { method: 'POST', headers: { 'x-shoal-client': 'dashboard' } }).then((r) => r.status)`);
    assert.equal(status, 200);
    assert.deepEqual(dashboard.problems, []);
  });
});
