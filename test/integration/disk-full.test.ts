// A full disk under a running node and at start: typed DISK_FULL refusals, /healthz degraded, nothing
// unpersisted in /state, recovery when space returns, and one clear line when a node cannot start.
// A real tmpfs of a few MiB is the full disk (needs root, as CI runs; skipped with the reason otherwise).
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { startTestNode } from '../support/node-process.js';
import { fillDisk, smallTmpfs } from '../support/tmpfs.js';
import { sleep } from '../support/wait.js';

const disk = smallTmpfs('shoal-diskfull-');

async function post(url: string, body: unknown): Promise<{ status: number; body: { ok?: boolean; error?: { code: string; message: string } } }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { ok?: boolean; error?: { code: string; message: string } } };
}

interface HealthBody {
  ok: boolean;
  status: string;
  degraded: { text: string; remediation: string }[];
}

test('a full disk refuses cluster changes with DISK_FULL, degrades /healthz, shows nothing unpersisted and recovers', async (t) => {
  if (disk.skip !== false) return t.skip(disk.skip);
  const root = disk.path as string;
  await using node = await startTestNode({ dataDir: join(root, 'data') });
  const self = (await (await fetch(`${node.url}/healthz`)).json()) as { name: string };
  assert.equal((await post(`${node.url}/cluster/invite-code`, {})).status, 200, 'founds the cluster');
  const fill = join(root, 'fill');
  await fillDisk(fill);

  let refusal: { status: number; body: { error?: { code: string; message: string } } } | null = null;
  let lastAccepted: string | null = null;
  const statuses: number[] = [];
  for (let i = 0; i < 400 && refusal === null; i++) {
    const nickname = `full-${i}-${'x'.repeat(20)}`;
    const answer = await post(`${node.url}/cluster/nickname`, { node: self.name, nickname });
    statuses.push(answer.status);
    if (answer.status === 200) lastAccepted = nickname;
    else refusal = answer;
  }
  assert.ok(refusal !== null, 'the log filled the disk within 400 changes');
  assert.equal(refusal.status, 507, `refused as Insufficient Storage (statuses: ${statuses.join(',')})`);
  assert.equal(refusal.body.error?.code, 'DISK_FULL');
  assert.match(refusal.body.error?.message ?? '', /free space/);
  // More refusals while full, concurrently: every one typed, none an internal error.
  const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => post(`${node.url}/cluster/nickname`, { node: self.name, nickname: `burst-${i}` })));
  for (const answer of burst) assert.ok(answer.status === 507 || answer.status === 200, `burst answer ${answer.status} ${JSON.stringify(answer.body)}`);

  const health = await fetch(`${node.url}/healthz`);
  assert.equal(health.status, 200, 'still serving inference');
  const healthBody = (await health.json()) as HealthBody;
  assert.equal(healthBody.status, 'degraded');
  assert.match(healthBody.degraded[0]?.remediation ?? '', /free space/);
  const state = (await (await fetch(`${node.url}/state`)).json()) as { members: { name: string; nickname: string | null }[] };
  const shown = state.members.find((m) => m.name === self.name)?.nickname ?? null;
  assert.ok(shown === lastAccepted || (shown?.startsWith('burst-') ?? false), `the nickname shown (${shown}) was persisted (last accepted before the burst: ${lastAccepted})`);
  assert.ok(!(shown?.startsWith(`full-${statuses.length - 1}-`) ?? false), 'the refused change is not in /state');

  await rm(fill);
  let recovered = false;
  for (let i = 0; i < 50 && !recovered; i++) {
    recovered = (await post(`${node.url}/cluster/nickname`, { node: self.name, nickname: 'space-again' })).status === 200;
    if (!recovered) await sleep(200);
  }
  assert.ok(recovered, 'accepted again once space returned');
  assert.equal(((await (await fetch(`${node.url}/healthz`)).json()) as HealthBody).status, 'ok');
});

test('a node started on a full disk exits 1 with one clear line instead of a stack', async (t) => {
  if (disk.skip !== false) return t.skip(disk.skip);
  const root = disk.path as string;
  const fill = join(root, 'fill-start');
  await fillDisk(fill);
  try {
    const node = await startTestNode({ dataDir: join(root, 'fresh'), waitReady: false });
    const exit = await Promise.race([node.exited, new Promise<null>((resolve) => setTimeout(() => resolve(null), 60_000))]);
    if (exit === null) await node.stop('SIGKILL');
    assert.ok(exit !== null, `the node exits by itself:\n${node.output()}`);
    assert.equal(exit.code, 1);
    assert.match(node.output(), /the disk is full \(ENOSPC/);
    assert.doesNotMatch(node.output(), /\n\s+at /, 'no stack trace');
  } finally {
    await rm(fill, { force: true });
  }
});
