import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat, unlink, writeFile, open as openFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { isShoalError } from '../../common/errors.js';
import { encodeRecord, FRAME_HEADER_BYTES } from './codec.js';
import { LogStore, MAX_RECORD_BYTES, type LogHealth } from './store.js';

interface Rec {
  term: number;
  idx: number;
  hash: string;
  event: { type: string; note: string };
  origin: null;
}

const rec = (idx: number, term = 1, note = `event ${String(idx).padStart(6, '0')}`): Rec => ({ term, idx, hash: idx.toString(16).padStart(32, '0'), event: { type: 'NicknameSet', note }, origin: null });
const range = (from: number, to: number): Rec[] => Array.from({ length: to - from + 1 }, (_, i) => rec(from + i));

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-log-'));
  dirs.push(dir);
  return dir;
}

const segName = (idx: number, gz = false) => `log-${String(idx).padStart(20, '0')}.seg${gz ? '.gz' : ''}`;

async function files(dir: string): Promise<string[]> {
  return (await readdir(dir)).sort();
}

function code(error: unknown): string {
  return isShoalError(error) ? error.code : `not a ShoalError: ${String(error)}`;
}

test('records round trip through appends, reads and a reopen', async () => {
  const dir = await freshDir();
  {
    await using store = await LogStore.open<Rec>(dir);
    assert.equal(store.firstIdx(), null);
    assert.equal(store.lastIdx(), 0);
    assert.equal(store.lastRecord(), null);
    assert.deepEqual(await store.read(1, 10), []);
    await store.append([rec(1)]);
    await store.append(range(2, 50));
    assert.deepEqual(await store.read(1, 100), range(1, 50));
    assert.deepEqual(await store.read(10, 5), range(10, 14));
    assert.deepEqual(await store.read(51, 5), []);
    assert.deepEqual(store.lastRecord(), rec(50));
    assert.equal(store.firstIdx(), 1);
    // A byte budget stops a page early but always returns at least one record.
    const frameBytes = encodeRecord(rec(10)).length;
    assert.deepEqual(await store.read(10, 100, frameBytes * 3), range(10, 12));
    assert.deepEqual(await store.read(10, 100, 1), [rec(10)]);
    assert.deepEqual(store.health(), { level: 'ok' });
  }
  await using reopened = await LogStore.open<Rec>(dir);
  assert.deepEqual(await reopened.read(1, 100), range(1, 50));
  assert.deepEqual(reopened.lastRecord(), rec(50));
  assert.equal(reopened.recovery.truncated, null);
  await reopened.append([rec(51)]);
  assert.equal(reopened.lastIdx(), 51);
});

test('idx must continue the log without a gap, and oversized records are refused with a typed error', async () => {
  await using store = await LogStore.open<Rec>(await freshDir());
  await assert.rejects(store.append([rec(2)]), assert.AssertionError);
  await assert.rejects(store.append([rec(1), rec(3)]), assert.AssertionError);
  await store.append([rec(1)]);
  await assert.rejects(store.append([rec(1)]), assert.AssertionError);
  const big = rec(2, 1, 'x'.repeat(MAX_RECORD_BYTES));
  await assert.rejects(store.append([big]), (error) => code(error) === 'PAYLOAD_TOO_LARGE' && /4 MiB/.test(String(error)));
  await store.append([rec(2)]); // the refused record did not take idx 2
  assert.equal(store.lastIdx(), 2);
});

test('group commit: concurrent appends share fsyncs, and each resolves only after its fsync', async () => {
  let fsyncs = 0;
  const events: string[] = [];
  await using store = await LogStore.open<Rec>(await freshDir(), {
    onFsync: () => {
      fsyncs += 1;
      events.push('fsync');
    },
  });
  const n = 500;
  await Promise.all(range(1, n).map((r) => store.append([r]).then(() => events.push(`ok ${r.idx}`))));
  assert.ok(fsyncs >= 1 && fsyncs < n / 10, `expected far fewer fsyncs than appends, got ${fsyncs} for ${n}`);
  assert.equal(events[0], 'fsync');
  assert.deepEqual(await store.read(1, n), range(1, n));

  // Appends that arrive while a write is in flight form the next batch.
  const before = fsyncs;
  const first = store.append([rec(n + 1)]);
  await new Promise((resolve) => setImmediate(resolve));
  const rest = range(n + 2, n + 101).map((r) => store.append([r]));
  await Promise.all([first, ...rest]);
  assert.ok(fsyncs - before <= 3, `101 appends in two waves took ${fsyncs - before} fsyncs`);
});

test('truncations and appends queued together apply in call order', async () => {
  await using store = await LogStore.open<Rec>(await freshDir());
  await store.append(range(1, 10));
  const a = store.append(range(11, 12));
  const t = store.truncateAfter(5);
  const b = store.append(range(6, 7).map((r) => ({ ...r, term: 2 })));
  await Promise.all([a, t, b]);
  assert.deepEqual(await store.read(1, 100), [...range(1, 5), rec(6, 2), rec(7, 2)]);
});

test('a torn tail of every length of the last frame is cut off on open, and the log continues', async () => {
  const dir = await freshDir();
  {
    await using store = await LogStore.open<Rec>(dir);
    for (let idx = 1; idx <= 4; idx++) await store.append([rec(idx)]);
  }
  const path = join(dir, segName(1));
  const full = await readFile(path);
  const lastLength = encodeRecord(rec(4)).length;
  const lastOffset = full.length - lastLength;
  for (let cut = 0; cut < lastLength; cut++) {
    await writeFile(path, full.subarray(0, lastOffset + cut));
    await using store = await LogStore.open<Rec>(dir);
    assert.deepEqual(await store.read(1, 10), range(1, 3), `cut ${cut}`);
    assert.equal((await stat(path)).size, lastOffset, `file cut back at ${cut}`);
    if (cut === 0) assert.equal(store.recovery.truncated, null);
    else assert.deepEqual({ ...store.recovery.truncated, reason: '' }, { file: segName(1), offset: lastOffset, bytes: cut, reason: '' });
    await store.append([rec(4, 2)]);
    assert.deepEqual(store.lastRecord(), rec(4, 2));
  }
});

test('a bit flip in the last frame is a torn tail; in an earlier frame it is LOG_CORRUPT naming the file', async () => {
  const dir = await freshDir();
  const warnings: object[] = [];
  {
    await using store = await LogStore.open<Rec>(dir);
    for (let idx = 1; idx <= 5; idx++) await store.append([rec(idx)]);
  }
  const path = join(dir, segName(1));
  const full = await readFile(path);
  const frame = encodeRecord(rec(1)).length; // all five frames have the same length

  const lastFlipped = Buffer.from(full);
  lastFlipped[4 * frame + FRAME_HEADER_BYTES + 10]! ^= 0x04;
  await writeFile(path, lastFlipped);
  {
    await using store = await LogStore.open<Rec>(dir, { log: { info: () => {}, warn: (obj) => warnings.push(obj), error: () => {} } });
    assert.deepEqual(await store.read(1, 10), range(1, 4));
    assert.equal(store.recovery.truncated?.reason, 'checksum mismatch');
    assert.equal(warnings.length, 1, 'the cut is logged');
  }

  const midFlipped = Buffer.from(full);
  midFlipped[1 * frame + FRAME_HEADER_BYTES + 10]! ^= 0x04;
  await writeFile(path, midFlipped);
  await assert.rejects(LogStore.open<Rec>(dir), (error) => {
    assert.equal(code(error), 'LOG_CORRUPT');
    const message = String((error as Error).message);
    assert.ok(message.includes(path), message);
    assert.ok(message.includes(`byte ${frame}`), message);
    assert.ok(message.includes(`Move ${dir} aside`) && message.includes('catches up from the cluster') && message.includes('shoal join'), message);
    return true;
  });
  assert.equal((await readFile(path)).length, full.length, 'a corrupt log is left untouched');
});

test('segments rotate, closed ones are gzipped, and reads span .seg.gz and .seg', async () => {
  const dir = await freshDir();
  const frame = encodeRecord(rec(100)).length;
  {
    await using store = await LogStore.open<Rec>(dir, { maxSegmentBytes: frame * 10 });
    for (let idx = 1; idx <= 100; idx += 5) await store.append(range(idx, idx + 4));
    await store.backgroundIdle();
    const names = await files(dir);
    assert.deepEqual(names, [segName(1, true), segName(11, true), segName(21, true), segName(31, true), segName(41, true), segName(51, true), segName(61, true), segName(71, true), segName(81, true), segName(91)]);
    assert.deepEqual(await store.read(1, 1000), range(1, 100));
    assert.deepEqual(await store.read(8, 6), range(8, 13));
    assert.deepEqual(await store.read(88, 100), range(88, 100));
  }
  await using reopened = await LogStore.open<Rec>(dir, { maxSegmentBytes: frame * 10 });
  assert.deepEqual(await reopened.read(1, 1000), range(1, 100));
  assert.equal(reopened.recovery.segments, 10);
  assert.deepEqual(reopened.lastRecord(), rec(100));
});

test('a damaged closed segment is LOG_CORRUPT, compressed or not', async () => {
  const dir = await freshDir();
  const frame = encodeRecord(rec(10)).length;
  {
    await using store = await LogStore.open<Rec>(dir, { maxSegmentBytes: frame * 5 });
    await store.append(range(1, 5));
    await store.append(range(6, 10));
    await store.append(range(11, 12));
    await store.backgroundIdle(); // close does not wait for compressions: open resumes them
  }
  const gzPath = join(dir, segName(1, true));
  const gz = await readFile(gzPath);
  const damaged = Buffer.from(gz);
  damaged[damaged.length - 6]! ^= 0xff; // inside the gzip trailer's CRC
  await writeFile(gzPath, damaged);
  await assert.rejects(LogStore.open<Rec>(dir), (error) => code(error) === 'LOG_CORRUPT' && String(error).includes(gzPath));
  await writeFile(gzPath, gz);
  // The last frame of a closed segment is not a tail: damage there is corruption too.
  const middle = join(dir, segName(6, true));
  const { gunzipSync } = await import('node:zlib');
  const plain = Buffer.from(gunzipSync(await readFile(middle)));
  plain[plain.length - 2]! ^= 0x01;
  await unlink(middle);
  await writeFile(join(dir, segName(6)), plain);
  await assert.rejects(LogStore.open<Rec>(dir), (error) => code(error) === 'LOG_CORRUPT' && String(error).includes(segName(6)));
});

test('truncateAfter works inside the active segment, across segment boundaries and into gzipped segments', async () => {
  const dir = await freshDir();
  const frame = encodeRecord(rec(10)).length;
  const opts = { maxSegmentBytes: frame * 10 };
  {
    await using store = await LogStore.open<Rec>(dir, opts);
    for (let idx = 1; idx <= 60; idx += 10) await store.append(range(idx, idx + 9));
    await store.backgroundIdle();
    await store.truncateAfter(55); // inside the active segment
    assert.deepEqual(store.lastRecord(), rec(55));
    assert.deepEqual(await store.read(50, 100), range(50, 55));
    await store.truncateAfter(34); // inside a gzipped one: later segments go, it becomes the active one
    assert.deepEqual(store.lastRecord(), rec(34));
    assert.deepEqual(await files(dir), [segName(1, true), segName(11, true), segName(21, true), segName(31)]);
    await store.append([rec(35, 3)]);
    await store.truncateAfter(20); // exactly at a segment boundary
    assert.deepEqual(store.lastRecord(), rec(20));
    assert.deepEqual(await files(dir), [segName(1, true), segName(11)]);
    await store.append(range(21, 25));
    await store.truncateAfter(100); // past the end: nothing to do
    assert.equal(store.lastIdx(), 25);
  }
  {
    await using store = await LogStore.open<Rec>(dir, opts);
    assert.deepEqual(await store.read(1, 1000), range(1, 25));
    await store.truncateAfter(0);
    assert.equal(store.lastRecord(), null);
    assert.equal(store.firstIdx(), null);
    await assert.rejects(store.append([rec(2)]), assert.AssertionError);
    await store.append([rec(1, 4)]);
  }
  await using store = await LogStore.open<Rec>(dir, opts);
  assert.deepEqual(await store.read(1, 10), [rec(1, 4)]);
});

test('snapshots keep the newest two, compactBefore drops whole covered segments, resetAfter installs one', async () => {
  const dir = await freshDir();
  const frame = encodeRecord(rec(10)).length;
  const opts = { maxSegmentBytes: frame * 10 };
  {
    await using store = await LogStore.open<Rec, { members: string[] }>(dir, opts);
    assert.equal(await store.loadSnapshot(), null);
    for (let idx = 1; idx <= 45; idx += 10) await store.append(range(idx, Math.min(idx + 9, 45)));
    await assert.rejects(store.compactBefore(10), assert.AssertionError); // no snapshot yet
    await store.saveSnapshot({ idx: 10, term: 1, hash: 'h10', state: { members: ['a'] } });
    await store.saveSnapshot({ idx: 20, term: 1, hash: 'h20', state: { members: ['a', 'b'] } });
    await store.saveSnapshot({ idx: 35, term: 1, hash: 'h35', state: { members: ['a', 'b', 'c'] } });
    assert.deepEqual((await files(dir)).filter((f) => f.startsWith('snapshot-')), ['snapshot-00000000000000000020.msgpack', 'snapshot-00000000000000000035.msgpack']);
    assert.deepEqual(await store.loadSnapshot(), { idx: 35, term: 1, hash: 'h35', state: { members: ['a', 'b', 'c'] } });
    assert.equal(await store.compactBefore(35), 30); // segments 1-10, 11-20, 21-30; 31-40 holds 35
    assert.equal(store.firstIdx(), 31);
    await assert.rejects(store.read(5, 10), (error) => code(error) === 'NOT_FOUND');
    assert.deepEqual(await store.read(31, 100), range(31, 45));
  }
  {
    await using store = await LogStore.open<Rec, { members: string[] }>(dir, opts);
    assert.equal(store.firstIdx(), 31);
    assert.equal((await store.loadSnapshot())?.idx, 35);
    // A damaged newest snapshot: the older one (20) no longer has its tail in the log, so it is refused.
    const newest = join(dir, 'snapshot-00000000000000000035.msgpack');
    const bytes = await readFile(newest);
    bytes[bytes.length - 1]! ^= 0x01;
    await writeFile(newest, bytes);
    await assert.rejects(store.loadSnapshot(), (error) => code(error) === 'LOG_CORRUPT' && String(error).includes(newest));
    // A follower installing the master's snapshot at 100: save it, then reset the log after it.
    await store.saveSnapshot({ idx: 100, term: 2, hash: 'h100', state: { members: ['z'] } });
    await store.resetAfter(100);
    assert.equal(store.firstIdx(), null);
    assert.equal(store.lastIdx(), 100);
    await store.append([rec(101, 2)]);
  }
  await using store = await LogStore.open<Rec, { members: string[] }>(dir, opts);
  assert.deepEqual(await store.read(101, 10), [rec(101, 2)]);
  assert.equal((await store.loadSnapshot())?.hash, 'h100');
  await store.append([rec(102, 2), rec(103, 2)]);
  await store.saveSnapshot({ idx: 103, term: 2, hash: 'h103', state: { members: ['z', 'y'] } });
  // A damaged newest snapshot whose predecessor still has its whole tail in the log: use the older one.
  const path103 = join(dir, 'snapshot-00000000000000000103.msgpack');
  const bytes = await readFile(path103);
  bytes[bytes.length - 2]! ^= 0x01;
  await writeFile(path103, bytes);
  assert.equal((await store.loadSnapshot())?.idx, 100);
  // Truncating below a snapshot discards records it was built from, so the snapshot goes too.
  await store.truncateAfter(102);
  assert.ok(!existsSync(path103));
  assert.deepEqual(await store.read(101, 10), [rec(101, 2), rec(102, 2)]);
});

test('reads during concurrent appends, rotations and compressions see a gap-free durable prefix', async () => {
  const frame = encodeRecord(rec(10)).length;
  await using store = await LogStore.open<Rec>(await freshDir(), { maxSegmentBytes: frame * 7 });
  const writers = (async () => {
    for (let wave = 0; wave < 12; wave++) await Promise.all(range(wave * 10 + 1, wave * 10 + 10).map((r) => store.append([r])));
  })();
  let done = false;
  void writers.finally(() => (done = true));
  let reads = 0;
  while (!done) {
    const page = await store.read(1, 1000);
    assert.deepEqual(page, range(1, page.length));
    assert.ok(page.length <= store.lastIdx());
    reads += 1;
    await new Promise((resolve) => setImmediate(resolve)); // an empty page involves no I/O
  }
  await writers;
  await store.backgroundIdle();
  assert.ok(reads > 1);
  assert.deepEqual(await store.read(1, 1000), range(1, 120));
});

test('the term file round trips atomically', async () => {
  const dir = await freshDir();
  {
    await using store = await LogStore.open<Rec>(dir);
    assert.equal(await store.loadTerm(), 0);
    await store.saveTerm(3);
    await store.saveTerm(7);
    assert.equal(await store.loadTerm(), 7);
  }
  await using store = await LogStore.open<Rec>(dir);
  assert.equal(await store.loadTerm(), 7);
  assert.ok(!(await files(dir)).some((f) => f.endsWith('.tmp')));
  await writeFile(join(dir, 'term'), Buffer.from([1, 2, 3]));
  await assert.rejects(store.loadTerm(), (error) => code(error) === 'LOG_CORRUPT' && String(error).includes(join(dir, 'term')));
});

test('leftover temporary files and a half-finished compression are cleaned up on open', async () => {
  const dir = await freshDir();
  const frame = encodeRecord(rec(10)).length;
  {
    await using store = await LogStore.open<Rec>(dir, { maxSegmentBytes: frame * 5, compressClosedSegments: false });
    await store.append(range(1, 5));
    await store.append(range(6, 7));
  }
  const { gzipSync } = await import('node:zlib');
  await writeFile(join(dir, `${segName(1, true)}`), gzipSync(await readFile(join(dir, segName(1)))));
  await writeFile(join(dir, `${segName(6, true)}.tmp`), 'partial');
  await using store = await LogStore.open<Rec>(dir, { maxSegmentBytes: frame * 5 });
  assert.deepEqual(store.recovery.removedFiles.sort(), [segName(1, true), `${segName(6, true)}.tmp`].sort());
  assert.deepEqual(await store.read(1, 10), range(1, 7));
  await store.backgroundIdle();
  assert.deepEqual(await files(dir), [segName(1, true), segName(6)]);
});

test('a full disk degrades instead of crashing, leaves no partial frame, and recovers when space returns', async (t) => {
  const mountPoint = await freshDir();
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', mountPoint], { stdio: 'pipe' });
  } catch (error) {
    t.skip(`cannot mount a 256 KiB tmpfs to fill (needs root and mount): ${String((error as Error).message).split('\n')[0]}`);
    return;
  }
  t.after(() => execFileSync('umount', [mountPoint]));
  {
    const dir = join(mountPoint, 'log');
    const healthChanges: LogHealth[] = [];
    const store = await LogStore.open<Rec>(dir, { onHealthChange: (h) => healthChanges.push(h) });
    await store.append(range(1, 3));
    const segment = join(dir, segName(1));

    // Fill the filesystem: a 4 KiB reserve, then a filler until ENOSPC, then free the reserve so that
    // exactly one page is left: a big record gets partly written before the disk is full.
    await writeFile(join(mountPoint, 'reserve'), Buffer.alloc(4096));
    const filler = await openFile(join(mountPoint, 'filler'), 'w');
    const chunk = Buffer.alloc(4096, 1);
    for (;;) {
      try {
        await filler.write(chunk);
      } catch (error) {
        assert.equal((error as NodeJS.ErrnoException).code, 'ENOSPC');
        break;
      }
    }
    await filler.close();
    const sizeBefore = (await stat(segment)).size;
    const lastBefore = store.lastIdx();
    await unlink(join(mountPoint, 'reserve'));

    const next = lastBefore + 1;
    const big = store.append([rec(next, 1, 'b'.repeat(20_000))]);
    const queuedBehind = store.append([rec(next + 1)]);
    await assert.rejects(big, (error) => code(error) === 'DISK_FULL' && /free space/.test(String(error)));
    await assert.rejects(queuedBehind, (error) => code(error) === 'DISK_FULL');
    assert.equal((await stat(segment)).size, sizeBefore, 'the partly written frame was cut off');
    const health = store.health();
    assert.equal(health.level, 'degraded');
    assert.ok(health.level === 'degraded' && /disk is full/.test(health.reason) && /free space/.test(health.remediation));
    assert.equal(store.lastIdx(), lastBefore);
    assert.deepEqual((await store.read(1, 3)).map((r) => r.idx), [1, 2, 3], 'reads still work');

    // Still full: the next append fails the same way, and nothing crashes.
    await assert.rejects(store.append([rec(next, 1, 'c'.repeat(20_000))]), (error) => code(error) === 'DISK_FULL');
    assert.equal((await stat(segment)).size, sizeBefore);

    await unlink(join(mountPoint, 'filler'));
    await store.append([rec(next)]);
    await store.append([rec(next + 1)]);
    assert.deepEqual(store.health(), { level: 'ok' });
    assert.deepEqual(healthChanges.map((h) => h.level), ['degraded', 'ok']);
    await store.close();

    await using reopened = await LogStore.open<Rec>(dir);
    assert.equal(reopened.recovery.truncated, null, 'no torn frame was left behind');
    assert.equal(reopened.lastIdx(), next + 1);
  }
});

test('a snapshot keeps every field its caller gave it (the core adds its state hash, term runs and command memory)', async () => {
  const dir = await freshDir();
  const snapshot = { idx: 5, term: 2, hash: 'h5', state: { members: ['a'] }, stateHash: 'f'.repeat(64), terms: [{ term: 2, firstIdx: 1, lastIdx: 5 }], commands: [] };
  {
    await using store = await LogStore.open<Rec, { members: string[] }>(dir);
    await store.saveSnapshot(snapshot);
  }
  await using store = await LogStore.open<Rec, { members: string[] }>(dir);
  assert.deepEqual(await store.loadSnapshot(), snapshot);
});
