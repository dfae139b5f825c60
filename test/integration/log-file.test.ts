import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { LogEntry } from '../../src/dashboard/log-ring.js';
import { HistoryEntry } from '../../src/dashboard/logs.js';
import { shoal } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * A real node process (tier 3) keeps its log in <data-dir>/logs/shoal.log: `GET /logs?history=` reads
 * it back consistently with the ring, and `shoal logs` of the stopped node prints its last lines.
 */

let dataDir: string;
let node: TestNode;

before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'shoal-log-file-'));
  node = await startTestNode({ dataDir, args: ['--name', 'logger'] });
});
after(async () => {
  await node?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

const logPath = (): string => join(dataDir, 'logs', 'shoal.log');

test('the node writes its JSON lines to a private file in its data dir', async () => {
  const text = await readFile(logPath(), 'utf8');
  const lines = text.trimEnd().split('\n').map((l) => JSON.parse(l) as { msg: string; level: number });
  assert.ok(lines.some((l) => /^Shoal node 'logger' serving on http/.test(l.msg)), text.slice(0, 2000));
  assert.equal((await stat(logPath())).mode & 0o777, 0o600);
});

test('GET /logs?history= reads the file, and lastSeq lets the stream go on without a gap', async () => {
  const res = await fetch(`${node.url}/logs?history=2000`);
  assert.equal(res.status, 200, await res.clone().text());
  const body = (await res.json()) as { node: { name: string }; entries: HistoryEntry[]; lastSeq: number };
  assert.equal(body.node.name, 'logger');
  for (const entry of body.entries) HistoryEntry.parse(entry);
  const ring = (await (await fetch(`${node.url}/logs?limit=500`)).json()) as { entries: LogEntry[] };
  // Every line the ring had up to lastSeq is the file's too, in the same order, at the end of the history.
  const upTo = ring.entries.filter((e) => e.seq <= body.lastSeq).map(({ seq: _seq, ...rest }) => rest);
  assert.ok(upTo.length > 0);
  assert.deepEqual(body.entries.slice(-upTo.length), upTo);
  assert.equal((await fetch(`${node.url}/logs?history=5&limit=5`)).status, 400);
  assert.equal((await fetch(`${node.url}/logs?history=2001`)).status, 400);
});

test('shoal logs of a stopped node prints the last lines of its file', async () => {
  await node.stop();
  const res = await shoal({ dataDir }, 'logs', '--lines', '3', '--json');
  assert.equal(res.code, 0, res.stderr);
  assert.match(res.stderr, /no node answers from .*: its last 3 log lines, from .*logs/);
  const entries = res.stdout.trimEnd().split('\n').map((l) => HistoryEntry.parse(JSON.parse(l)));
  assert.equal(entries.length, 3);
  const last = (await readFile(logPath(), 'utf8')).trimEnd().split('\n').slice(-3).map((l) => (JSON.parse(l) as { msg: string }).msg);
  assert.deepEqual(entries.map((e) => e.msg), last);
  assert.match(await readFile(logPath(), 'utf8'), /"msg":"stopping"/, 'the lines of the stop reach the file');
  const text = await shoal({ dataDir }, 'logs');
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, /INFO {2}Shoal node 'logger' serving on http/);
  const follow = await shoal({ dataDir }, 'logs', '--follow', '--lines', '1');
  assert.equal(follow.code, 1);
  assert.match(follow.stderr, /nothing to follow/);
  const empty = await mkdtemp(join(tmpdir(), 'shoal-no-log-'));
  try {
    const none = await shoal({ dataDir: empty }, 'logs');
    assert.equal(none.code, 1);
    assert.match(none.stderr, /no node is running from .*and it has no log file yet/);
  } finally {
    await rm(empty, { recursive: true, force: true });
  }
});

test('a crashed node (SIGKILL, its run files left behind) still has its lines printed from the file', async () => {
  const again = await startTestNode({ dataDir, args: ['--name', 'crasher'] });
  // The file lags the node by at most a turn of its event loop: the start line is there soon.
  const deadline = Date.now() + 10_000;
  while (!(await readFile(logPath(), 'utf8')).includes("Shoal node 'crasher' serving") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await again.stop('SIGKILL');
  const res = await shoal({ dataDir }, 'logs', '--lines', '600');
  assert.equal(res.code, 0, res.stderr);
  assert.match(res.stderr, /no node answers from/);
  // Across both starts: more lines than the ring would page, from the current and earlier runs.
  assert.match(res.stdout, /Shoal node 'logger' serving[\s\S]*Shoal node 'crasher' serving/);
});
