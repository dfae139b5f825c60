import '../src/polyfill.js';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { encodeRecord } from '../src/master/log/codec.js';
import { LogStore } from '../src/master/log/store.js';
import { summarize } from './stats.js';

/**
 * Fsynced append throughput of the event log for small (~200 B) records, with 1, 8 and 64 concurrent
 * appenders (each awaits its own append before the next, so concurrency is what group commit batches).
 * Every run uses a fresh log directory; the median of several runs is reported. Prints one JSON object.
 */

const { values } = parseArgs({
  options: {
    dir: { type: 'string', default: tmpdir() },
    runs: { type: 'string', default: '5' },
    'duration-ms': { type: 'string', default: '1000' },
    appenders: { type: 'string', default: '1,8,64' },
  },
});

const runs = Number(values.runs);
const durationMs = Number(values['duration-ms']);
const appenderCounts = values.appenders.split(',').map(Number);
const TARGET_EVENTS_PER_S = 20_000;

interface BenchRecord {
  term: number;
  idx: number;
  hash: string;
  event: { type: 'NicknameSet'; nodeId: string; nickname: string };
  origin: { commandId: string } | null;
}

const nodeId = '12D3KooWGzh8uDgKXeeGEqS2VJ5rA8mHWRvrW2tJmJnUKQ7z6Xcd';
const commandId = randomUUID();
const record = (idx: number): BenchRecord => ({
  term: 3,
  idx,
  hash: '9f86d081884c7d659a2feaa0c55ad015',
  event: { type: 'NicknameSet', nodeId, nickname: 'gpu-box' },
  origin: { commandId },
});

async function runOnce(appenders: number): Promise<{ eventsPerS: number; fsyncsPerS: number }> {
  const dir = await mkdtemp(join(values.dir, 'shoal-bench-log-'));
  let fsyncs = 0;
  try {
    const store = await LogStore.open<BenchRecord>(dir, { onFsync: () => (fsyncs += 1) });
    let next = 1;
    let stop = false;
    const worker = async (): Promise<void> => {
      while (!stop) await store.append([record(next++)]);
    };
    const started = performance.now();
    const timer = setTimeout(() => (stop = true), durationMs);
    await Promise.all(Array.from({ length: appenders }, worker));
    const seconds = (performance.now() - started) / 1000;
    clearTimeout(timer);
    const appended = store.lastIdx();
    await store.close();
    return { eventsPerS: appended / seconds, fsyncsPerS: fsyncs / seconds };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const results = [];
for (const appenders of appenderCounts) {
  const events: number[] = [];
  const fsyncs: number[] = [];
  await runOnce(appenders); // warm-up
  for (let i = 0; i < runs; i++) {
    const r = await runOnce(appenders);
    events.push(r.eventsPerS);
    fsyncs.push(r.fsyncsPerS);
  }
  const eventsPerS = summarize(events);
  const fsyncsPerS = summarize(fsyncs);
  results.push({ appenders, eventsPerS, fsyncsPerS, recordsPerFsync: Math.round((eventsPerS.median / fsyncsPerS.median) * 10) / 10 });
  process.stderr.write(`${appenders} appenders: ${Math.round(eventsPerS.median)} events/s, ${Math.round(fsyncsPerS.median)} fsyncs/s\n`);
}

const best = Math.max(...results.map((r) => r.eventsPerS.median));
process.stdout.write(
  `${JSON.stringify(
    {
      benchmark: 'log-append',
      recordBytes: encodeRecord(record(1_000_000)).length,
      dir: values.dir,
      durationMs,
      runs,
      node: process.version,
      results,
      targetEventsPerS: TARGET_EVENTS_PER_S,
      meetsTarget: best >= TARGET_EVENTS_PER_S,
    },
    null,
    2,
  )}\n`,
);
