import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { extract } from 'tar';
import { decodeJoinCode } from '../../src/membership/join-code.js';
import { readRunFiles } from '../../src/node/run-files.js';
import { shoal } from '../support/cli.js';
import { api } from '../support/control-api.js';
import { CLI_PATH, startTestNode, type TestNode } from '../support/node-process.js';

/**
 * `shoal diagnose` against a real node (tier 3) started with an API key and holding a fresh join code:
 * the archive unpacks with every expected file there and non-empty, and none of the secrets (the admin
 * token, the API key, the join code and its invitation secret) appears in any file, even though the
 * node's own command line, in processes.txt, carries the key.
 */

const FILES = ['node.json', 'state.json', 'logs.txt', 'doctor.json', 'processes.txt', 'fds.txt', 'performance.json', 'versions.json'];
const API_KEY = `sk-diagnose-${randomBytes(12).toString('hex')}`;

let node: TestNode;
let work: string;

before(async () => {
  work = await mkdtemp(join(tmpdir(), 'shoal-diagnose-test-'));
  node = await startTestNode({ args: ['--api-key', API_KEY] });
});

after(async () => {
  await node?.stop();
  await rm(work, { recursive: true, force: true });
});

describe('shoal diagnose', () => {
  test('writes a bundle with every file, and no secret in any of them', async () => {
    const invite = await api<{ code: string }>(node, 'POST', '/cluster/invite-code');
    assert.equal(invite.status, 200, JSON.stringify(invite.body));
    const code = invite.body.code;
    const { secret } = decodeJoinCode(code);
    // A request with the key, so it has passed through the node's request handling and logs.
    const res = await fetch(`${node.url}/v1/completions`, { method: 'POST', headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'shoal/tiny', prompt: 'Hi', max_tokens: 4 }) });
    assert.equal(res.status, 200, await res.text());

    const out = join(work, 'bundle.tar.gz');
    const result = await shoal(node, 'diagnose', '--out', out);
    assert.equal(result.code, 0, result.stderr);
    const size = (await stat(out)).size;
    assert.ok(result.stdout.includes(out), `prints the path: ${result.stdout}`);
    assert.match(result.stdout, /\(\d+(\.\d)? (B|KiB|MiB)\)/, 'prints the size');
    assert.ok(size > 0);

    const unpacked = join(work, 'unpacked');
    await mkdir(unpacked);
    await extract({ file: out, cwd: unpacked });
    const [folder, ...others] = await readdir(unpacked);
    assert.equal(others.length, 0, 'one top folder');
    assert.match(folder!, /^shoal-diagnose-.+-\d{8}T\d{6}Z$/);
    assert.deepEqual((await readdir(join(unpacked, folder!))).sort(), [...FILES].sort());

    const { token } = await readRunFiles(node.dataDir);
    const secrets = { 'admin token': token, 'API key': API_KEY, 'join code': code, 'invitation secret': secret };
    for (const file of FILES) {
      const text = await readFile(join(unpacked, folder!, file), 'utf8');
      assert.ok(text.trim().length > 0, `${file} is not empty`);
      for (const [what, value] of Object.entries(secrets)) assert.ok(!text.includes(value), `${file} holds the ${what}`);
    }
    const processes = await readFile(join(unpacked, folder!, 'processes.txt'), 'utf8');
    assert.match(processes, new RegExp(`^${node.process.pid}\\t`, 'm'), 'the node is in the process tree');
    assert.match(processes, /--api-key \[redacted\]/, 'its command line is there, the key redacted');
    const fds = await readFile(join(unpacked, folder!, 'fds.txt'), 'utf8');
    assert.match(fds, new RegExp(`^# pid ${node.process.pid}: \\d+ open`, 'm'));
    const state = JSON.parse(await readFile(join(unpacked, folder!, 'state.json'), 'utf8')) as { nodeId: string };
    assert.equal(typeof state.nodeId, 'string');
  });

  test('the default file name is the node\'s suggestion, in the current directory', async () => {
    const cwd = join(work, 'cwd');
    await mkdir(cwd);
    const stdout = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [CLI_PATH, 'diagnose', '--data-dir', node.dataDir], { cwd, encoding: 'utf8', timeout: 60_000 }, (error, out) => (error ? reject(error) : resolve(out))),
    );
    const [name, ...rest] = await readdir(cwd);
    assert.equal(rest.length, 0);
    assert.match(name!, /^shoal-diagnose-.+-\d{8}T\d{6}Z\.tar\.gz$/);
    assert.ok(stdout.includes(join(cwd, name!)), stdout);
  });
});
