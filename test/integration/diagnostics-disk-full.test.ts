// A full disk under a running node is one `disk-full` moment in its flight recorder, however many
// writes it refuses. A real tmpfs of a few MiB is the full disk (needs root, as CI runs; skipped with
// the reason otherwise), as in disk-full.test.ts.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { NodeDiagnostics } from '../../src/wire/diagnostics.js';
import { startTestNode } from '../support/node-process.js';
import { fillDisk, smallTmpfs } from '../support/tmpfs.js';

const disk = smallTmpfs('shoal-diag-diskfull-');

async function nickname(url: string, node: string, value: string): Promise<number> {
  const res = await fetch(`${url}/cluster/nickname`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ node, nickname: value }) });
  await res.arrayBuffer();
  return res.status;
}

test('a full disk is one disk-full moment however many writes it refuses', { timeout: 180_000 }, async (t) => {
  if (disk.skip !== false) return t.skip(disk.skip);
  const root = disk.path as string;
  await using node = await startTestNode({ dataDir: join(root, 'data') });
  const self = (await (await fetch(`${node.url}/healthz`)).json()) as { name: string };
  const founded = await fetch(`${node.url}/cluster/invite-code`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  assert.equal(founded.status, 200, 'founds the cluster');
  await fillDisk(join(root, 'fill'));
  let refused = 0;
  for (let i = 0; i < 400 && refused < 5; i++) if ((await nickname(node.url, self.name, `full-${i}-${'x'.repeat(20)}`)) === 507) refused += 1;
  assert.equal(refused, 5, 'the log filled the disk and kept refusing');
  const diagnostics = NodeDiagnostics.parse(await (await fetch(`${node.url}/diagnostics/node`)).json());
  const full = diagnostics.moments.filter((m) => m.kind === 'disk-full');
  assert.equal(full.length, 1, JSON.stringify(full));
  assert.match(full[0]!.text, /cannot be persisted: the disk is full \(ENOSPC, during append\)/);
  assert.deepEqual(full[0]!.data, { code: 'ENOSPC', during: 'append' });
});
