import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TaskEvent } from '../wire/task.js';
import { Sampler } from './sampler.js';
import { KEPT_SAMPLES, Sample, SERIES_SAMPLES, WireSample } from './series.js';
import type { SystemReading } from './system.js';
import { RequestTracker } from './tracker.js';

const system = { read: (): SystemReading => ({ cpu: { pct: 12.345, cores: 4 }, memory: { usedBytes: 1, totalBytes: 2 }, gpu: { devices: 1, utilPct: 33.333, usedBytes: 3, totalBytes: 4 } }) };
const text: TaskEvent = { type: 'text', text: 'x' };

function setup() {
  const clock = { now: 1_000_000 };
  const tracker = new RequestTracker({ maxTtftsPerTake: 256, random: Math.random });
  const sampler = new Sampler({ tracker, system, nowMs: () => clock.now });
  return { clock, tracker, sampler };
}

test('a sample has the rate over its interval, the requests now and the machine', () => {
  const { clock, tracker, sampler } = setup();
  const r = tracker.arrive('generate', 0);
  tracker.observe(r, { type: 'start', promptTokens: 1 }, 0);
  for (let i = 0; i < 10; i += 1) tracker.observe(r, text, 5);
  tracker.arrive('generate', 0);
  clock.now += 2000;
  const s = sampler.sample();
  assert.equal(s.seq, 1);
  assert.equal(s.intervalMs, 2000);
  assert.equal(s.generatedTokens, 10);
  assert.equal(s.tokensPerS, 5);
  assert.equal(s.inFlight, 2);
  assert.equal(s.waiting, 1);
  assert.deepEqual(s.cpu, { pct: 12.3, cores: 4 });
  assert.equal(s.gpu?.utilPct, 33.3);
  assert.deepEqual(s.ttftUs, [5000]);
  assert.deepEqual(s.ttftMs, { p50: 5, p95: 5, p99: 5, count: 1 });
  assert.equal(WireSample.safeParse(s).success, true);
  clock.now += 1000;
  const next = sampler.sample();
  assert.equal(next.generatedTokens, 0);
  assert.equal(next.tokensPerS, 0);
  assert.equal(next.intervalMs, 1000);
  assert.deepEqual(next.ttftMs, { p50: 5, p95: 5, p99: 5, count: 1 }, 'still in the 5-minute window');
});

test('TTFT percentiles cover the first tokens of the last 5 minutes, exactly', () => {
  const { clock, tracker, sampler } = setup();
  // One first token per sample: TTFTs 1, 2, ..., 200 ms, a sample every 2 s.
  for (let i = 1; i <= 200; i += 1) {
    const r = tracker.arrive('generate', 0);
    tracker.observe(r, text, i);
    clock.now += 2000;
    sampler.sample();
  }
  // The last 150 samples (5 minutes) hold TTFTs 51..200.
  const newest = sampler.newest()!;
  assert.equal(newest.ttftMs.count, 150);
  assert.equal(newest.ttftMs.p50, 125);
  assert.equal(newest.ttftMs.p95, 193);
  assert.equal(newest.ttftMs.p99, 199);
});

test('history is bounded: 300 samples shown, 450 kept, seq keeps counting', () => {
  const { clock, sampler } = setup();
  for (let i = 0; i < 1000; i += 1) {
    clock.now += 2000;
    sampler.sample();
  }
  const series = sampler.series();
  assert.equal(series.length, SERIES_SAMPLES);
  assert.equal(series.at(-1)!.seq, 1000);
  assert.equal(series[0]!.seq, 701);
  for (const s of series.slice(0, 3)) assert.equal(Sample.safeParse(s).success, true, 'no first-token list in the shown series');
  assert.equal(sampler.wireAfter(null).length, KEPT_SAMPLES);
  assert.deepEqual(sampler.wireAfter(997).map((s) => s.seq), [998, 999, 1000]);
  assert.deepEqual(sampler.wireAfter(1000), []);
});

test('sample times never repeat or go back, even when the clock does', () => {
  const { clock, sampler } = setup();
  const a = sampler.sample();
  clock.now -= 5000;
  const b = sampler.sample();
  assert.ok(b.t > a.t);
  assert.equal(b.tokensPerS, 0);
});

test('listeners get every sample; stop ends the timer and the listeners', () => {
  const { sampler } = setup();
  const seen: number[] = [];
  const off = sampler.onSample((s) => seen.push(s.seq));
  sampler.sample();
  off();
  sampler.sample();
  sampler.onSample((s) => seen.push(s.seq));
  sampler.start();
  sampler.stop();
  sampler.sample();
  assert.deepEqual(seen, [1]);
});
