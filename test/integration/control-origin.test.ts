import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { readRunFiles } from '../../src/node/run-files.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * The control routes against what a web page can send on loopback without the admin token: a
 * rebound `Host`, a foreign `Origin`, a body-less cross-origin POST. Raw HTTP, since fetch would
 * not let a test forge those headers.
 */

let node: TestNode;

before(async () => {
  node = await startTestNode({ env: { SHOAL_ALLOWED_HOSTS: 'shoal.example.test, Proxy.Example.Test.' } });
});

after(async () => {
  await node?.stop();
});

function call(method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; json: { error?: { code: string; message: string } } }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: node.port, method, path, headers, setHost: headers.host === undefined }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, json: text === '' ? {} : (JSON.parse(text) as { error?: { code: string; message: string } }) }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('control routes refuse what a web page could send', { timeout: 120_000 }, () => {
  test("a Host that is not this node's name or address is refused; its own and configured names pass", async () => {
    for (const path of ['/state', '/logs', '/metrics/series', '/models']) {
      const res = await call('GET', path, { host: `rebind.evil.example:${node.port}` });
      assert.equal(res.status, 403, `${path}: ${JSON.stringify(res.json)}`);
      assert.match(res.json.error!.message, /SHOAL_ALLOWED_HOSTS/);
    }
    const code = await call('POST', '/cluster/invite-code', { host: `rebind.evil.example:${node.port}`, 'x-shoal-client': '1' });
    assert.equal(code.status, 403, 'no join code for a rebound page');
    for (const host of [`127.0.0.1:${node.port}`, `localhost:${node.port}`, `[::1]:${node.port}`, 'shoal.example.test', `proxy.example.test:${node.port}`]) {
      assert.equal((await call('GET', '/state', { host })).status, 200, host);
    }
    assert.equal((await call('GET', '/state', { host: '' })).status, 403, 'an empty Host');
  });

  test('a foreign Origin is refused, the node\'s own passes', async () => {
    const host = `127.0.0.1:${node.port}`;
    for (const origin of ['http://evil.example', `http://127.0.0.1:${node.port + 1}`, 'null']) {
      const res = await call('POST', '/cluster/leave', { host, origin, 'content-type': 'application/json' }, '{}');
      assert.equal(res.status, 403, `${origin}: ${JSON.stringify(res.json)}`);
      assert.equal((await call('GET', '/state', { host, origin })).status, 403, origin);
    }
    assert.equal((await call('GET', '/state', { host, origin: `http://${host}` })).status, 200);
  });

  test('state-changing routes need a JSON body or the x-shoal-client header; the admin token passes regardless', async () => {
    const host = `127.0.0.1:${node.port}`;
    for (const path of ['/cluster/leave', '/cluster/dissolve', '/cluster/decline', '/cluster/approve', '/cluster/invite-code']) {
      for (const headers of [{ host }, { host, 'content-type': 'text/plain' }, { host, 'content-type': 'application/x-www-form-urlencoded' }] as Record<string, string>[]) {
        const res = await call('POST', path, headers, headers['content-type'] ? 'a=1' : undefined);
        assert.equal(res.status, 400, `${path} ${JSON.stringify(headers)}: ${JSON.stringify(res.json)}`);
        assert.match(res.json.error!.message, /x-shoal-client/);
      }
    }
    // Still a lone node: none of the above left or dissolved anything.
    const state = await call('GET', '/state', { host });
    assert.equal(state.status, 200);
    const invite = await call('POST', '/cluster/invite-code', { host, 'x-shoal-client': 'test' });
    assert.equal(invite.status, 200, JSON.stringify(invite.json));
    const { token } = await readRunFiles(node.dataDir);
    const withToken = await call('GET', '/state', { host: 'anything.example', origin: 'http://evil.example', authorization: `Bearer ${token}` });
    assert.equal(withToken.status, 200, 'the admin token is proof enough');
  });
});
