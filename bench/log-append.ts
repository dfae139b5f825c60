import '../src/polyfill.js';
import { tmpdir } from 'node:os';
import { parseArgs } from 'node:util';
import { encodeRecord } from '../src/master/log/codec.js';
import { benchRecord, measureAppendRate } from './append-rate.js';
import { summarize } from './stats.js';

/**
 * Fsynced append throughput of the event log for small (~200 B) records, with 1, 8 and 64 concurrent
 * appenders (each awaits its own append before the next, so concurrency is what group commit batches).
 * Every run uses a fresh log directory; the median of several runs is reported. Prints one JSON object.
 */

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    dir: { type: 'string', default: tmpdir() },
    runs: { type: 'string' },
    'duration-ms': { type: 'string' },
    appenders: { type: 'string', default: '1,8,64' },
  },
});

const quick = values.quick === true;
const runs = Number(values.runs ?? (quick ? 2 : 5));
const durationMs = Number(values['duration-ms'] ?? (quick ? 500 : 1000));
const appenderCounts = values.appenders.split(',').map(Number);
const TARGET_EVENTS_PER_S = 20_000;


const results = [];
for (const appenders of appenderCounts) {
  const events: number[] = [];
  const fsyncs: number[] = [];
  await measureAppendRate(values.dir, appenders, durationMs); // warm-up
  for (let i = 0; i < runs; i++) {
    const r = await measureAppendRate(values.dir, appenders, durationMs);
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
      quick,
      recordBytes: encodeRecord(benchRecord(1_000_000)).length,
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
