// `shoal launch` on a real two-node cluster on loopback (tier 3), both nodes pointed at one local hub:
// a model added by its repo and launched by the same short name, a hub repo never added launched in
// one step (added, pulled, placed), an ambiguous name answered with the choices, and a GGUF already
// on disk (`shoal models add ./x.gguf`, `shoal launch ./y.gguf`) listed, served, and copied to the
// member that serves it.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { localRevision } from '../../src/models/cards/card.js';
import { filePathFor, hubStoreRoot } from '../../src/models/store/layout.js';
import type { AddFileResult, ModelListView, ModelView } from '../../src/models/views.js';
import { api, sha256 } from '../support/control-api.js';
import { eventually, shoal, status } from '../support/cli.js';
import { ggufFixture, HubServer } from '../support/hub-server.js';
import { CLI_PATH, startTestNode, type TestNode } from '../support/node-process.js';

const ONE = 'shoal-test/One-GGUF';
const TWO = 'shoal-test/Two-GGUF';
const NEW = 'shoal-test/New-GGUF';
const PULLED = 'shoal-test/Pulled-GGUF';

async function chat(node: TestNode, model: string): Promise<number> {
  const res = await api(node, 'POST', '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, temperature: 0 });
  return res.status;
}

async function readyOn(node: TestNode, instanceId: string): Promise<{ nodeId: string }[]> {
  return eventually(`${instanceId} to be ready`, 60_000, async () => {
    const instance = (await status(node)).instances.find((i) => i.instanceId === instanceId);
    return instance && instance.runners.length > 0 && instance.runners.every((r) => r.state === 'ready') ? instance.runners : undefined;
  });
}

function placedId(stdout: string): string {
  const id = /as (inst-[0-9a-f]+)/.exec(stdout)?.[1];
  assert.ok(id, `no instance in: ${stdout}`);
  return id;
}

/** `shoal models generate`: a random-weight GGUF, as a user would make one. */
async function generate(out: string, seed: number): Promise<string> {
  await promisify(execFile)(process.execPath, [CLI_PATH, 'models', 'generate', '--params', '1M', '--out', out, '--seed', String(seed)]);
  return out;
}

describe('shoal launch: from a model name to a serving model', { timeout: 300_000 }, () => {
  let dir: string;
  let hub: HubServer;
  let a: TestNode;
  let b: TestNode;
  let aId: string;
  let bId: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-launch-'));
    const files = await Promise.all([41, 42, 43, 44, 45].map((seed) => ggufFixture(join(dir, `hub-${seed}.gguf`), { seed })));
    hub = await HubServer.start([
      { repo: ONE, files: [{ path: 'One-Q8_0.gguf', filePath: files[0] }] },
      { repo: TWO, files: [{ path: 'Two-Q4_K_M.gguf', filePath: files[1] }, { path: 'Two-Q8_0.gguf', filePath: files[2] }] },
      { repo: NEW, files: [{ path: 'New-Q4_K_M.gguf', filePath: files[3] }] },
      { repo: PULLED, files: [{ path: 'Pulled-Q8_0.gguf', filePath: files[4] }] },
    ]);
    const env = { SHOAL_HF_ENDPOINT: hub.url, SHOAL_DISK_RESERVE_BYTES: String(1024 * 1024) };
    [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'], env }), startTestNode({ args: ['--name', 'beta'], env })]);
    const code = /shoal1-\S+/.exec((await shoal(a, 'invite', '--code')).stdout)?.[0];
    assert.ok(code);
    const joined = await shoal(b, 'join', code);
    assert.equal(joined.code, 0, joined.stderr);
    aId = (await status(a)).nodeId;
    bId = (await status(b)).nodeId;
    await eventually('resources from both nodes', 20_000, async () => (Object.keys((await status(a)).resources).length === 2 ? true : undefined));
  });

  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
    await hub?.close();
    await rm(dir, { recursive: true, force: true });
  });

  test('add, then launch by the same short name: the only quant is picked, pulled with progress lines and placed', async () => {
    const added = await shoal(a, 'models', 'add', ONE);
    assert.equal(added.code, 0, added.stderr);
    const launched = await shoal(a, 'launch', ONE, '--exclude', 'beta');
    assert.equal(launched.code, 0, `${launched.stdout}\n${launched.stderr}`);
    assert.match(launched.stderr, new RegExp(`${ONE} -> ${ONE}:Q8_0`));
    // Not a terminal: plain progress lines, not a redrawn bar.
    assert.match(launched.stderr, new RegExp(`${ONE}:Q8_0: done 100% \\(`));
    assert.doesNotMatch(launched.stderr, /\r/);
    assert.match(launched.stdout, new RegExp(`Placed ${ONE}:Q8_0 as inst-`));
    const runners = await readyOn(a, placedId(launched.stdout));
    assert.deepEqual(runners.map((r) => r.nodeId), [aId]);
    assert.equal(await chat(a, `${ONE}:Q8_0`), 200);
  });

  test('a hub repo this node never added is added, pulled and placed in one step', async () => {
    const launched = await shoal(a, 'models', 'launch', NEW, '--exclude', 'beta', '--json');
    assert.equal(launched.code, 0, `${launched.stdout}\n${launched.stderr}`);
    const { instance } = JSON.parse(launched.stdout) as { instance: { instanceId: string; modelId: string } };
    assert.equal(instance.modelId, `${NEW}:Q4_K_M`);
    const model = await api<ModelView>(a, 'GET', `/models/${NEW}:Q4_K_M`);
    assert.equal(model.body.state, 'on-disk');
    await readyOn(a, instance.instanceId);
    assert.equal(await chat(a, instance.modelId), 200);
  });

  test('a name that fits several models lists them and places nothing', async () => {
    for (const quant of ['Q4_K_M', 'Q8_0']) assert.equal((await shoal(a, 'models', 'add', `${TWO}:${quant}`)).code, 0);
    const before = (await status(a)).instances.length;
    const launched = await shoal(a, 'launch', TWO);
    assert.equal(launched.code, 1);
    assert.match(launched.stderr, new RegExp(`'${TWO}' names 2 models on this node: ${TWO}:Q4_K_M, ${TWO}:Q8_0`));
    assert.equal((await status(a)).instances.length, before);
    const removed = await shoal(a, 'rm', TWO);
    assert.notEqual(removed.code, 0, 'rm removes nothing it would have to guess');
    assert.match(removed.stderr, new RegExp(`'${TWO}' names 2 models on this node`));
    assert.equal((await api(a, 'GET', `/models/${TWO}:Q8_0`)).status, 200);
  });

  test('pull adds a hub repo this node never added; pull, rm and chat take the short names launch takes', async () => {
    const pulled = await shoal(a, 'pull', PULLED);
    assert.equal(pulled.code, 0, `${pulled.stdout}\n${pulled.stderr}`);
    assert.match(pulled.stdout, new RegExp(`Added ${PULLED}:Q8_0`));
    assert.equal((await api<ModelView>(a, 'GET', `/models/${PULLED}:Q8_0`)).body.state, 'on-disk');
    // owner/name for its one quant.
    const removed = await shoal(a, 'rm', PULLED);
    assert.equal(removed.code, 0, removed.stderr);
    assert.match(removed.stdout, new RegExp(`Removed ${PULLED}:Q8_0`));
    assert.equal((await api(a, 'GET', `/models/${PULLED}:Q8_0`)).status, 404);
    // The name without its owner, as `ollama pull llama3` is typed.
    assert.equal((await shoal(a, 'models', 'add', PULLED)).code, 0);
    const byName = await shoal(a, 'models', 'pull', 'Pulled-GGUF');
    assert.equal(byName.code, 0, byName.stderr);
    assert.equal((await api<ModelView>(a, 'GET', `/models/${PULLED}:Q8_0`)).body.state, 'on-disk');
    assert.equal((await shoal(a, 'models', 'rm', 'pulled-gguf')).code, 0, 'case is forgiven when nothing matches exactly');
    assert.equal((await api(a, 'GET', `/models/${PULLED}:Q8_0`)).status, 404);
    // A name that is no model and no hub repo is refused, and nothing is added.
    const none = await shoal(a, 'pull', 'no-such-model');
    assert.notEqual(none.code, 0);
    assert.match(none.stderr, /no model 'no-such-model' on this node/);
    // chat: ONE is served (placed by the first test) as ONE:Q8_0.
    const child = execFile(process.execPath, [CLI_PATH, 'chat', ONE, '--max-tokens', '4', '--data-dir', a.dataDir], { encoding: 'utf8', timeout: 60_000 });
    child.stdin?.end('hi\n');
    let stderr = '';
    child.stderr?.on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 0, stderr);
  });

  test('models add ./x.gguf: a local card that is listed, launched and serves a chat completion', async () => {
    const file = await generate(join(dir, 'my-model.gguf'), 7);
    // A relative path, as typed in a shell (the CLI resolves it against its own directory).
    const added = await shoal(a, 'models', 'add', `./${relative(process.cwd(), file)}`.replace(/^\.\/\.\.\//, '../'), '--json');
    assert.equal(added.code, 0, added.stderr);
    const result = JSON.parse(added.stdout) as AddFileResult;
    assert.equal(result.card.id, 'local/my-model');
    assert.equal(result.card.source.kind, 'local');
    assert.equal(result.file.stored, 'linked');
    const digest = await sha256(file);
    assert.equal(result.file.sha256, digest);
    // A hard link: the store's file is the user's file, no second copy on the disk.
    const storePath = filePathFor(hubStoreRoot(a.dataDir), 'local/my-model', localRevision(digest), 'my-model.gguf');
    assert.equal((await stat(storePath)).ino, (await stat(file)).ino);

    const ls = await api<ModelListView>(a, 'GET', '/models');
    const listed = ls.body.models.find((m) => m.id === 'local/my-model');
    assert.equal(listed?.state, 'on-disk');
    assert.equal(listed?.facts?.architecture, 'llama');
    assert.match((await shoal(a, 'models', 'ls')).stdout, /local\/my-model\s+on-disk\s+\S+ \S+\s+file \//);

    // Adding the same file again changes nothing.
    const again = JSON.parse((await shoal(a, 'models', 'add', file, '--json')).stdout) as AddFileResult;
    assert.equal(again.created, false);
    assert.equal(again.file.stored, 'present');

    const launched = await shoal(a, 'launch', 'my-model', '--exclude', 'beta');
    assert.equal(launched.code, 0, `${launched.stdout}\n${launched.stderr}`);
    const instanceId = placedId(launched.stdout);
    await readyOn(a, instanceId);
    assert.equal(await chat(a, 'local/my-model'), 200);
    const served = await api<{ data: { id: string }[] }>(a, 'GET', '/v1/models');
    assert.ok(served.body.data.some((m) => m.id === 'local/my-model'), JSON.stringify(served.body));
    assert.equal((await shoal(a, 'models', 'stop', instanceId)).code, 0);

    const notGguf = await shoal(a, 'models', 'add', CLI_PATH);
    assert.equal(notGguf.code, 1);
    assert.match(notGguf.stderr, /is not a GGUF model Shoal can place/);
  });

  test('launch ./y.gguf placed on the other member: it copies the file from this node, verified, and serves it', async () => {
    const file = await generate(join(dir, 'shared-model.gguf'), 8);
    const launched = await shoal(a, 'launch', file, '--exclude', 'alpha');
    assert.equal(launched.code, 0, `${launched.stdout}\n${launched.stderr}`);
    assert.match(launched.stderr, /Added local\/shared-model from .* \(hard-linked into the store, no second copy\)/);
    const runners = await readyOn(a, placedId(launched.stdout)).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n--- beta ---\n${b.output().slice(-6000)}`);
    });
    assert.deepEqual(runners.map((r) => r.nodeId), [bId]);
    const digest = await sha256(file);
    assert.equal(await sha256(filePathFor(hubStoreRoot(b.dataDir), 'local/shared-model', localRevision(digest), 'shared-model.gguf')), digest);
    const copied = b.output().split('\n').filter((line) => line.includes('copying from a member that holds it') && line.includes('local/shared-model'));
    assert.equal(copied.length, 1, b.output().slice(-4000));
    assert.equal(await chat(b, 'local/shared-model'), 200);
    assert.equal(await chat(a, 'local/shared-model'), 200);
    assert.deepEqual(hub.requests.filter((r) => r.repo === 'local/shared-model'), [], 'the hub was never asked');
  });
});
