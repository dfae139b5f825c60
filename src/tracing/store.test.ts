import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createLogger } from '../common/log.js';
import type { Trace } from '../wire/diagnostics.js';
import { DEFAULT_TRACE_RETENTION_DAYS, TraceStore, traceRetentionFromEnv } from './store.js';

const log = createLogger({ level: 'silent' });
const DAY_MS = 86_400_000;
const dirs: string[] = [];
after(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-traces-'));
  dirs.push(dir);
  return join(dir, 'traces');
}

function trace(n: number, startedAtMs: number, spans = 1): Trace {
  const traceId = n.toString(16).padStart(32, '0');
  return {
    traceId,
    startedAtMs,
    durationMs: 10,
    apiNodeId: 'node-a',
    route: 'POST /v1/chat/completions',
    modelId: 'shoal/tiny',
    status: 200,
    nodes: ['node-a'],
    spanCount: spans,
    spans: Array.from({ length: spans }, (_, i) => ({ spanId: `s${i}`, parentId: null, traceId, nodeId: 'node-a', name: 'http', startMs: startedAtMs, endMs: startedAtMs + 10, attributes: {} })),
    offsets: {},
  };
}

test('traces are kept one file each, listed newest first, and read back whole', async () => {
  const dir = await freshDir();
  const now = 10 * DAY_MS;
  const store = await TraceStore.open({ dir, log, now: () => now });
  await store.save(trace(1, now - 3000));
  await store.save(trace(2, now - 1000));
  await store.save(trace(3, now - 2000));
  assert.deepEqual(store.list(10).map((s) => s.traceId.slice(-1)), ['2', '3', '1']);
  assert.deepEqual(store.list(2).map((s) => s.traceId.slice(-1)), ['2', '3']);
  assert.equal('spans' in store.list(1)[0]!, false, 'summaries only');
  assert.deepEqual(await store.get(trace(3, 0).traceId), trace(3, now - 2000));
  assert.equal(await store.get('f'.repeat(32)), null);
  assert.equal(await store.get('../../etc/passwd'), null);
  assert.equal((await readdir(dir)).length, 3);
});

test('retention prunes traces older than it, at start and when pruning runs, with an injected clock', async () => {
  const dir = await freshDir();
  let now = 100 * DAY_MS;
  const store = await TraceStore.open({ dir, log, now: () => now, retentionMs: 3 * DAY_MS });
  await store.save(trace(1, now - 2 * DAY_MS));
  await store.save(trace(2, now - DAY_MS));
  now += 1.5 * DAY_MS;
  await store.prune();
  assert.deepEqual(store.list(10).map((s) => s.traceId.slice(-1)), ['2'], 'the one past 3 days went');
  assert.deepEqual(await readdir(dir), [`${trace(2, 0).traceId}.json`]);
  // A restart much later finds it past retention and prunes it at start.
  now += 2 * DAY_MS;
  const reopened = await TraceStore.open({ dir, log, now: () => now, retentionMs: 3 * DAY_MS });
  assert.deepEqual(reopened.list(10), []);
  assert.deepEqual(await readdir(dir), []);
});

test('the count and byte caps drop the oldest first', async () => {
  const dir = await freshDir();
  const now = 10 * DAY_MS;
  const counted = await TraceStore.open({ dir, log, now: () => now, maxTraces: 3 });
  for (let i = 1; i <= 5; i++) await counted.save(trace(i, now - 100 + i));
  assert.deepEqual(counted.list(10).map((s) => s.traceId.slice(-1)), ['5', '4', '3']);
  assert.equal((await readdir(dir)).length, 3);

  const sized = join(await freshDir(), 'b');
  const oneBytes = Buffer.byteLength(JSON.stringify(trace(1, now, 20)));
  const capped = await TraceStore.open({ dir: sized, log, now: () => now, maxBytes: Math.floor(oneBytes * 2.5) });
  for (let i = 1; i <= 4; i++) await capped.save(trace(i, now - 100 + i, 20));
  assert.deepEqual(capped.list(10).map((s) => s.traceId.slice(-1)), ['4', '3']);
  assert.equal((await readdir(sized)).length, 2);
});

test('at start, unreadable files and leftovers are removed and good traces are indexed', async () => {
  const dir = await freshDir();
  const now = 10 * DAY_MS;
  const first = await TraceStore.open({ dir, log, now: () => now });
  await first.save(trace(7, now - 5));
  await writeFile(join(dir, `${'e'.repeat(32)}.json`), '{"not": "a trace"}');
  await writeFile(join(dir, `${trace(8, 0).traceId}.json.tmp-1-abcd`), 'partial');
  await writeFile(join(dir, `${'d'.repeat(32)}.json`), JSON.stringify(trace(9, now)));
  const reopened = await TraceStore.open({ dir, log, now: () => now });
  assert.deepEqual(reopened.list(10).map((s) => s.traceId), [trace(7, 0).traceId], 'a file named for another id is not trusted either');
  assert.deepEqual(await readdir(dir), [`${trace(7, 0).traceId}.json`]);
});

test('SHOAL_TRACE_RETENTION_DAYS sets the retention; a bad value is refused', () => {
  assert.equal(traceRetentionFromEnv({}), DEFAULT_TRACE_RETENTION_DAYS * DAY_MS);
  assert.equal(traceRetentionFromEnv({ SHOAL_TRACE_RETENTION_DAYS: '0.5' }), DAY_MS / 2);
  for (const bad of ['0', '-1', 'three', 'Infinity']) assert.throws(() => traceRetentionFromEnv({ SHOAL_TRACE_RETENTION_DAYS: bad }), /SHOAL_TRACE_RETENTION_DAYS/);
});
