import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { sseEvents } from '../../src/cli/logs.js';
import { LogEntry } from '../../src/dashboard/log-ring.js';
import { Sample } from '../../src/metrics/series.js';
import { eventually, shoal, status } from '../support/cli.js';
import { CLI_PATH, startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Real node processes on loopback with discovery off (tier 3): a node's recent log lines through
 * `GET /logs`, `/logs/stream` and `shoal logs` (also following); then a two-node cluster in which node A
 * reads node B's lines and series over the data plane (`/shoal/logs/1`, `/shoal/metrics/1`).
 */

interface LogsAnswer {
  node: { nodeId: string; name: string };
  entries: LogEntry[];
  firstSeq: number;
  lastSeq: number;
  dropped: number;
}

async function logs(node: TestNode, query = ''): Promise<LogsAnswer> {
  const res = await fetch(`${node.url}/logs${query}`);
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as LogsAnswer;
  for (const entry of body.entries) LogEntry.parse(entry);
  return body;
}

/** Reads SSE events from a URL until `done` says so (or the deadline passes). */
async function readEvents(url: string, done: (events: { event: string; data: unknown }[]) => boolean, timeoutMs = 15_000): Promise<{ event: string; data: unknown }[]> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), timeoutMs);
  const events: { event: string; data: unknown }[] = [];
  try {
    const res = await fetch(url, { signal: controller.signal });
    assert.equal(res.status, 200);
    for await (const e of sseEvents(res.body!)) {
      events.push({ event: e.event, data: JSON.parse(e.data) });
      if (done(events)) return events;
    }
  } catch (error) {
    if (!controller.signal.aborted) throw error;
  } finally {
    clearTimeout(timer);
    controller.abort();
  }
  throw new Error(`the stream ended or timed out before the expected events; got ${JSON.stringify(events).slice(0, 2000)}`);
}

let a: TestNode;
let b: TestNode;

before(async () => {
  [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'] }), startTestNode({ args: ['--name', 'beta'] })]);
});
after(async () => {
  await Promise.all([a, b].map((n) => n?.stop()));
});

describe('one node’s logs', () => {
  test('GET /logs pages the node’s own lines, newest last, numbered', async () => {
    const page = await logs(a);
    assert.equal(page.node.name, 'alpha');
    const serving = page.entries.find((e) => /^Shoal node 'alpha' serving on http/.test(e.msg));
    assert.ok(serving, `the start line is there: ${JSON.stringify(page.entries.map((e) => e.msg))}`);
    assert.equal(serving.level, 'info');
    assert.ok(page.entries.every((e, i) => i === 0 || e.seq === page.entries[i - 1]!.seq + 1));
    assert.equal(page.lastSeq, page.entries.at(-1)!.seq);
    const tail = await logs(a, '?limit=1');
    assert.deepEqual(tail.entries.map((e) => e.seq), [page.lastSeq]);
    const after = await logs(a, `?since=${serving.seq}&limit=1`);
    assert.deepEqual(after.entries.map((e) => e.seq), [serving.seq + 1]);
    const bad = await fetch(`${a.url}/logs?limit=0`);
    assert.equal(bad.status, 400);
    const unknown = await fetch(`${a.url}/logs?node=nobody`);
    assert.equal(unknown.status, 404);
  });

  test('shoal logs prints the lines readably, as JSON with --json, and bounded by --lines', async () => {
    const text = await shoal(a, 'logs');
    assert.equal(text.code, 0, text.stderr);
    assert.match(text.stdout, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} INFO {2}Shoal node 'alpha' serving on http:\S+ url=/m);
    // Whichever engine serves the default model (llama-server where it is built, else the runner child).
    assert.match(text.stdout, /INFO {2}\[worker\] (runner|llama-server) ready/);
    const json = await shoal(a, 'logs', '--json', '--lines', '2');
    assert.equal(json.code, 0, json.stderr);
    const lines = json.stdout.trim().split('\n');
    assert.equal(lines.length, 2);
    for (const line of lines) LogEntry.parse(JSON.parse(line));
    const wrong = await shoal(a, 'logs', '--lines', '0');
    assert.equal(wrong.code, 2);
  });

  test('shoal logs --follow prints new lines as they are logged, until Ctrl-C', async () => {
    const follower = spawn(process.execPath, [CLI_PATH, 'logs', '--follow', '--lines', '1', '--data-dir', a.dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    follower.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    const exited = new Promise<number | null>((resolve) => follower.once('exit', (code) => resolve(code)));
    try {
      await eventually('the tail line', 10_000, async () => (out.split('\n').length >= 2 ? true : undefined));
      // Founding a cluster (for the join code below) logs a line.
      const invite = await shoal(a, 'invite', '--code');
      assert.equal(invite.code, 0, invite.stderr);
      await eventually('the new line in the follower', 10_000, async () => (/founded a cluster/.test(out) ? true : undefined));
    } finally {
      follower.kill('SIGINT');
    }
    assert.equal(await exited, 0);
  });

  test('/logs/stream sends the tail, then the node stays streaming', async () => {
    const events = await readEvents(`${a.url}/logs/stream`, (seen) => seen.some((e) => e.event === 'log' && /founded a cluster/.test((e.data as LogEntry).msg)));
    assert.deepEqual(events[0], { event: 'node', data: { nodeId: (await status(a)).nodeId, name: 'alpha' } });
  });
});

describe('a two-node cluster: A reads B’s logs and metrics', () => {
  let bId: string;

  before(async () => {
    const code = /shoal1-\S+/.exec((await shoal(a, 'invite', '--code')).stdout)?.[0];
    assert.ok(code);
    const joined = await shoal(b, 'join', code);
    assert.equal(joined.code, 0, joined.stderr);
    bId = (await status(b)).nodeId;
    await eventually('both members everywhere', 15_000, async () => ((await Promise.all([a, b].map(status))).every((s) => s.members.length === 2) ? true : undefined));
  });

  test('GET /logs?node= reads a member’s lines, by id or name', async () => {
    for (const selector of [bId, 'beta']) {
      const page = await logs(a, `?node=${encodeURIComponent(selector)}`);
      assert.deepEqual(page.node, { nodeId: bId, name: 'beta' });
      assert.ok(page.entries.some((e) => /^Shoal node 'beta' serving on/.test(e.msg)), selector);
      assert.ok(!page.entries.some((e) => /^Shoal node 'alpha'/.test(e.msg)), 'B’s lines, not A’s');
    }
  });

  test('GET /logs?node=&history= reads a member’s log file over the data plane', async () => {
    const res = await fetch(`${a.url}/logs?node=beta&history=1000`);
    assert.equal(res.status, 200, await res.clone().text());
    const body = (await res.json()) as { node: { nodeId: string }; entries: { msg: string }[]; lastSeq: number };
    assert.equal(body.node.nodeId, bId);
    assert.ok(body.entries.some((e) => /^Shoal node 'beta' serving on/.test(e.msg)));
    assert.ok(!body.entries.some((e) => /^Shoal node 'alpha'/.test(e.msg)), 'B’s file, not A’s');
    assert.ok(body.lastSeq > 0);
  });

  test('shoal logs <member> prints the member’s lines', async () => {
    const res = await shoal(a, 'logs', 'beta');
    assert.equal(res.code, 0, res.stderr);
    assert.match(res.stdout, /Shoal node 'beta' serving on/);
    const missing = await shoal(a, 'logs', 'gamma');
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no member is called 'gamma'/);
  });

  test('/logs/stream follows a member from a sequence number', async () => {
    const page = await logs(a, '?node=beta');
    const from = page.lastSeq - 2;
    const events = await readEvents(`${a.url}/logs/stream?node=beta&since=${from}`, (seen) => seen.filter((e) => e.event === 'log').length >= 2);
    assert.deepEqual(events[0]!.data, { nodeId: bId, name: 'beta' });
    assert.deepEqual(events.filter((e) => e.event === 'log').slice(0, 2).map((e) => (e.data as LogEntry).seq), [from + 1, from + 2]);
  });

  test('the cluster series sums both nodes; a member’s series comes over the data plane', async () => {
    const all = await eventually('a cluster sum with both nodes in it', 20_000, async () => {
      const body = (await (await fetch(`${a.url}/metrics/series?node=all`)).json()) as { samples: Sample[]; nodes: { nodeId: string; ok: boolean }[] };
      return body.nodes.length === 2 && body.nodes.every((n) => n.ok) && body.samples.some((s) => s.nodes === 2) ? body : undefined;
    });
    assert.ok(all.nodes.some((n) => n.nodeId === bId));
    const both = all.samples.filter((s) => s.nodes === 2).at(-1)!;
    Sample.parse(both);
    assert.ok(both.cpu.cores >= 2 && both.memory.totalBytes > 0);
    const remote = (await (await fetch(`${a.url}/metrics/series?node=beta`)).json()) as { node: string; samples: Sample[] };
    assert.equal(remote.node, bId);
    assert.ok(remote.samples.length > 0);
    const direct = (await (await fetch(`${b.url}/metrics/series`)).json()) as { samples: Sample[] };
    const shared = remote.samples.at(-1)!;
    assert.deepEqual(direct.samples.find((s) => s.seq === shared.seq), shared, 'the same sample, fetched or read at home');
  });

  test('/events pushes the member’s newest sample and the cluster sum', async () => {
    const events = await readEvents(`${a.url}/events`, (seen) => {
      const ids = new Set(seen.filter((e) => e.event === 'metrics').map((e) => (e.data as { nodeId: string }).nodeId));
      return ids.has(bId) && ids.has('all');
    });
    for (const e of events.filter((x) => x.event === 'metrics')) Sample.parse((e.data as { sample: unknown }).sample);
    const all = events.find((e) => e.event === 'metrics' && (e.data as { nodeId: string }).nodeId === 'all')!.data as { sample: Sample };
    assert.equal(all.sample.nodes, 2);
  });
});
