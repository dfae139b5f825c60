// The recovery the damaged-log message names, followed to the letter on a real two-node cluster:
// the node refuses to start on a log damaged in the middle, the log is moved aside, the node starts
// standalone with its identity, joins with a fresh code and is the same member again, caught up.
import assert from 'node:assert/strict';
import { mkdtemp, open, readdir, rename, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { eventually, shoal, status } from '../support/cli.js';
import { startTestNode } from '../support/node-process.js';

function joinCodeOf(stdout: string): string {
  const code = /shoal1-\S+/.exec(stdout)?.[0];
  assert.ok(code, `no join code in: ${stdout}`);
  return code;
}

/** Flips one byte a quarter of the way into the first log segment: damage before the last frame. */
async function damageLog(logDir: string): Promise<void> {
  const segment = (await readdir(logDir)).filter((name) => name.endsWith('.seg')).sort()[0];
  assert.ok(segment !== undefined, `a log segment in ${logDir}`);
  const path = join(logDir, segment);
  const size = (await stat(path)).size;
  const handle = await open(path, 'r+');
  try {
    const at = Math.floor(size / 4);
    const byte = Buffer.alloc(1);
    await handle.read(byte, 0, 1, at);
    byte[0] = byte[0]! ^ 0xff;
    await handle.write(byte, 0, 1, at);
  } finally {
    await handle.close();
  }
}

test('a node whose log was damaged mid-file follows its error message back into the cluster', async () => {
  await using a = await startTestNode({ args: ['--name', 'alpha'] });
  const bDir = await mkdtemp(join(tmpdir(), 'shoal-recover-'));
  let b = await startTestNode({ args: ['--name', 'beta'], dataDir: bDir });
  try {
    assert.equal((await shoal(b, 'join', joinCodeOf((await shoal(a, 'invite', '--code')).stdout))).code, 0);
    assert.equal((await shoal(a, 'nickname', 'alpha', 'mainland')).code, 0);
    for (let i = 0; i < 8; i++) assert.equal((await shoal(a, 'nickname', 'beta', `b-${i}`)).code, 0);
    const before = await eventually('beta to have every change', 15_000, async () => {
      const s = await status(b);
      return s.members.find((m) => m.name === 'beta')?.nickname === 'b-7' ? s : undefined;
    });
    await b.stop();

    await damageLog(join(bDir, 'log'));
    const refused = await startTestNode({ args: ['--name', 'beta'], dataDir: bDir, waitReady: false });
    const exit = await refused.exited;
    assert.equal(exit.code, 1, refused.output());
    assert.match(refused.output(), /is corrupt at byte/);
    assert.match(refused.output(), /shoal join/, 'the message names the way back into the cluster');

    // What the message says: move the log aside, start again, join with a code from a member.
    await rename(join(bDir, 'log'), join(bDir, 'log.corrupt'));
    b = await startTestNode({ args: ['--name', 'beta'], dataDir: bDir });
    const alone = await status(b);
    assert.equal(alone.role, 'standalone');
    assert.equal(alone.nodeId, before.nodeId, 'same identity');
    const joined = await shoal(b, 'join', joinCodeOf((await shoal(a, 'invite', '--code')).stdout));
    assert.equal(joined.code, 0, joined.stderr);
    await eventually('both nodes to agree again', 20_000, async () => {
      const [sa, sb] = await Promise.all([status(a), status(b)]);
      const ok = sb.role === 'member' && sb.stateHash === sa.stateHash && sb.members.length === 2 && sb.masterId === sa.masterId;
      return ok ? true : undefined;
    });
    const after = await status(b);
    assert.equal(after.members.find((m) => m.name === 'alpha')?.nickname, 'mainland', 'caught up with what was decided before');
    assert.equal(after.members.find((m) => m.nodeId === before.nodeId)?.nickname, 'b-7', 'the same member, not a new one');
    assert.equal(after.members.length, 2);
  } finally {
    await b.stop();
  }
});
