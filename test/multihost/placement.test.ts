// Tier 4: placement across real nodes in network namespaces (root only; skipped with a reason
// otherwise). Replicas answered through every node, a pooled split over budgeted nodes equal token for
// token to one unconstrained copy, and kill -9 of a donor and of a replica's node.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import type { StatusView } from '../../src/api/control/control.js';
import { findEngine } from '../../src/doctor/engines.js';
import { reapOrphans } from '../../src/worker/engines/orphans.js';
import { eventually } from '../support/cli.js';
import { lanCli, lanStatus, startLanNode, type LanNode } from '../support/lan-node.js';
import { captureOutput, createLan, killGroup, netnsAvailable, waitForExit, type Lan } from '../support/netns.js';
import { generateSplitModel, splitBudgetBytes, SPLIT_MODEL_ID, writeSplitCard } from '../support/split-model.js';

const available = await netnsAvailable();
const engines = (await findEngine('llama-server')) !== null && (await findEngine('ggml-rpc-server')) !== null;
const skip = !available.ok
  ? `multi-host placement tests skipped: ${available.reason}`
  : !engines
    ? 'multi-host placement tests skipped: llama-server / ggml-rpc-server are not built (test/integration/engines-build.test.ts builds them)'
    : false;

type HostNode = LanNode;

let lan: Lan;
let root: string;
const nodes: HostNode[] = [];

const start = (node: HostNode): void => startLanNode(lan, node);

async function kill(node: HostNode): Promise<void> {
  killGroup(node.process!, 'SIGKILL');
  await waitForExit(node.process!, 5000);
  node.process = null;
}

const cli = (node: HostNode, ...args: string[]): ReturnType<typeof lanCli> => lanCli(lan, node, ...args);

const status = (node: HostNode): Promise<StatusView> => lanStatus(lan, node);

/** An HTTP call to a node's API from its own namespace (loopback: control routes need no token). */
async function call(from: HostNode, path: string, body?: unknown): Promise<{ status: number; body: string }> {
  const script = `fetch(${JSON.stringify(`http://127.0.0.1:52600${path}`)}, ${JSON.stringify(
    body === undefined ? {} : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
  )}).then(async (r) => console.log(JSON.stringify({ status: r.status, body: await r.text() })))`;
  const res = await lan.run(from.host, process.execPath, ['-e', script], { timeoutMs: 60_000 });
  if (res.code !== 0) throw new Error(`request from ${from.host.name} failed: ${res.stderr}`);
  return JSON.parse(res.stdout) as { status: number; body: string };
}


async function place(via: HostNode, body: Record<string, unknown>): Promise<{ instanceId: string; shape: string; placements: { nodeId: string; role: string }[] }> {
  const res = await call(via, '/place_instance', body);
  assert.equal(res.status, 201, res.body);
  const instance = (JSON.parse(res.body) as { instance: { instanceId: string; shape: string; placements: { nodeId: string; role: string }[] } }).instance;
  await eventually(`${instance.instanceId} ready`, 180_000, async () => {
    const view = (await status(via)).instances.find((i) => i.instanceId === instance.instanceId);
    return view && view.runners.every((r) => r.state === 'ready') ? true : undefined;
  });
  return instance;
}

async function complete(from: HostNode, model: string, prompt = 'The quick brown fox'): Promise<{ status: number; text: string; body: string }> {
  const res = await call(from, '/v1/completions', { model, prompt, max_tokens: 12, temperature: 0 });
  const text = res.status === 200 ? (JSON.parse(res.body) as { choices: { text: string }[] }).choices[0]!.text : '';
  return { status: res.status, text, body: res.body };
}

const h = (i: number): HostNode => nodes[i - 1]!;
const byId = async (nodeId: string): Promise<HostNode> => {
  for (const node of nodes) if (node.process && (await status(node)).nodeId === nodeId) return node;
  throw new Error(`no running host has node id ${nodeId}`);
};

describe('placement across network namespaces', { skip, timeout: 900_000 }, () => {
  before(async () => {
    lan = await createLan({ hosts: 4 });
    root = await mkdtemp(join(tmpdir(), 'shoal-multihost-placement-'));
    const model = await generateSplitModel(join(root, 'model'));
    const budget = String(await splitBudgetBytes(model));
    for (const host of lan.hosts) {
      // No weight repacking: llama-server's repacked kernels (AMX/AVX-512) round differently from
      // ggml-rpc-server's, and the split is compared token for token with one full copy.
      const node: HostNode = { host, dataDir: join(root, host.name), args: host.name === 'h1' ? [] : ['--memory-budget', budget], env: { LLAMA_ARG_REPACK: 'false' }, process: null, output: null };
      await writeSplitCard(node.dataDir, model);
      nodes.push(node);
    }
    for (const node of nodes) start(node);
    await Promise.all(nodes.map((node) => eventually(`${node.host.name} to answer`, 60_000, async () => ((await cli(node, 'status', '--json')).code === 0 ? true : undefined))));
    for (const joiner of nodes.slice(1)) {
      const code = /shoal1-\S+/.exec((await cli(h(1), 'invite', '--code')).stdout)?.[0];
      assert.ok(code);
      const joined = await cli(joiner, 'join', code);
      assert.equal(joined.code, 0, joined.stderr);
    }
    await eventually('four members with resources', 30_000, async () => {
      const s = await status(h(1));
      return s.members.length === 4 && Object.keys(s.resources).length === 4 ? true : undefined;
    });
  });

  after(async () => {
    for (const node of nodes) {
      if (!node.process) continue;
      killGroup(node.process, 'SIGTERM');
      await waitForExit(node.process, 6000).catch(() => killGroup(node.process!, 'SIGKILL'));
    }
    // Nodes killed with SIGKILL leave their engines behind.
    for (const node of nodes) await reapOrphans(node.dataDir, pino({ level: 'silent' })).catch(() => undefined);
    await lan?.destroy();
    if (root) await rm(root, { recursive: true, force: true });
  });

  test('replicas of a model answer through every node; a replica’s node down past the prune time leaves the other serving and a spare takes its place', async () => {
    const instance = await place(h(1), { model: 'shoal/tiny-eos', replicas: 2 });
    assert.equal(instance.shape, 'replicas');
    for (const node of nodes) {
      const res = await complete(node, 'shoal/tiny-eos');
      assert.equal(res.status, 200, `through ${node.host.name}: ${res.body}`);
    }
    const holders = await Promise.all(instance.placements.map((p) => byId(p.nodeId)));
    const victim = holders.find((n) => n !== h(1)) ?? holders[0]!;
    const asker = nodes.find((n) => !holders.includes(n))!;
    await kill(victim);
    // Down past the prune time (30 s) and the lost-node grace (5 s): the survivor answers throughout.
    const downUntil = Date.now() + 45_000;
    for (let i = 0; Date.now() < downUntil; i++) {
      const res = await complete(asker, 'shoal/tiny-eos', `question ${i}`);
      assert.equal(res.status, 200, `request ${i} after the kill, through ${asker.host.name}: ${res.body}`);
    }
    const lostId = instance.placements[holders.indexOf(victim)]!.nodeId;
    const survivorId = instance.placements.find((p) => p.nodeId !== lostId)!.nodeId;
    await eventually('the lost replica replaced on a spare node, the survivor kept', 30_000, async () => {
      const now = (await status(asker)).instances.find((i) => i.instanceId === instance.instanceId);
      const ids = now?.placements.map((p) => p.nodeId) ?? [];
      return ids.length === 2 && ids.includes(survivorId) && !ids.includes(lostId) ? true : undefined;
    });
    start(victim);
    await eventually(`${victim.host.name} back`, 60_000, async () => ((await status(victim)).role === 'member' ? true : undefined)).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n--- ${victim.host.name} output ---\n${victim.output?.all.toString().slice(-3000) ?? ''}`);
    });
    const stopped = await cli(h(1), 'models', 'stop', instance.instanceId);
    assert.equal(stopped.code, 0, stopped.stderr);
  });

  test('a model no budgeted node can hold runs split over two of them, equal token for token to one full copy', async () => {
    const ids = await Promise.all(nodes.map(async (n) => (await status(n)).nodeId));
    const single = await place(h(1), { model: SPLIT_MODEL_ID, exclude: ids.slice(1) });
    assert.equal(single.shape, 'single');
    const expected = await complete(h(1), SPLIT_MODEL_ID);
    assert.equal(expected.status, 200, expected.body);
    assert.equal((await cli(h(1), 'models', 'stop', single.instanceId)).code, 0);
    await eventually('the single copy gone', 30_000, async () => ((await status(h(1))).instances.some((i) => i.instanceId === single.instanceId) ? undefined : true));

    const pooled = await place(h(1), { model: SPLIT_MODEL_ID, exclude: [ids[0]] });
    assert.equal(pooled.shape, 'pooled');
    assert.deepEqual(pooled.placements.map((p) => p.role).sort(), ['donor', 'driver']);
    for (const node of nodes) {
      const got = await complete(node, SPLIT_MODEL_ID);
      assert.equal(got.status, 200, got.body);
      assert.equal(got.text, expected.text, `through ${node.host.name}`);
    }
  });

  test('kill -9 of a donor mid-stream: the client’s stream ends with an error within 2 s, and the model serves again', async () => {
    const pooled = (await status(h(1))).instances.find((i) => i.modelId === SPLIT_MODEL_ID && i.shape === 'pooled');
    assert.ok(pooled, 'the pooled instance of the previous test');
    const donor = await byId(pooled.placements.find((p) => p.role === 'donor')!.nodeId);
    // The client runs in h1's namespace and reports when its stream ended, relative to a file it watches.
    const script = `
      const started = Date.now();
      const res = await fetch('http://127.0.0.1:52600/v1/completions', { method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: ${JSON.stringify(SPLIT_MODEL_ID)}, prompt: 'Once upon a time', max_tokens: 400, temperature: 0, stream: true }) });
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      let text = '';
      let first = false;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
        if (!first && text.includes('"text"')) { first = true; console.log('FIRST'); }
      }
      console.log(JSON.stringify({ endedAt: Date.now(), error: text.includes('"error"'), length: text.includes('"finish_reason":"length"'), ms: Date.now() - started }));
    `;
    const client = lan.execNode(h(1).host, `(async () => {${script}})()`);
    const out = captureOutput(client, 64 * 1024);
    await out.stdout.waitFor('FIRST', 60_000, out.exited);
    const killedAt = Date.now();
    await kill(donor);
    await waitForExit(client, 30_000);
    const result = JSON.parse(out.stdout.toString().trim().split('\n').pop()!) as { endedAt: number; error: boolean; length: boolean };
    assert.equal(result.length, false, 'it did not finish normally');
    assert.equal(result.error, true, `the stream carries an error: ${out.all.toString().slice(-400)}`);
    assert.ok(result.endedAt - killedAt < 2000, `the stream ended ${result.endedAt - killedAt} ms after the kill`);

    const survivors = nodes.filter((n) => n.process !== null);
    await eventually('the model to serve again', 180_000, async () => ((await complete(h(1), SPLIT_MODEL_ID, 'Hello')).status === 200 ? true : undefined));
    const now = (await status(h(1))).instances.find((i) => i.modelId === SPLIT_MODEL_ID);
    assert.ok(now && now.instanceId !== pooled.instanceId, 're-placed as a new instance');
    const donorId = (await Promise.all(survivors.map((n) => status(n)))).map((s) => s.nodeId);
    assert.ok(now.placements.every((p) => donorId.includes(p.nodeId)), 'only on surviving nodes');
  });
});
