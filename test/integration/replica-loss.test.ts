// Replicas survive what they exist to survive: a replica node down for longer than the prune time
// leaves the instance while the survivor keeps serving untouched (no reload, no 503), and the
// replica comes back when its node returns. Real node processes over loopback.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { eventually, shoal, status } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { sleep } from '../support/wait.js';

const MODEL = 'shoal/tiny-tools';
/** Placed on beta alone: its only copy is lost with beta. */
const SOLE = 'shoal/tiny-eos';
/** The master's prune time (pruneAfterMs, 30 s) plus the lost-node grace (5 s) and some slack. */
const DOWN_FOR_MS = 45_000;

async function post(node: TestNode, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function chat(node: TestNode, model = MODEL): Promise<number> {
  return (await post(node, '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, temperature: 0 })).status;
}

/** This node's own runner of `instanceId` as /healthz reports it. */
async function localRunner(node: TestNode, instanceId: string): Promise<{ pid: number | null; restarts: number; state: string } | undefined> {
  const health = (await (await fetch(`${node.url}/healthz`)).json()) as { models: { instanceId: string; pid: number | null; restarts: number; state: string }[] };
  return health.models.find((m) => m.instanceId === instanceId);
}

async function placementsOf(node: TestNode, instanceId: string): Promise<string[] | undefined> {
  return (await status(node)).instances.find((i) => i.instanceId === instanceId)?.placements.map((p) => p.nodeId);
}

test('a lost replica leaves the instance while the survivor serves untouched; it and a lost sole copy come back with their node', async () => {
  const bDir = await mkdtemp(join(tmpdir(), 'shoal-replica-'));
  await using a = await startTestNode({ args: ['--name', 'alpha'] });
  let b = await startTestNode({ args: ['--name', 'beta'], dataDir: bDir });
  try {
    const code = /shoal1-\S+/.exec((await shoal(a, 'invite', '--code')).stdout)?.[0];
    assert.ok(code);
    assert.equal((await shoal(b, 'join', code)).code, 0);
    const [aId, bId] = [(await status(a)).nodeId, (await status(b)).nodeId];
    await eventually('resources from both nodes', 15_000, async () => (Object.keys((await status(a)).resources).length === 2 ? true : undefined));
    const placed = await post(a, '/place_instance', { model: MODEL, replicas: 2 });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const instanceId = (placed.body.instance as { instanceId: string }).instanceId;
    await eventually('both replicas ready', 30_000, async () => {
      const instance = (await status(a)).instances.find((i) => i.instanceId === instanceId);
      return instance?.runners.filter((r) => r.state === 'ready').length === 2 ? true : undefined;
    });
    const before = await localRunner(a, instanceId);
    assert.equal(before?.state, 'ready');
    const sole = await post(a, '/place_instance', { model: SOLE, exclude: [aId] });
    assert.equal(sole.status, 201, JSON.stringify(sole.body));
    const soleId = (sole.body.instance as { instanceId: string }).instanceId;
    await eventually('the sole copy serving', 30_000, async () => ((await chat(a, SOLE)) === 200 ? true : undefined));

    await b.stop('SIGKILL');
    // Longer than the prune time: every request meanwhile is served by the survivor.
    const statuses = new Map<number, number>();
    const downUntil = Date.now() + DOWN_FOR_MS;
    while (Date.now() < downUntil) {
      const answered = await chat(a);
      statuses.set(answered, (statuses.get(answered) ?? 0) + 1);
      await sleep(250);
    }
    assert.deepEqual([...statuses.keys()], [200], `every request while beta was down: ${JSON.stringify([...statuses])}`);
    // Nothing else can hold the sole copy (alpha is excluded): it keeps its place and says so, not 404.
    assert.equal(await chat(a, SOLE), 503);
    assert.deepEqual(await placementsOf(a, soleId), [bId], 'the sole copy waits for its node instead of ending');
    assert.deepEqual(await placementsOf(a, instanceId), [aId], 'the lost replica left the instance; the instance is the same one');
    const after = await localRunner(a, instanceId);
    assert.deepEqual({ pid: after?.pid, restarts: after?.restarts, state: after?.state }, { pid: before.pid, restarts: before.restarts, state: 'ready' }, 'the survivor was never reloaded');

    // beta returns: the instance is brought back to two replicas on it.
    b = await startTestNode({ args: ['--name', 'beta'], dataDir: bDir });
    await eventually('the replica re-added on beta', 40_000, async () => {
      const placements = await placementsOf(a, instanceId);
      return placements?.length === 2 && placements.includes(bId) ? true : undefined;
    });
    await eventually('beta serving its replica', 30_000, async () => ((await localRunner(b, instanceId))?.state === 'ready' ? true : undefined));
    assert.equal(await chat(b), 200);
    await eventually('the sole copy serving again', 30_000, async () => ((await chat(a, SOLE)) === 200 ? true : undefined));
    const survivor = await localRunner(a, instanceId);
    assert.equal(survivor?.pid, before.pid, 'adding the replica back did not touch the survivor either');
  } finally {
    await b.stop();
    await rm(bDir, { recursive: true, force: true });
  }
});
