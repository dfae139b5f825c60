import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bandwidthCachePath, bandwidthFigure, isBandwidthFresh, measureReadBandwidth, readBandwidthCache, type BandwidthMeasurement } from './hardware.js';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const entry = (measuredAt: string): BandwidthMeasurement => ({ gbPerSecond: 31.5, threads: 2, bufferBytes: 268435456, measuredAt });

test('a bandwidth figure is fresh for a day, and never from the future', () => {
  assert.equal(isBandwidthFresh(entry('2026-03-01T11:59:00.000Z'), NOW), true);
  assert.equal(isBandwidthFresh(entry('2026-02-28T12:00:01.000Z'), NOW), true);
  assert.equal(isBandwidthFresh(entry('2026-02-28T12:00:00.000Z'), NOW), false);
  assert.equal(isBandwidthFresh(entry('2026-03-01T13:00:00.000Z'), NOW), false);
  assert.equal(isBandwidthFresh(entry('yesterday'), NOW), false);
});

test('the cache lives in <dataDir>/doctor/bandwidth.json', () => {
  assert.equal(bandwidthCachePath('/var/lib/shoal'), '/var/lib/shoal/doctor/bandwidth.json');
});

test('a fresh cached figure is used without measuring', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'shoal-bw-'));
  try {
    await mkdir(join(dataDir, 'doctor'));
    await writeFile(bandwidthCachePath(dataDir), JSON.stringify(entry('2026-03-01T08:00:00.000Z')));
    // threads: 0 would fail a measurement; the cache answers first.
    const figure = await bandwidthFigure({ dataDir, threads: 1, skip: true, now: () => NOW });
    assert.deepEqual(figure, { ...entry('2026-03-01T08:00:00.000Z'), cached: true });
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('a stale or damaged cache is measured again (or skipped when asked)', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'shoal-bw-'));
  try {
    await mkdir(join(dataDir, 'doctor'));
    await writeFile(bandwidthCachePath(dataDir), JSON.stringify(entry('2026-02-20T08:00:00.000Z')));
    assert.equal(await bandwidthFigure({ dataDir, threads: 1, skip: true, now: () => NOW }), null);
    await writeFile(bandwidthCachePath(dataDir), '{"gbPerSecond": "fast"}');
    assert.equal(await readBandwidthCache(dataDir), null);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('a measurement is cached in an existing data dir, and never creates one', async () => {
  const parent = await mkdtemp(join(tmpdir(), 'shoal-bw-'));
  try {
    const missing = join(parent, 'not-yet');
    const first = await bandwidthFigure({ dataDir: missing, threads: 1, now: () => NOW });
    assert.ok(first && first.gbPerSecond > 0 && first.cached === false);
    assert.equal(existsSync(missing), false, 'a check does not create the data dir');

    const figure = await bandwidthFigure({ dataDir: parent, threads: 1, now: () => NOW });
    assert.ok(figure && figure.cached === false);
    const stored = JSON.parse(await readFile(bandwidthCachePath(parent), 'utf8')) as BandwidthMeasurement;
    assert.equal(stored.measuredAt, NOW.toISOString());
    assert.equal(stored.gbPerSecond, figure.gbPerSecond);
    const again = await bandwidthFigure({ dataDir: parent, threads: 1, skip: true, now: () => new Date(NOW.getTime() + 60_000) });
    assert.equal(again?.cached, true);
  } finally {
    await rm(parent, { recursive: true, force: true });
  }
});

test('the read bandwidth probe reports a positive rate for 1 and 2 threads', async () => {
  for (const threads of [1, 2]) {
    const result = await measureReadBandwidth({ threads, bufferBytes: 16 * 1024 * 1024, durationMs: 50 });
    assert.equal(result.threads, threads);
    assert.equal(result.bufferBytes, 16 * 1024 * 1024);
    assert.ok(result.gbPerSecond > 0, JSON.stringify(result));
  }
});
