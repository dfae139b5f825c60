import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { findEngine } from '../../src/doctor/engines.js';
import { reapOrphans } from '../../src/worker/engines/orphans.js';
import { eventually, shoal, status } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { generateSplitModel, splitBudgetBytes, SPLIT_MODEL_ID, writeSplitCard } from '../support/split-model.js';

/**
 * A pooled split on loopback (tier 3): a model that fits no budgeted node runs as llama-server on one
 * node with ggml-rpc-server on another, reached through the libp2p RPC tunnel, and answers greedy
 * prompts token for token as the same model on one unconstrained node does.
 */

const engines = (await findEngine('llama-server')) !== null && (await findEngine('ggml-rpc-server')) !== null;
const skip = engines ? false : 'llama-server / ggml-rpc-server are not built (test/integration/engines-build.test.ts builds them)';

async function post(node: TestNode, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function complete(node: TestNode): Promise<string> {
  const res = await post(node, '/v1/completions', { model: SPLIT_MODEL_ID, prompt: 'The quick brown fox', max_tokens: 12, temperature: 0 });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return (res.body.choices as { text: string }[])[0]!.text;
}

type Reader = ReadableStreamDefaultReader<Uint8Array>;
const decoder = new TextDecoder();

/** Reads an SSE body until its first generated text; returns what was read. */
async function firstToken(reader: Reader): Promise<string> {
  let text = '';
  while (!text.includes('"text"')) {
    const { value, done } = await reader.read();
    assert.ok(!done, `the stream ended before its first token: ${text}`);
    text += decoder.decode(value, { stream: true });
  }
  return text;
}

async function rest(reader: Reader): Promise<string> {
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return text;
    text += decoder.decode(value, { stream: true });
  }
}

/** The nodes' warnings and errors, for a failure message. */
function problems(nodes: TestNode[]): string {
  return nodes.map((n) => n.output().split('\n').filter((line) => /"level":(40|50|60)/.test(line)).slice(-15).join('\n')).join('\n---\n');
}

async function placeAndWait(via: TestNode, body: Record<string, unknown>, nodes: TestNode[]): Promise<{ instanceId: string; shape: string; placements: { nodeId: string; role: string }[] }> {
  const placed = await post(via, '/place_instance', { model: SPLIT_MODEL_ID, ...body });
  assert.equal(placed.status, 201, JSON.stringify(placed.body));
  const instance = placed.body.instance as { instanceId: string; shape: string; placements: { nodeId: string; role: string }[] };
  await eventually(`${instance.instanceId} ready`, 120_000, async () => {
    const s = await status(via);
    const view = s.instances.find((i) => i.instanceId === instance.instanceId);
    return view && view.runners.every((r) => r.state === 'ready') ? true : undefined;
  }).catch(async (error: unknown) => {
    if (process.env.SHOAL_TEST_DUMP) await Promise.all(nodes.map((n, i) => writeFile(join(process.env.SHOAL_TEST_DUMP!, `node-${i}.log`), n.output())));
    throw new Error(`${(error as Error).message}\n${problems(nodes)}`);
  });
  return instance;
}

describe('a pooled split over two budgeted nodes', { skip, timeout: 600_000 }, () => {
  let dir: string;
  let free: TestNode;
  let small: TestNode[];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-pooled-'));
    const model = await generateSplitModel(join(dir, 'model'));
    const budget = String(await splitBudgetBytes(model));
    // llama-server repacks weights for this CPU's own kernels (AMX/AVX-512 here) and ggml-rpc-server
    // does not, which rounds differently: token-for-token equality needs the same kernels on both.
    const env = { LLAMA_ARG_REPACK: 'false' };
    free = await startTestNode({ args: ['--name', 'roomy'], env });
    small = await Promise.all(['narrow-1', 'narrow-2', 'narrow-3'].map((name) => startTestNode({ args: ['--name', name, '--memory-budget', budget], env })));
    for (const node of [free, ...small]) await writeSplitCard(node.dataDir, model);
    for (const node of small) {
      const code = /shoal1-\S+/.exec((await shoal(free, 'invite', '--code')).stdout)?.[0];
      assert.ok(code);
      assert.equal((await shoal(node, 'join', code)).code, 0);
    }
    await eventually('resources from all four nodes', 20_000, async () => (Object.keys((await status(free)).resources).length === 4 ? true : undefined));
  });

  after(async () => {
    await Promise.all([free, ...(small ?? [])].map((n) => n?.stop()));
    // A node killed with SIGKILL leaves its engines behind; the next start would reap them, so do it here.
    for (const node of small ?? []) await reapOrphans(node.dataDir, pino({ level: 'silent' }));
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('greedy output of the split equals the single unconstrained copy, token for token', async () => {
    const freeId = (await status(free)).nodeId;
    const smallIds = await Promise.all(small.map(async (n) => (await status(n)).nodeId));

    const preview = await post(free, '/place_instance', { model: SPLIT_MODEL_ID, exclude: [freeId], dry_run: true });
    assert.equal(preview.status, 200, JSON.stringify(preview.body));
    const plan = preview.body.plan as { shape: string; placements: { role: string }[] };
    assert.equal(plan.shape, 'pooled', 'no budgeted node holds it alone');
    assert.deepEqual(plan.placements.map((p) => p.role).sort(), ['donor', 'driver']);

    // Both copies run with the same slots and context: the memory fit would give the unbudgeted single
    // copy more, and a different KV layout may round a near-tie the other way.
    const runtime = { parallel: 1, context_tokens: 1024 };
    const single = await placeAndWait(free, { exclude: smallIds, ...runtime }, [free, ...small]);
    assert.equal(single.shape, 'single');
    const expected = await complete(free);

    // Deleting an instance ends the requests open on it with a typed error, promptly.
    const streaming = await fetch(`${free.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: SPLIT_MODEL_ID, prompt: 'Once upon a time', max_tokens: 400, temperature: 0, stream: true }),
    });
    const reader = streaming.body!.getReader();
    let text = await firstToken(reader);
    assert.equal((await fetch(`${free.url}/instance/${single.instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } })).status, 200);
    const deletedAt = performance.now();
    text += await rest(reader);
    assert.match(text, /"error"/, `the open stream ends with an error: ${text.slice(-300)}`);
    assert.ok(performance.now() - deletedAt < 2000, `it ended ${(performance.now() - deletedAt).toFixed(0)} ms after the delete`);
    await eventually('the single copy gone', 20_000, async () => ((await status(free)).instances.length === 0 ? true : undefined));

    const pooled = await placeAndWait(free, { exclude: [freeId], ...runtime }, [free, ...small]);
    assert.equal(pooled.shape, 'pooled');
    // Asked through the node that holds no part of it: any-node routing to the driver.
    assert.equal(await complete(free), expected);
    for (const node of small) assert.equal(await complete(node), expected);
  });

  test('kill -9 of a donor mid-stream: the stream ends with an error within 2 s, then the model serves again', async () => {
    const before = (await status(free)).instances.find((i) => i.modelId === SPLIT_MODEL_ID);
    assert.ok(before, 'the pooled instance from the previous test');
    const donorId = before.placements.find((p) => p.role === 'donor')!.nodeId;
    const ids = await Promise.all(small.map(async (n) => (await status(n)).nodeId));
    const donor = small[ids.indexOf(donorId)]!;

    const res = await fetch(`${free.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: SPLIT_MODEL_ID, prompt: 'Once upon a time', max_tokens: 400, temperature: 0, stream: true }),
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let text = await firstToken(reader);
    await donor.stop('SIGKILL');
    const killedAt = performance.now();
    text += await rest(reader);
    const endedMs = performance.now() - killedAt;
    assert.ok(!text.includes('"finish_reason":"length"'), 'it did not finish normally');
    assert.match(text, /"error"/, `the stream carries an error event: ${text.slice(-500)}`);
    assert.ok(endedMs < 2000, `the stream ended ${endedMs.toFixed(0)} ms after the kill`);

    const survivors = [free, ...small.filter((n) => n !== donor)];
    await eventually('the model to serve again', 120_000, async () => {
      const res = await post(free, '/v1/completions', { model: SPLIT_MODEL_ID, prompt: 'Hello', max_tokens: 4, temperature: 0 });
      return res.status === 200 ? true : undefined;
    }).catch(async (error: unknown) => {
      if (process.env.SHOAL_TEST_DUMP) await Promise.all(survivors.map((n, i) => writeFile(join(process.env.SHOAL_TEST_DUMP!, `survivor-${i}.log`), n.output())));
      throw new Error(`${(error as Error).message}\n${problems(survivors)}`);
    });
    const after = (await status(free)).instances.find((i) => i.modelId === SPLIT_MODEL_ID);
    assert.ok(after && after.instanceId !== before.instanceId, 're-placed as a new instance');
    assert.ok(!after.placements.some((p) => p.nodeId === donorId), 'without the dead donor');
  });
});
