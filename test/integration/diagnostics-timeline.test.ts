import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { readRunFiles } from '../../src/node/run-files.js';
import { ClusterDiagnostics, NodeDiagnostics, Timeline } from '../../src/wire/diagnostics.js';
import { eventually, shoal, status } from '../support/cli.js';
import { api } from '../support/control-api.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Three real node processes in one cluster on loopback (tier 3): `GET /diagnostics/cluster` reads
 * every member over `/shoal/diagnostics/1` with a clock offset each, and the cluster timeline holds the
 * join moments every node recorded, merged in time order; the routes refuse what a web page could send.
 */

let nodes: TestNode[] = [];
const names = ['alpha', 'beta', 'gamma'];
const ids = new Map<string, string>();

async function get<T>(node: TestNode, path: string, schema: { parse(value: unknown): T }): Promise<T> {
  const res = await fetch(`${node.url}${path}`);
  const text = await res.text();
  assert.equal(res.status, 200, `${path}: ${text}`);
  return schema.parse(JSON.parse(text));
}

/** Raw HTTP, since fetch would not let a test forge an Origin header. */
function call(node: TestNode, path: string, headers: Record<string, string>): Promise<{ status: number; body: { error?: { code: string; message: string } } }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: node.port, method: 'GET', path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: text === '' ? {} : (JSON.parse(text) as { error?: { code: string; message: string } }) }));
    });
    req.on('error', reject);
    req.end();
  });
}

before(async () => {
  nodes = await Promise.all(names.map((name) => startTestNode({ args: ['--name', name] })));
  const [a, ...others] = nodes as [TestNode, ...TestNode[]];
  // One join at a time: each join code is single-use, and a member joins the cluster the last one grew.
  for (const node of others) {
    const code = /shoal1-\S+/.exec((await shoal(a, 'invite', '--code')).stdout)?.[0];
    assert.ok(code, 'a join code');
    const joined = await shoal(node, 'join', code);
    assert.equal(joined.code, 0, joined.stderr);
  }
  await eventually('three members everywhere', 30_000, async () => ((await Promise.all(nodes.map(status))).every((s) => s.members.length === 3) ? true : undefined));
  for (const [i, node] of nodes.entries()) ids.set(names[i]!, (await status(node)).nodeId);
});

after(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
});

describe('diagnostics across three nodes', { timeout: 180_000 }, () => {
  test('GET /diagnostics/node describes this node: build, wire version, its moments and runners', async () => {
    const [a] = nodes as [TestNode];
    const node = await get(a, '/diagnostics/node', NodeDiagnostics);
    assert.equal(node.nodeId, ids.get('alpha'));
    assert.equal(node.name, 'alpha');
    assert.equal(typeof node.version, 'string');
    assert.ok(node.moments.some((m) => m.kind === 'start'), JSON.stringify(node.moments));
    assert.ok(node.moments.some((m) => m.kind === 'master'), 'alpha founded the cluster, so it became its master');
    assert.ok(node.runners.length >= 1, 'the default model runs here');
    assert.equal(typeof node.dataPlane.connections, 'number');
    assert.equal(typeof node.telemetry.queueSent, 'number');
  });

  test('GET /diagnostics/cluster reads every member, each with a clock offset, from any node', async () => {
    for (const viewer of nodes) {
      const cluster = await get(viewer, '/diagnostics/cluster', ClusterDiagnostics);
      assert.equal(cluster.members.length, 3);
      for (const member of cluster.members) {
        assert.equal(member.reachable, true, `${member.name}: ${member.error ?? ''}`);
        assert.equal(typeof member.offsetMs, 'number');
        assert.equal(typeof member.rttMs, 'number');
        assert.equal(member.diagnostics?.nodeId, member.nodeId);
      }
      assert.deepEqual(new Set(cluster.members.map((m) => m.nodeId)), new Set(ids.values()));
      // One checkout runs all three: one build.
      assert.equal(cluster.versionMismatch, null);
    }
  });

  test('the timeline holds the join moments recorded on all three nodes, merged in time order', async () => {
    const [a] = nodes as [TestNode];
    const timeline = await get(a, '/diagnostics/cluster/timeline', Timeline);
    assert.equal(timeline.viewerNodeId, ids.get('alpha'));
    assert.equal(timeline.clocks.length, 3);
    assert.ok(timeline.clocks.every((c) => c.reachable && typeof c.offsetMs === 'number'));
    const joins = timeline.entries.filter((e) => e.kind === 'join');
    for (const name of names) assert.ok(joins.some((e) => e.nodeId === ids.get(name)), `${name} recorded a join: ${JSON.stringify(joins)}`);
    // Alpha saw beta join before gamma.
    const onAlpha = joins.filter((e) => e.nodeId === ids.get('alpha')).map((e) => e.text);
    const beta = onAlpha.findIndex((t) => t.startsWith('beta joined'));
    const gamma = onAlpha.findIndex((t) => t.startsWith('gamma joined'));
    assert.ok(beta !== -1 && gamma > beta, JSON.stringify(onAlpha));
    for (let i = 1; i < timeline.entries.length; i++) assert.ok(timeline.entries[i - 1]!.atMs <= timeline.entries[i]!.atMs, `entry ${i} is out of order`);
    // Runner phases of every node are in it too (each serves its default model).
    assert.ok(timeline.entries.some((e) => e.source === 'runner'));

    const limited = await get(a, '/diagnostics/cluster/timeline?limit=2', Timeline);
    assert.equal(limited.entries.length, 2);
    // Alpha's own entries need no offset, so they are where they were in the first answer.
    const own = timeline.entries.filter((e) => e.nodeId === ids.get('alpha'));
    const cut = own[Math.floor(own.length / 2)]!;
    const since = await get(a, `/diagnostics/cluster/timeline?sinceMs=${cut.atMs}`, Timeline);
    assert.ok(since.entries.every((e) => e.atMs > cut.atMs));
    const ownAfter = (t: Timeline): string[] => t.entries.filter((e) => e.nodeId === ids.get('alpha') && e.atMs > cut.atMs).map((e) => `${e.atMs} ${e.text}`);
    assert.deepEqual(ownAfter(since).slice(0, ownAfter(timeline).length), ownAfter(timeline));
    assert.ok(!since.entries.some((e) => e.nodeId === cut.nodeId && e.atMs === cut.atMs && e.text === cut.text));
    const bad = await fetch(`${a.url}/diagnostics/cluster/timeline?limit=0`);
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { code: string } }).error.code, 'BAD_REQUEST');
  });

  test('the routes refuse a foreign Origin like the other control routes; the admin token passes', async () => {
    const [a] = nodes as [TestNode];
    const host = `127.0.0.1:${a.port}`;
    for (const path of ['/diagnostics/node', '/diagnostics/cluster', '/diagnostics/cluster/timeline']) {
      const refused = await call(a, path, { host, origin: 'http://evil.example' });
      const state = await call(a, '/state', { host, origin: 'http://evil.example' });
      assert.equal(refused.status, 403, `${path}: ${JSON.stringify(refused.body)}`);
      assert.equal(refused.body.error?.code, state.body.error?.code, 'the same error as /state');
      const { token } = await readRunFiles(a.dataDir);
      assert.equal((await call(a, path, { host, origin: 'http://evil.example', authorization: `Bearer ${token}` })).status, 200, path);
    }
  });

  test('a placement decision is a moment of the node that made it, in the timeline', async () => {
    const [a] = nodes as [TestNode];
    await eventually('resources from all three nodes', 30_000, async () => (Object.keys((await status(a)).resources).length === 3 ? true : undefined));
    const placed = await api<{ instance: { instanceId: string } }>(a, 'POST', '/place_instance', { model: 'shoal/tiny-eos' });
    assert.equal(placed.status, 201, JSON.stringify(placed.body));
    const { instanceId } = placed.body.instance;
    const node = await get(a, '/diagnostics/node', NodeDiagnostics);
    const moment = node.moments.find((m) => m.kind === 'placement' && m.data.instanceId === instanceId);
    assert.ok(moment, JSON.stringify(node.moments));
    assert.equal(moment.data.model, 'shoal/tiny-eos');
    assert.equal(moment.data.shape, 'single');
    assert.equal(moment.data.nodeCount, 1);
    const timeline = await get(a, '/diagnostics/cluster/timeline', Timeline);
    assert.ok(timeline.entries.some((e) => e.kind === 'placement' && e.nodeId === ids.get('alpha') && e.localAtMs === moment.atMs));
  });
});
