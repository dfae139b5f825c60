// Tier 4: real nodes in network namespaces this test creates (root only; skipped with a reason
// otherwise). mDNS runs here, inside the LAN's own namespaces, never in the host namespace.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { StatusView } from '../../src/api/control/control.js';
import { eventually } from '../support/cli.js';
import { lanCli, lanStatus, startLanNode, type LanNode } from '../support/lan-node.js';
import { createLan, killGroup, netnsAvailable, waitForExit, type Lan } from '../support/netns.js';

const available = await netnsAvailable();
const skip = available.ok ? false : `multi-host cluster tests skipped: ${available.reason}`;

type HostNode = LanNode;

let lan: Lan;
let root: string;
const nodes: HostNode[] = [];

const start = (node: HostNode): void => startLanNode(lan, node);

const cli = (node: HostNode, ...args: string[]): ReturnType<typeof lanCli> => lanCli(lan, node, ...args);

const status = (node: HostNode): Promise<StatusView> => lanStatus(lan, node);


async function agree(group: HostNode[], what: string, timeoutMs = 20_000): Promise<StatusView[]> {
  return eventually(what, timeoutMs, async () => {
    const all = await Promise.all(group.map(status));
    const masters = new Set(all.map((s) => s.masterId));
    const hashes = new Set(all.map((s) => s.stateHash));
    return masters.size === 1 && !masters.has(null) && hashes.size === 1 && all.every((s) => s.role === 'member') ? all : undefined;
  });
}

const h1 = (): HostNode => nodes[0]!;
const h2 = (): HostNode => nodes[1]!;
const h3 = (): HostNode => nodes[2]!;
const h4 = (): HostNode => nodes[3]!;

describe('a cluster across network namespaces', { skip, timeout: 300_000 }, () => {
  before(async () => {
    lan = await createLan({ hosts: 4 });
    root = await mkdtemp(join(tmpdir(), 'shoal-multihost-'));
    for (const host of lan.hosts) nodes.push({ host, dataDir: join(root, host.name), process: null, output: null });
    for (const node of nodes) start(node);
    await Promise.all(nodes.map((node) => eventually(`${node.host.name} to answer`, 60_000, async () => ((await cli(node, 'status', '--json')).code === 0 ? true : undefined))));
  });

  after(async () => {
    for (const node of nodes) {
      if (!node.process) continue;
      killGroup(node.process, 'SIGCONT');
      killGroup(node.process, 'SIGTERM');
      await waitForExit(node.process, 6000).catch(() => killGroup(node.process!, 'SIGKILL'));
    }
    await lan?.destroy();
    if (root) await rm(root, { recursive: true, force: true });
  });

  test('mDNS: every node lists the others on its network', async () => {
    for (const node of nodes) {
      await eventually(`${node.host.name} to see the other three`, 15_000, async () => ((await status(node)).discovered.length === 3 ? true : undefined));
    }
  });

  test('invite by name and approve after comparing fingerprints', async () => {
    const h1Print = (await status(h1())).fingerprint;
    for (const invitee of [h2(), h3()]) {
      const invited = await cli(h1(), 'invite', invitee.host.name);
      assert.equal(invited.code, 0, invited.stderr);
      const pending = await eventually(`the invitation at ${invitee.host.name}`, 10_000, async () => (await status(invitee)).invitations[0]);
      assert.equal(pending.fingerprint, h1Print);
      const approved = await cli(invitee, 'approve', pending.id);
      assert.equal(approved.code, 0, approved.stderr);
    }
    const all = await agree([h1(), h2(), h3()], 'three members agreeing');
    assert.equal(all[0]!.members.length, 3);
  });

  test('a non-member learns names and fingerprints only, and cannot use an invitation meant for another node', async () => {
    const outsider = await status(h4());
    assert.equal(outsider.role, 'standalone');
    assert.deepEqual(outsider.members, []);
    const seen = outsider.discovered.map((d) => d.name).sort();
    assert.deepEqual(seen, ['h1', 'h2', 'h3']);
    // Nothing of the cluster reaches it: its state stays empty while the cluster changes.
    assert.equal((await cli(h1(), 'nickname', 'h2', 'second')).code, 0);
    await eventually('the nickname at h3', 10_000, async () => ((await status(h3())).members.some((m) => m.nickname === 'second') ? true : undefined));
    assert.equal((await status(h4())).stateHash, outsider.stateHash);
    const code = /shoal1-\S+/.exec((await cli(h1(), 'invite', '--code')).stdout)![0];
    assert.equal((await cli(h4(), 'join', code)).code, 0, 'a join code is the way in for a node that was given one');
    await agree([h1(), h2(), h3(), h4()], 'four members agreeing');
    assert.equal((await cli(h1(), 'remove', 'h4')).code, 0);
    await eventually('h4 standalone again', 15_000, async () => ((await status(h4())).role === 'standalone' ? true : undefined));
  });

  test('kill -9 of the master: a new master, equal state, and the old one rejoins', async () => {
    const before = await status(h1());
    const master = nodes.find((n) => n.host.name === before.members.find((m) => m.isMaster)!.name)!;
    const rest = [h1(), h2(), h3()].filter((n) => n !== master);
    killGroup(master.process!, 'SIGKILL');
    await waitForExit(master.process!, 5000);
    const after = await agree(rest, 'a new master among the survivors', 20_000);
    assert.notEqual(after[0]!.masterId, before.masterId);
    assert.ok(after[0]!.term > before.term);
    start(master);
    await eventually('the old master back as a member', 60_000, async () => ((await status(master)).role === 'member' ? true : undefined));
    await agree([h1(), h2(), h3()], 'three again after the restart');
  });

  test('a partition heals into one master and one state, keeping writes from both sides', async () => {
    await lan.partition([h1().host], [h2().host, h3().host]);
    // Each side goes on alone; a decision is taken on each.
    await eventually('h1 to lead itself', 20_000, async () => {
      const s = await status(h1());
      return s.masterId === s.nodeId ? true : undefined;
    });
    await agree([h2(), h3()], 'a master on the larger side', 20_000);
    assert.equal((await cli(h1(), 'nickname', 'h1', 'lonely')).code, 0);
    assert.equal((await cli(h2(), 'nickname', 'h3', 'crowded')).code, 0);
    await lan.heal();
    const all = await agree([h1(), h2(), h3()], 'one master and one state after the heal', 60_000);
    const names = all[0]!.members.map((m) => m.nickname);
    assert.ok(names.includes('crowded'), 'the larger side’s write survives');
    assert.ok(names.includes('lonely'), 'the smaller side’s acknowledged write was re-proposed and applied');
  });

  test('control routes need the admin token from another machine; inference routes do not', async () => {
    const probe = (path: string, token: string | null): Promise<{ code: number | null; stdout: string; stderr: string }> =>
      lan.run(h2().host, process.execPath, [
        '-e',
        `fetch(${JSON.stringify(`http://${h1().host.ip}:52600${path}`)}, { headers: ${token ? JSON.stringify({ authorization: `Bearer ${token}` }) : '{}'} }).then((r) => console.log(r.status))`,
      ]);
    assert.equal((await probe('/state', null)).stdout.trim(), '401');
    assert.equal((await probe('/state', 'wrong')).stdout.trim(), '401');
    const token = (await cli(h1(), 'token')).stdout.trim();
    assert.equal((await probe('/state', token)).stdout.trim(), '200');
    assert.equal((await probe('/v1/models', null)).stdout.trim(), '200');
  });

  test('a node that stops drops off the others’ network list within 10 s', async () => {
    const gone = h4();
    killGroup(gone.process!, 'SIGTERM');
    await waitForExit(gone.process!, 10_000);
    gone.process = null;
    const started = Date.now();
    await eventually('h4 gone from h1’s list', 10_000, async () => ((await status(h1())).discovered.some((d) => d.name === 'h4') ? undefined : true));
    assert.ok(Date.now() - started <= 10_000);
  });

  test('SIGSTOP for 5 s is not pruned; for 40 s it is, and it comes back after SIGCONT', async () => {
    const target = h3();
    const health = async (): Promise<string | undefined> => (await status(h1())).members.find((m) => m.name === target.host.name)?.health.level;
    killGroup(target.process!, 'SIGSTOP');
    await new Promise((r) => setTimeout(r, 5000));
    assert.notEqual(await health(), 'pruned');
    killGroup(target.process!, 'SIGCONT');
    await eventually('h3 healthy again', 15_000, async () => ((await health()) === 'ok' ? true : undefined));
    killGroup(target.process!, 'SIGSTOP');
    await eventually('h3 pruned', 45_000, async () => ((await health()) === 'pruned' ? true : undefined));
    killGroup(target.process!, 'SIGCONT');
    await eventually('h3 back after SIGCONT', 30_000, async () => ((await health()) === 'ok' ? true : undefined));
    await agree([h1(), h2(), h3()], 'all three agreeing again');
  });
});
