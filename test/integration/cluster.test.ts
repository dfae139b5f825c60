import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { eventually, shoal, status } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Real node processes on loopback with discovery off (tier 3): join codes, invitations over a
 * bootstrap connection, replication, failover and every membership command, all through the CLI.
 */

function joinCodeOf(stdout: string): string {
  const code = /shoal1-\S+/.exec(stdout)?.[0];
  assert.ok(code, `no join code in: ${stdout}`);
  return code;
}

async function converged(nodes: TestNode[], members: number): Promise<void> {
  await eventually(`${nodes.length} nodes to agree on ${members} members`, 15_000, async () => {
    const all = await Promise.all(nodes.map(status));
    const hashes = new Set(all.map((s) => s.stateHash));
    const masters = new Set(all.map((s) => s.masterId));
    return all.every((s) => s.role === 'member' && s.members.length === members) && hashes.size === 1 && masters.size === 1 && !masters.has(null) ? true : undefined;
  });
}

describe('a three-node cluster on loopback', () => {
  let a: TestNode;
  let b: TestNode;
  let c: TestNode;

  before(async () => {
    [a, b, c] = await Promise.all([startTestNode({ args: ['--name', 'alpha'] }), startTestNode({ args: ['--name', 'beta'] }), startTestNode({ args: ['--name', 'gamma'] })]);
  });
  after(async () => {
    await Promise.all([a, b, c].map((n) => n?.stop()));
  });

  test('a fresh node is standalone with a fingerprint people can compare', async () => {
    const s = await status(a);
    assert.equal(s.role, 'standalone');
    assert.equal(s.clusterId, null);
    assert.match(s.fingerprint, /^[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}$/);
    assert.match(s.nodeId, /^12D3KooW/);
    const text = await shoal(a, 'status');
    assert.equal(text.code, 0);
    assert.match(text.stdout, /standalone/);
  });

  test('join codes bring two more nodes in; every node agrees on one state', async () => {
    const first = await shoal(a, 'invite', '--code');
    assert.equal(first.code, 0, first.stderr);
    const joinedB = await shoal(b, 'join', joinCodeOf(first.stdout));
    assert.equal(joinedB.code, 0, joinedB.stderr);
    const second = await shoal(a, 'invite', '--code');
    const joinedC = await shoal(c, 'join', joinCodeOf(second.stdout));
    assert.equal(joinedC.code, 0, joinedC.stderr);
    await converged([a, b, c], 3);
    const s = await status(c);
    assert.deepEqual(s.members.map((m) => m.name).sort(), ['alpha', 'beta', 'gamma']);
    assert.equal(s.members.filter((m) => m.isMaster).length, 1);
  });

  test('a join code works once', async () => {
    const code = joinCodeOf((await shoal(a, 'invite', '--code')).stdout);
    await using stranger = await startTestNode({ args: ['--name', 'delta'] });
    assert.equal((await shoal(stranger, 'join', code)).code, 0);
    await using thief = await startTestNode({ args: ['--name', 'epsilon'] });
    const again = await shoal(thief, 'join', code);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /refused/);
    assert.equal((await status(thief)).role, 'standalone');
    assert.equal((await shoal(a, 'remove', 'delta')).code, 0);
    await eventually('delta to be standalone again', 10_000, async () => ((await status(stranger)).role === 'standalone' ? true : undefined));
  });

  test('a damaged join code is refused with a clear message', async () => {
    const res = await shoal(b, 'join', 'shoal1-thisisnotacode');
    assert.equal(res.code, 1);
    assert.match(res.stderr, /damaged|not a join code/);
  });

  test('nicknames and host preference replicate; the preferred host becomes master', async () => {
    assert.equal((await shoal(b, 'nickname', 'gamma', 'g3')).code, 0);
    assert.equal((await shoal(a, 'make-host', 'beta')).code, 0);
    const bId = (await status(b)).nodeId;
    await eventually('beta to be master everywhere', 15_000, async () => {
      const all = await Promise.all([a, b, c].map(status));
      return all.every((s) => s.masterId === bId && s.members.some((m) => m.nickname === 'g3')) ? true : undefined;
    });
    await converged([a, b, c], 3);
  });

  test('kill -9 of the master: the others elect a new one, agree, and take commands', async () => {
    const before = await status(a);
    assert.equal(before.masterId, (await status(b)).nodeId, 'beta is the master');
    await b.stop('SIGKILL');
    const rest = [a, c];
    await eventually('a new master', 10_000, async () => {
      const all = await Promise.all(rest.map(status));
      const masters = new Set(all.map((s) => s.masterId));
      return masters.size === 1 && !masters.has(before.masterId) && !masters.has(null) && new Set(all.map((s) => s.stateHash)).size === 1 ? true : undefined;
    });
    const after = await status(c);
    assert.ok(after.term > before.term, 'a higher term');
    assert.equal((await shoal(c, 'nickname', 'alpha', 'first')).code, 0);
    await eventually('the nickname everywhere', 10_000, async () => ((await Promise.all(rest.map(status))).every((s) => s.members.some((m) => m.nickname === 'first')) ? true : undefined));
  });
});

describe('invitations between discovered nodes', () => {
  let a: TestNode;
  let b: TestNode;

  before(async () => {
    a = await startTestNode({ args: ['--name', 'alpha'] });
    const addr = (await status(a)).addrs[0]!;
    // Discovery is off on loopback; a bootstrap address makes the two meet instead.
    b = await startTestNode({ args: ['--name', 'beta', '--bootstrap', addr] });
  });
  after(async () => {
    await Promise.all([a, b].map((n) => n?.stop()));
  });

  test('a non-member sees only name and fingerprint; invite, compare fingerprints, approve', async () => {
    const seen = await eventually('beta on alpha’s network list', 10_000, async () => (await status(a)).discovered.find((d) => d.name === 'beta'));
    const bStatus = await status(b);
    assert.equal(seen.fingerprint, bStatus.fingerprint);
    assert.deepEqual(bStatus.members, [], 'a non-member learns nothing of the roster');
    const invited = await shoal(a, 'invite', 'beta');
    assert.equal(invited.code, 0, invited.stderr);
    const pending = await eventually('the invitation at beta', 5000, async () => (await status(b)).invitations[0]);
    assert.equal(pending.fingerprint, (await status(a)).fingerprint, 'the inviter’s fingerprint is shown for comparison');
    assert.equal(pending.fromName, 'alpha');
    const text = await shoal(b, 'status');
    assert.match(text.stdout, /shoal approve/);
    const approved = await shoal(b, 'approve');
    assert.equal(approved.code, 0, approved.stderr);
    await converged([a, b], 2);
  });

  test('leave makes a node standalone; a trusted cluster’s next invitation is accepted without asking', async () => {
    assert.equal((await shoal(b, 'leave')).code, 0);
    await eventually('beta standalone and gone from alpha', 10_000, async () => {
      const [sa, sb] = await Promise.all([status(a), status(b)]);
      return sb.role === 'standalone' && sa.members.length === 1 ? true : undefined;
    });
    // As an operator would: invite it once it shows on the network list again.
    await eventually('beta back on alpha’s network list', 10_000, async () => (await status(a)).discovered.find((d) => d.name === 'beta'));
    const again = await shoal(a, 'invite', 'beta');
    assert.equal(again.code, 0, again.stderr);
    await converged([a, b], 2);
  });

  test('decline refuses an invitation; dissolve returns everyone to standalone', async () => {
    assert.equal((await shoal(a, 'dissolve')).code, 0);
    await eventually('both standalone', 10_000, async () => ((await Promise.all([a, b].map(status))).every((s) => s.role === 'standalone') ? true : undefined));
    await using c = await startTestNode({ args: ['--name', 'gamma', '--bootstrap', (await status(a)).addrs[0]!] });
    await eventually('gamma discovered', 10_000, async () => (await status(a)).discovered.find((d) => d.name === 'gamma'));
    assert.equal((await shoal(a, 'invite', 'gamma')).code, 0);
    await eventually('the invitation at gamma', 5000, async () => (await status(c)).invitations[0]);
    assert.equal((await shoal(c, 'decline')).code, 0);
    assert.deepEqual((await status(c)).invitations, []);
    assert.equal((await status(c)).role, 'standalone');
    const none = await shoal(c, 'approve');
    assert.equal(none.code, 1);
  });

  test('CLI commands say clearly when no node runs from the data dir', async () => {
    const res = await shoal({ dataDir: '/nonexistent/shoal-data' }, 'status');
    assert.equal(res.code, 1);
    assert.match(res.stderr, /no node is running from \/nonexistent\/shoal-data/);
  });
});
