import assert from 'node:assert/strict';
import { request, type IncomingHttpHeaders } from 'node:http';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { ensureDashboardBuilt, launchBrowser, openDashboard, screenshot } from '../support/browser.js';
import { eventually } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Browser apps on other origins against a real node's inference API (CORS), in Chromium: an allowed
 * origin's chat completion works through its preflight, another origin is blocked until the cluster
 * settings allow it, and no control route ever answers cross-origin. Then the dashboard's Settings
 * page edits the cluster settings.
 */

const ALLOWED = 'http://app.allowed.test';
const OTHER = 'http://app.other.test';
const WAIT_MS = 30_000;

let node: TestNode;
let browser: Browser;

/** A web app's script: a streamed-free chat completion (JSON, so the browser preflights it) and two control calls. */
function appPage(target: string): string {
  return `<!doctype html><html><body><script>
  (async () => {
    const target = ${JSON.stringify(target)};
    const tries = [
      ['chat', () => fetch(target + '/v1/chat/completions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'shoal/tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }) })],
      ['ollama tags', () => fetch(target + '/api/tags')],
      ['ollama pull', () => fetch(target + '/api/pull', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'acme/none:Q8_0' }) })],
      ['read state', () => fetch(target + '/state')],
      ['leave', () => fetch(target + '/cluster/leave', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })],
      ['settings', () => fetch(target + '/settings', { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ corsOrigins: ['*'] }) })],
    ];
    const results = {};
    for (const [name, run] of tries) {
      try {
        const res = await run();
        const body = await res.json();
        results[name] = res.status + (body.choices ? ' choices' : '') + (body.models ? ' models' : '');
      } catch (error) {
        results[name] = 'blocked';
      }
    }
    window.results = results;
  })();
  </script></body></html>`;
}

/** Opens the app page as if served from `origin` and returns what its calls got. */
async function runApp(origin: string): Promise<Record<string, string>> {
  const context = await browser.newContext();
  try {
    const page: Page = await context.newPage();
    await page.route(`${origin}/`, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: appPage(node.url) }));
    await page.goto(`${origin}/`, { waitUntil: 'load' });
    await page.waitForFunction('window.results !== undefined', undefined, { timeout: WAIT_MS });
    return (await page.evaluate('window.results')) as Record<string, string>;
  } finally {
    await context.close();
  }
}

async function settings(): Promise<{ corsOrigins: string[]; defaultParallel: number | null; apiKeyDigests: string[] }> {
  return ((await (await fetch(`${node.url}/settings`)).json()) as { settings: { corsOrigins: string[]; defaultParallel: number | null; apiKeyDigests: string[] } }).settings;
}

before(async () => {
  ensureDashboardBuilt();
  node = await startTestNode({ args: ['--cors-origin', ALLOWED] });
  browser = await launchBrowser([
    // Chromium's Private Network Access rules vary by version; the node answers them (cors.ts), but the
    // test is about the node's own CORS answers, so they are off here as in foreign-origin.test.ts.
    '--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks',
  ]);
});

after(async () => {
  await browser?.close();
  await node?.stop();
});

describe('CORS for browser apps on other origins', { timeout: 180_000 }, () => {
  test('an allowed origin calls the inference API (preflight answered); control routes never answer it', async () => {
    const results = await runApp(ALLOWED);
    assert.equal(results.chat, '200 choices', JSON.stringify(results));
    assert.equal(results['ollama tags'], '200 models', JSON.stringify(results));
    assert.equal(results['ollama pull'], 'blocked', 'a route that changes the disk never answers another origin');
    assert.equal(results['read state'], 'blocked');
    assert.equal(results.leave, 'blocked');
    assert.equal(results.settings, 'blocked');
    assert.deepEqual((await settings()).corsOrigins, [], 'the page changed no setting');
  });

  test('another origin is blocked, until the cluster settings allow it', async () => {
    const blocked = await runApp(OTHER);
    assert.equal(blocked.chat, 'blocked', JSON.stringify(blocked));
    assert.equal(blocked['ollama tags'], 'blocked');
    const put = await fetch(`${node.url}/settings`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ corsOrigins: [OTHER] }) });
    assert.equal(put.status, 200, await put.text());
    const allowed = await runApp(OTHER);
    assert.equal(allowed.chat, '200 choices', JSON.stringify(allowed));
    assert.equal(allowed['read state'], 'blocked', 'control routes stay closed to it');
  });
});

/** A request as a page on `origin` would send it: raw HTTP, since fetch will not forge Origin. */
function fromOrigin(origin: string, method: string, path: string, body?: string): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(node.url);
    const req = request({ host: url.hostname, port: url.port, method, path, agent: false, headers: { origin, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body ?? '')), 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization' } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('CORS refusals', { timeout: 60_000 }, () => {
  test("each API family answers a refused origin with its own permission error (403), never a 401's", async () => {
    const openai = await fromOrigin('http://refused.test', 'POST', '/v1/chat/completions', '{}');
    assert.equal(openai.status, 403);
    assert.deepEqual([JSON.parse(openai.body).error.type, JSON.parse(openai.body).error.code], ['invalid_request_error', 'forbidden']);
    const anthropic = await fromOrigin('http://refused.test', 'POST', '/v1/messages', '{}');
    assert.equal(anthropic.status, 403);
    assert.equal(JSON.parse(anthropic.body).error.type, 'permission_error');
    const ollama = await fromOrigin('http://refused.test', 'POST', '/api/chat', '{}');
    assert.equal(ollama.status, 403);
    assert.deepEqual(Object.keys(JSON.parse(ollama.body)), ['error']);
  });

  test('Ollama pull and delete refuse even an allowed origin, preflight included', async () => {
    for (const [method, path] of [
      ['OPTIONS', '/api/pull'],
      ['POST', '/api/pull'],
      ['OPTIONS', '/api/delete'],
      ['DELETE', '/api/delete'],
    ]) {
      const res = await fromOrigin(ALLOWED, method!, path!, method === 'OPTIONS' ? undefined : JSON.stringify({ model: 'acme/none:Q8_0' }));
      assert.equal(res.status, 403, `${method} ${path}: ${res.body}`);
      assert.equal(res.headers['access-control-allow-origin'], undefined, `${method} ${path}`);
      assert.equal(res.headers['access-control-allow-headers'], undefined, `${method} ${path}: Authorization is not granted`);
      assert.match(JSON.parse(res.body).error, /changes this node's disk/);
    }
  });
});

describe('the Settings page', { timeout: 180_000 }, () => {
  test('edits a cluster setting and adds an API key', async () => {
    await using dash = await openDashboard(browser, node.url, { hash: '#/settings' });
    const { page } = dash;
    const parallel = page.locator('input[name="default-parallel"]');
    await parallel.waitFor({ timeout: WAIT_MS });
    await parallel.fill('5');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('.notice-ok', { hasText: 'Settings saved for every member' }).waitFor({ timeout: WAIT_MS });
    assert.equal((await settings()).defaultParallel, 5);
    assert.equal(await parallel.inputValue(), '5', 'the form shows the saved value');

    await page.locator('input[name="new-api-key"]').fill('page-key-1234');
    await page.getByRole('button', { name: 'Add key' }).click();
    await page.locator('[data-api-keys="1"]').waitFor({ timeout: WAIT_MS });
    assert.equal((await settings()).apiKeyDigests.length, 1);
    await eventually('the key to be required', 5000, async () => ((await fetch(`${node.url}/v1/models`)).status === 401 ? true : undefined));
    assert.equal((await fetch(`${node.url}/v1/models`, { headers: { authorization: 'Bearer page-key-1234' } })).status, 200);
    await screenshot(page, 'settings-desktop');

    await page.getByRole('button', { name: 'Remove all keys' }).click();
    await page.locator('[data-api-keys="0"]').waitFor({ timeout: WAIT_MS });
    assert.deepEqual(dash.problems, []);
  });
});
