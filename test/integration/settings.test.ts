import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { readRunFiles } from '../../src/node/run-files.js';
import { eventually, shoal, status } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Settings in one place, with real node processes: shoal.toml and its precedence, the admin token
 * across restarts and its rotation, and cluster settings set on one member and applied on another.
 */

async function models(node: TestNode, key?: string): Promise<number> {
  const res = await fetch(`${node.url}/v1/models`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  await res.body?.cancel();
  return res.status;
}

/** GET /state as a page on another origin would send it, with `token` as the only proof: raw HTTP, since fetch will not forge Origin. */
function stateWithToken(node: TestNode, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: node.port, path: '/state', headers: { origin: 'http://evil.example', authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('shoal.toml in the data dir', { timeout: 180_000 }, () => {
  let dataDir: string;
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'shoal-toml-'));
  });
  after(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  test("its options take effect; a flag overrides it (the test harness's --api-port over the file's), the environment too", async () => {
    await writeFile(join(dataDir, 'shoal.toml'), ['name = "from-file"', 'api-key = ["file-key-1234"]', 'api-port = 1', ''].join('\n'));
    {
      await using node = await startTestNode({ dataDir });
      assert.equal((await status(node)).name, 'from-file');
      assert.equal(await models(node), 401, 'the key from the file is required');
      assert.equal(await models(node, 'file-key-1234'), 200);
    }
    {
      await using node = await startTestNode({ dataDir, args: ['--name', 'from-flag'], env: { SHOAL_API_KEYS: 'env-key-5678' } });
      assert.equal((await status(node)).name, 'from-flag', 'a flag wins over the file');
      assert.equal(await models(node, 'env-key-5678'), 200, 'the environment wins over the file');
      assert.equal(await models(node, 'file-key-1234'), 401);
    }
  });

  test('an unknown key stops the start with the key and the nearest known one', async () => {
    await writeFile(join(dataDir, 'shoal.toml'), 'api-prot = 8080\n');
    const node = await startTestNode({ dataDir, waitReady: false });
    const { code } = await node.exited;
    assert.equal(code, 2, node.output());
    assert.match(node.output(), /unknown key 'api-prot'; did you mean 'api-port'\?/);
  });
});

describe('the admin token', { timeout: 180_000 }, () => {
  let dataDir: string;
  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'shoal-token-'));
  });
  after(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  test('survives a restart, is private to its user, and `shoal token --rotate` replaces it at once', async () => {
    let first: string;
    {
      await using node = await startTestNode({ dataDir });
      first = (await readRunFiles(dataDir)).token;
      assert.equal((await shoal(node, 'token')).stdout.trim(), first);
    }
    assert.equal((await stat(join(dataDir, 'admin.token'))).mode & 0o777, 0o600);
    assert.equal((await shoal({ dataDir }, 'token')).stdout.trim(), first, 'a stopped node shows the token it will use');
    await using node = await startTestNode({ dataDir });
    assert.equal((await readRunFiles(dataDir)).token, first, 'the same token after a restart');
    assert.equal(await stateWithToken(node, first), 200, 'and the node takes it');

    const rotated = await shoal(node, 'token', '--rotate');
    assert.equal(rotated.code, 0, rotated.stderr);
    const second = rotated.stdout.trim();
    assert.match(second, /^[0-9a-f]{64}$/);
    assert.notEqual(second, first);
    assert.equal(await stateWithToken(node, first), 403, 'the old token stops working: the page is refused as any other page on a foreign origin');
    assert.equal(await stateWithToken(node, second), 200);
    assert.equal((await readRunFiles(dataDir)).token, second, 'the CLI finds the new one');
  });
});

describe('cluster settings on a two-node cluster', { timeout: 180_000 }, () => {
  let a: TestNode;
  let b: TestNode;
  before(async () => {
    [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'] }), startTestNode({ args: ['--name', 'beta'] })]);
    const invite = await shoal(a, 'invite', '--code');
    const code = /shoal1-\S+/.exec(invite.stdout)?.[0];
    assert.ok(code, invite.stdout + invite.stderr);
    const joined = await shoal(b, 'join', code);
    assert.equal(joined.code, 0, joined.stderr);
    await eventually('both to be members', 15_000, async () => ((await Promise.all([a, b].map(status))).every((s) => s.role === 'member' && s.members.length === 2) ? true : undefined));
  });
  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
  });

  test('`shoal config set` on one member is seen, and applied, on the other', async () => {
    const set = await shoal(a, 'config', 'set', 'cors-origins', 'https://App.Example/,http://localhost:9999');
    assert.equal(set.code, 0, set.stderr);
    assert.match(set.stdout, /cors-origins = http:\/\/localhost:9999, https:\/\/app\.example/);
    await eventually('the origins on beta', 10_000, async () => ((await shoal(b, 'config', 'get', 'cors-origins')).stdout.includes('https://app.example') ? true : undefined));

    assert.equal(await models(a), 200, 'no key yet');
    const keyed = await shoal(b, 'config', 'set', 'api-keys', 'cluster-key-1234');
    assert.equal(keyed.code, 0, keyed.stderr);
    assert.match(keyed.stdout, /api-keys = 1 key/);
    await eventually("alpha to require beta's key", 10_000, async () => ((await models(a)) === 401 ? true : undefined));
    assert.equal(await models(a, 'cluster-key-1234'), 200);
    const s = await status(a);
    assert.equal(s.settings.apiKeyDigests.length, 1);
    assert.ok(!JSON.stringify(s).includes('cluster-key-1234'), 'the key itself is in no state');
    assert.deepEqual(s.settings.corsOrigins, ['http://localhost:9999', 'https://app.example']);
    assert.equal((await shoal(b, 'config', 'set', 'api-keys', 'none')).code, 0);
    await eventually('alpha open again', 10_000, async () => ((await models(a)) === 200 ? true : undefined));
  });

  test('the default slots and context apply to a launch that sets none, on any member', async () => {
    assert.equal((await shoal(a, 'config', 'set', 'default-parallel', '3')).code, 0);
    assert.equal((await shoal(a, 'config', 'set', 'default-context-tokens', '1024')).code, 0);
    const plan = await eventually('a plan with the defaults from beta', 10_000, async () => {
      const res = await fetch(`${b.url}/place_instance`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'shoal/tiny-eos', dry_run: true }) });
      const body = (await res.json()) as { plan?: { parallel: number; contextTokens: number } };
      return body.plan?.parallel === 3 ? body.plan : undefined;
    });
    assert.equal(plan.contextTokens, 1024);
    const res = await fetch(`${b.url}/place_instance`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'shoal/tiny-eos', dry_run: true, parallel: 2 }) });
    assert.equal(((await res.json()) as { plan: { parallel: number } }).plan.parallel, 2, 'the request still wins');
  });

  test('the download approval threshold is stored and shown; bad values are refused with the key named', async () => {
    assert.match((await shoal(b, 'config', 'get', 'download-approval-bytes')).stdout, /4294967296 \(4\.00 GiB\)/);
    assert.equal((await shoal(a, 'config', 'set', 'download-approval-bytes', '1GiB')).code, 0);
    await eventually('the threshold on beta', 10_000, async () => ((await status(b)).settings.downloadApprovalBytes === 2 ** 30 ? true : undefined));
    const typo = await shoal(a, 'config', 'set', 'default-paralel', '2');
    assert.equal(typo.code, 2, 'a usage error');
    assert.match(typo.stderr, /unknown setting 'default-paralel'; did you mean 'default-parallel'\?/);
    const bad = await shoal(a, 'config', 'set', 'cors-origins', 'https://app.example/path');
    assert.equal(bad.code, 2, 'a usage error');
    assert.match(bad.stderr, /not an origin/);
    const notANumber = await shoal(a, 'config', 'set', 'default-parallel', 'many');
    assert.equal(notANumber.code, 2, notANumber.stderr);
    assert.match(notANumber.stderr, /default-parallel must be a positive integer/);
    assert.equal((await shoal(a, 'config', 'get', 'no-such-key')).code, 2);
  });
});

describe('an API open to the network', { timeout: 120_000 }, () => {
  test('a node bound beyond loopback with no API key says so loudly at start, with how to set one; with a key it does not', async () => {
    {
      await using open = await startTestNode({ args: ['--host', '0.0.0.0'] });
      await eventually('the warning', 5000, async () => (open.output().includes('NO API KEY') ? true : undefined));
      assert.match(open.output(), /shoal run --api-key <key>/);
      assert.match(open.output(), /shoal config set api-keys <key>/);
    }
    await using keyed = await startTestNode({ args: ['--host', '0.0.0.0', '--api-key', 'a-key-5678'] });
    await using local = await startTestNode();
    assert.ok(!keyed.output().includes('NO API KEY'), keyed.output());
    assert.ok(!local.output().includes('NO API KEY'), local.output());
  });
});
