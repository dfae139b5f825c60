import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel } from '../../src/models/generate/random-model.js';
import { eventually, shoal, status } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Placement on real node processes over loopback (tier 3): dry runs and typed refusals, placing and
 * stopping instances through the HTTP routes and the CLI, and any-node routing across two nodes.
 */

const MODEL = 'shoal/tiny-eos';

async function post(node: TestNode, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function chat(node: TestNode, model: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return post(node, '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, temperature: 0 });
}

async function readyOn(node: TestNode, instanceId: string, runners: number): Promise<void> {
  await eventually(`${instanceId} to have ${runners} ready runners`, 30_000, async () => {
    const s = await status(node);
    const instance = s.instances.find((i) => i.instanceId === instanceId);
    return instance && instance.runners.filter((r) => r.state === 'ready').length === runners ? true : undefined;
  });
}

function joinCodeOf(stdout: string): string {
  const code = /shoal1-\S+/.exec(stdout)?.[0];
  assert.ok(code, `no join code in: ${stdout}`);
  return code;
}

describe('placement on one node', () => {
  let node: TestNode;
  before(async () => {
    node = await startTestNode({ args: ['--name', 'solo'] });
  });
  after(async () => {
    await node?.stop();
  });

  test('a dry run returns the plan and places nothing', async () => {
    const res = await post(node, '/place_instance', { model: MODEL, dry_run: true });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const plan = res.body.plan as { shape: string; placements: { nodeId: string; role: string }[]; predictedDecodeTokPerS: number | null; speedArithmetic: string[] };
    assert.equal(plan.shape, 'single');
    assert.equal(plan.placements.length, 1);
    assert.equal(plan.placements[0]?.role, 'full');
    // The test node never measured its memory bandwidth: no figure, and the plan says why.
    assert.equal(plan.predictedDecodeTokPerS, null);
    assert.ok(plan.speedArithmetic.some((line) => /not measured its memory bandwidth/.test(line)), plan.speedArithmetic.join('\n'));
    assert.deepEqual((await status(node)).instances, []);
  });

  test('an impossible request is a typed refusal with the planner reason', async () => {
    const replicas = await post(node, '/place_instance?dry_run=1', { model: MODEL, replicas: 3 });
    assert.equal(replicas.status, 409);
    const error = replicas.body.error as { code: string; placement: { code: string } };
    assert.equal(error.code, 'PLACEMENT_FAILED');
    assert.equal(error.placement.code, 'TOPOLOGY_GAP');
    const unknown = await post(node, '/place_instance', { model: 'nobody/nothing', dry_run: true });
    assert.equal(unknown.status, 404);
    const bad = await post(node, '/place_instance', { model: MODEL, replicas: 0 });
    assert.equal(bad.status, 400);
  });

  test('placing serves the model; stopping it takes it away; it can be placed again', async () => {
    assert.equal((await chat(node, MODEL)).status, 404, 'not placed yet');
    const placed = await post(node, '/place_instance', { model: MODEL });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const instanceId = (placed.body.instance as { instanceId: string }).instanceId;
    await readyOn(node, instanceId, 1);
    const answer = await chat(node, MODEL);
    assert.equal(answer.status, 200, JSON.stringify(answer.body));

    const stopped = await fetch(`${node.url}/instance/${instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } });
    assert.equal(stopped.status, 200);
    await eventually('the instance to be gone', 10_000, async () => ((await chat(node, MODEL)).status === 404 ? true : undefined));
    assert.equal((await fetch(`${node.url}/instance/${instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } })).status, 404, 'a second stop is a 404');

    const again = await post(node, '/place_instance', { model: MODEL });
    assert.equal(again.status, 201);
    await readyOn(node, (again.body.instance as { instanceId: string }).instanceId, 1);
    assert.equal((await chat(node, MODEL)).status, 200);
  });

  test('a model whose runner keeps crashing restarts with backoff, then its breaker opens and requests get 503', async () => {
    // A GGUF whose layers and sizes read fine but whose tokenizer llama.cpp does not know: planning works,
    // loading never does.
    const tiny = await readFile(join(node.dataDir, 'models', 'builtin', (await readdir(join(node.dataDir, 'models', 'builtin'))).find((f) => f.startsWith('shoal--tiny-'))!));
    const key = tiny.indexOf('tokenizer.ggml.model');
    const value = tiny.indexOf('llama', key);
    assert.ok(key > 0 && value > key);
    tiny.write('bogus', value);
    const broken = join(node.dataDir, 'broken.gguf');
    await writeFile(broken, tiny);
    await mkdir(join(node.dataDir, 'cards'), { recursive: true });
    await writeFile(
      join(node.dataDir, 'cards', 'broken.toml'),
      ['id = "test/broken"', 'name = "cut short"', 'tasks = ["chat", "completion"]', 'compatible_backends = ["llama_cpp-cpu"]', '', '[source]', 'kind = "file"', `path = "${broken}"`, ''].join('\n'),
    );
    const placed = await post(node, '/place_instance', { model: 'test/broken' });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const instanceId = (placed.body.instance as { instanceId: string }).instanceId;
    const seen = new Set<string>();
    const runner = await eventually('the breaker to open', 90_000, async () => {
      const r = (await status(node)).instances.find((i) => i.instanceId === instanceId)?.runners[0];
      if (r) seen.add(r.state);
      return r?.state === 'failed' ? r : undefined;
    });
    assert.ok(seen.has('restarting') || seen.has('starting'), `it was restarted before giving up (${[...seen].join(', ')})`);
    assert.match(runner.reason ?? '', /gave up after 5 crashes/);
    const res = await chat(node, 'test/broken');
    assert.equal(res.status, 503, JSON.stringify(res.body));
    assert.equal((res.body.error as { code: string }).code, 'model_failed');
    assert.equal((await fetch(`${node.url}/instance/${instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } })).status, 200);
  });

  test('slots default to what fits; the KV cache type and flash attention reach both engines', async () => {
    // 64-wide heads: quantized KV blocks hold 32 values, which the tiny model's 16-wide heads cannot.
    const wide = join(node.dataDir, 'wide.gguf');
    await generateRandomModel({ ...TINY_MODEL_SPEC, name: 'test/wide', embeddingLength: 128, headCount: 2, headCountKv: 1, eosBias: 'natural' }, wide);
    await mkdir(join(node.dataDir, 'cards'), { recursive: true });
    const cardFor = (id: string, backend: string): string =>
      [`id = "${id}"`, 'name = "wide heads"', 'tasks = ["chat", "completion"]', `compatible_backends = ["${backend}"]`, '', '[source]', 'kind = "file"', `path = "${wide}"`, ''].join('\n');
    await writeFile(join(node.dataDir, 'cards', 'wide-cpp.toml'), cardFor('test/wide-cpp', 'llama_cpp-cpu'));
    await writeFile(join(node.dataDir, 'cards', 'wide-server.toml'), cardFor('test/wide-server', 'llama_server-cpu'));

    const dry = await post(node, '/place_instance', { model: 'test/wide-cpp', dry_run: true });
    assert.equal(dry.status, 200, JSON.stringify(dry.body));
    const plan = dry.body.plan as { parallel: number; sizing: { parallel: string }; kvCacheType: string; flashAttention: string };
    assert.equal(plan.parallel, 16);
    assert.equal(plan.sizing.parallel, 'memory fit');
    assert.deepEqual([plan.kvCacheType, plan.flashAttention], ['f16', 'auto']);
    const cli = await shoal(node, 'models', 'launch', 'test/wide-cpp', '--parallel', '3', '--kv-cache-type', 'q4_0', '--flash-attention', 'on', '--dry-run');
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /3 slots \(request\) × 4096 tokens \(default\), KV q4_0, flash attention on/);
    const narrow = await post(node, '/place_instance', { model: MODEL, kv_cache_type: 'q8_0', dry_run: true });
    assert.equal(narrow.status, 409, JSON.stringify(narrow.body));
    assert.match(JSON.stringify(narrow.body), /16 \(K\) and 16 \(V\) wide/);

    for (const model of ['test/wide-cpp', 'test/wide-server']) {
      const placed = await post(node, '/place_instance', { model, parallel: 2, kv_cache_type: 'q8_0', flash_attention: 'on' });
      assert.equal(placed.status, 201, JSON.stringify(placed.body));
      const instance = placed.body.instance as { instanceId: string; parallel: number; kvCacheType: string; flashAttention: string };
      assert.deepEqual([instance.parallel, instance.kvCacheType, instance.flashAttention], [2, 'q8_0', 'on']);
      await readyOn(node, instance.instanceId, 1);
      const answer = await chat(node, model);
      assert.equal(answer.status, 200, `${model}: ${JSON.stringify(answer.body)}`);
      const stopped = await fetch(`${node.url}/instance/${instance.instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': '1' } });
      assert.equal(stopped.status, 200, await stopped.text());
    }
  });

  test('the CLI launches, lists and stops instances', async () => {
    const dry = await shoal(node, 'models', 'launch', 'shoal/tiny-think', '--dry-run');
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /shoal\/tiny-think: single/);
    const launched = await shoal(node, 'models', 'launch', 'shoal/tiny-think');
    assert.equal(launched.code, 0, launched.stderr);
    const instanceId = /as (inst-[0-9a-f]+)/.exec(launched.stdout)?.[1];
    assert.ok(instanceId, launched.stdout);
    await readyOn(node, instanceId, 1);
    const ls = await shoal(node, 'models', 'ls');
    assert.match(ls.stdout, new RegExp(`${instanceId}\\s+shoal/tiny-think\\s+single`));
    const stop = await shoal(node, 'models', 'stop', instanceId);
    assert.equal(stop.code, 0, stop.stderr);
    const missing = await shoal(node, 'models', 'stop', instanceId);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no instance/);
  });
});

describe('any-node routing between two nodes', () => {
  let a: TestNode;
  let b: TestNode;
  let bDir: string;
  before(async () => {
    bDir = await mkdtemp(join(tmpdir(), 'shoal-beta-'));
    [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'] }), startTestNode({ args: ['--name', 'beta'], dataDir: bDir })]);
    const code = joinCodeOf((await shoal(a, 'invite', '--code')).stdout);
    const joined = await shoal(b, 'join', code);
    assert.equal(joined.code, 0, joined.stderr);
  });
  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
    await rm(bDir, { recursive: true, force: true });
  });

  test('an instance placed only on one node answers through the other', async () => {
    const bId = (await status(b)).nodeId;
    const aId = (await status(a)).nodeId;
    // Both nodes report resources before either is excluded.
    await eventually('resources from both nodes', 15_000, async () => (Object.keys((await status(a)).resources).length === 2 ? true : undefined));
    const placed = await post(a, '/place_instance', { model: MODEL, exclude: [aId] });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const instance = placed.body.instance as { instanceId: string; placements: { nodeId: string }[] };
    assert.deepEqual(instance.placements.map((p) => p.nodeId), [bId]);
    await readyOn(a, instance.instanceId, 1);
    await eventually('alpha to route to beta', 10_000, async () => ((await chat(a, MODEL)).status === 200 ? true : undefined));
    const streamed = await fetch(`${a.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, stream: true }),
    });
    assert.equal(streamed.status, 200);
    assert.match(await streamed.text(), /data: \[DONE\]/);
    assert.equal((await fetch(`${a.url}/instance/${instance.instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } })).status, 200);
  });

  test('replicas on both nodes; when one node dies, requests go to the survivor', async () => {
    const placed = await post(a, '/place_instance', { model: 'shoal/tiny-tools', replicas: 2 });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const instanceId = (placed.body.instance as { instanceId: string }).instanceId;
    await readyOn(a, instanceId, 2);
    await readyOn(b, instanceId, 2);
    for (const node of [a, b]) assert.equal((await chat(node, 'shoal/tiny-tools')).status, 200);
    await b.stop('SIGKILL');
    for (let i = 0; i < 4; i++) {
      const res = await chat(a, 'shoal/tiny-tools');
      assert.equal(res.status, 200, `request ${i} after the kill: ${JSON.stringify(res.body)}`);
    }
  });

  test('the killed node restarts from its data dir, rejoins and serves its replica again', async () => {
    b = await startTestNode({ args: ['--name', 'beta'], dataDir: bDir });
    await eventually('beta back as a member with the same state', 30_000, async () => {
      const [sa, sb] = await Promise.all([status(a), status(b)]);
      return sb.role === 'member' && sa.stateHash === sb.stateHash ? true : undefined;
    });
    const instance = (await status(b)).instances.find((i) => i.modelId === 'shoal/tiny-tools');
    assert.ok(instance);
    await readyOn(b, instance.instanceId, 2);
  });
});
