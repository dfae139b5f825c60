// Promise.withResolvers on Node 20: the store is also loaded without an entry point (its tests, bench/append-rate).
import '../../polyfill.js';
import assert from 'node:assert/strict';
import { open, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from '../../common/durable-fs.js';
import { ShoalError, errorMessage } from '../../common/errors.js';
import { decodeRecords, encodeRecord, FRAME_HEADER_BYTES, MAX_RECORD_BYTES } from './codec.js';
import { compressSegment } from './compression.js';
import { LOG_FILE_MODE, logCorrupt, writeFileSynced } from './files.js';
import { LogHealthTracker, type DegradedSource } from './health.js';
import { RwLock } from './lock.js';
import { recoverLog, type Recovered } from './recovery.js';
import { readSegmentBytes, segmentFile, type Active, type Segment } from './segments.js';
import { deleteSnapshotFile, encodeSnapshot, readSnapshotFile, readTermFile, snapshotFile, writeSnapshotFile, writeTermFile } from './snapshot-file.js';
import type { LogHealth, LogRecordBase, LogStoreLogger, LogStoreOptions, RecoveryReport, Snapshot } from './types.js';

export { MAX_RECORD_BYTES } from './codec.js';
export { MAX_SNAPSHOT_BYTES } from './snapshot-file.js';
export type { LogHealth, LogRecordBase, LogStoreLogger, LogStoreOptions, RecoveryReport, Snapshot } from './types.js';

/** A segment is closed (and compressed) once it holds at least this many bytes (checked before each batch, so a segment can end up to one batch larger). */
export const DEFAULT_MAX_SEGMENT_BYTES = 16 * 1024 * 1024;
/** Appends queued together are written in one write+fsync of at most about this many bytes. */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** How many snapshot files are kept; older ones are deleted after a new one is saved. */
export const SNAPSHOTS_KEPT = 2;

interface AppendEntry<R> {
  records: readonly R[];
  frames: Buffer[];
  bytes: number;
  resolve: () => void;
  reject: (error: unknown) => void;
}

type Op<R> =
  | { kind: 'append'; entries: AppendEntry<R>[]; bytes: number; lastIdx: number }
  | { kind: 'task'; effect: { truncateAfter: number } | { resetAfter: number } | null; run: () => Promise<void>; reject: (error: unknown) => void };

const noopLogger: LogStoreLogger = { info: () => {}, warn: () => {}, error: () => {} };

/**
 * The durable event log of one node: append-only segment files of CRC-framed msgpack records
 * (`log-<firstIdx>.seg`, closed ones gzipped to `.seg.gz`), snapshots and the persisted term.
 *
 * Appends from concurrent callers are group-committed: everything queued while the previous write was
 * in flight goes to disk in one write and one fsync, and each caller's promise resolves only after its
 * bytes are fsynced. A full disk never crashes the store: the append is rejected with DISK_FULL, health
 * turns degraded, and the next append tries again.
 */
export class LogStore<R extends LogRecordBase = LogRecordBase, S = unknown> implements AsyncDisposable {
  readonly dir: string;
  /** What `open` found and repaired. */
  readonly recovery: RecoveryReport;
  private readonly maxSegmentBytes: number;
  private readonly compressClosed: boolean;
  private readonly log: LogStoreLogger;
  private readonly onFsync: (() => void) | undefined;
  private readonly healthTracker: LogHealthTracker;

  private readonly segments: Segment[];
  private active: Active;
  private last: R | null;
  private snapshotIdxs: number[];

  private readonly lock = new RwLock();
  private readonly ops: Op<R>[] = [];
  private draining = false;
  /** The idx the next `append` must start at, counting appends and truncations still queued. */
  private nextIdxQueued: number;
  /** A failed write whose bytes could not be cut off yet: cut them before writing anything else. */
  private needsRepair = false;
  private cache: { seg: Segment; count: number; records: R[]; offsets: number[] } | null = null;
  private compressing: Promise<void> = Promise.resolve();
  private sideChain: Promise<void> = Promise.resolve();
  private closed = false;
  private closing: Promise<void> | null = null;
  private broken: ShoalError | null = null;

  private constructor(dir: string, options: LogStoreOptions, state: Recovered<R>) {
    this.dir = dir;
    this.maxSegmentBytes = options.maxSegmentBytes ?? DEFAULT_MAX_SEGMENT_BYTES;
    this.compressClosed = options.compressClosedSegments ?? true;
    this.log = options.log ?? noopLogger;
    this.onFsync = options.onFsync;
    this.healthTracker = new LogHealthTracker(dir, this.log, options.onHealthChange);
    this.segments = state.segments;
    this.active = state.active;
    this.last = state.last;
    this.snapshotIdxs = state.snapshotIdxs;
    this.recovery = state.recovery;
    this.nextIdxQueued = this.lastIdx() + 1;
  }

  /**
   * Opens (creating if needed) the log in `dir` and recovers it: every segment is read and checked, a
   * torn tail of the last segment is cut off (and logged), and damage anywhere else throws LOG_CORRUPT.
   */
  static async open<R extends LogRecordBase = LogRecordBase, S = unknown>(dir: string, options: LogStoreOptions = {}): Promise<LogStore<R, S>> {
    const log = options.log ?? noopLogger;
    const maxSegmentBytes = options.maxSegmentBytes ?? DEFAULT_MAX_SEGMENT_BYTES;
    assert.ok(Number.isSafeInteger(maxSegmentBytes) && maxSegmentBytes > 0, 'maxSegmentBytes must be a positive integer');
    const recovered = await recoverLog<R>(dir, log);
    const store = new LogStore<R, S>(dir, options, recovered);
    for (const seg of recovered.segments) if (seg !== recovered.active.seg && !seg.compressed) store.scheduleCompression(seg);
    return store;
  }

  // ---------------------------------------------------------------------------------------------
  // Reading

  /** The idx of the first record held, or null when the log holds none. */
  firstIdx(): number | null {
    const seg = this.segments.find((s) => s.count > 0);
    return seg === undefined ? null : seg.firstIdx;
  }

  /** The idx of the last durable record; when the log is empty, the idx it continues after (0 for a new log). */
  lastIdx(): number {
    return this.active.seg.firstIdx + this.active.seg.count - 1;
  }

  /** The last durable record, or null when the log holds none. */
  lastRecord(): R | null {
    return this.last;
  }

  health(): LogHealth {
    return this.healthTracker.health();
  }

  /**
   * Up to `maxRecords` durable records from `fromIdx` on (fewer at the end of the log, none past it),
   * stopping before `maxBytes` of frames once at least one record is in the page. Throws NOT_FOUND when
   * `fromIdx` was compacted away (the reader needs the snapshot).
   */
  async read(fromIdx: number, maxRecords: number, maxBytes = Number.POSITIVE_INFINITY): Promise<R[]> {
    assert.ok(Number.isSafeInteger(fromIdx) && fromIdx >= 1, `fromIdx must be an integer >= 1, got ${fromIdx}`);
    assert.ok(Number.isSafeInteger(maxRecords) && maxRecords >= 0, `maxRecords must be a non-negative integer, got ${maxRecords}`);
    this.assertUsable();
    return this.lock.shared(async () => {
      const out: R[] = [];
      const first = this.firstIdx();
      if (first !== null && fromIdx < first) {
        throw new ShoalError('NOT_FOUND', `the event log starts at idx ${first} (older records were compacted into a snapshot); records from ${fromIdx} are only available as the snapshot`);
      }
      let idx = fromIdx;
      let bytes = 0;
      for (const seg of this.segments) {
        if (out.length >= maxRecords || bytes >= maxBytes) break;
        if (seg.count === 0 || idx >= seg.firstIdx + seg.count) continue;
        const from = idx - seg.firstIdx;
        if (seg === this.active.seg) {
          const { offsets } = this.active;
          const start = offsets[from]!;
          let to = from; // exclusive
          while (to < seg.count && out.length + (to - from) < maxRecords) {
            const frameEnd = offsets[to + 1] ?? seg.bytes;
            if (bytes + (frameEnd - start) > maxBytes && out.length + (to - from) > 0) break;
            to += 1;
          }
          if (to === from) break;
          const buf = Buffer.allocUnsafe((offsets[to] ?? seg.bytes) - start);
          const { bytesRead } = await this.active.fh.read(buf, 0, buf.length, start);
          assert.equal(bytesRead, buf.length, 'short read of the active segment');
          const decoded = decodeRecords<R>(buf);
          assert.equal(decoded.tail, 'clean', `fsynced records of ${segmentFile(seg)} failed to decode: ${decoded.reason}`);
          out.push(...decoded.records);
          bytes += buf.length;
          idx += decoded.records.length;
        } else {
          const loaded = await this.loadClosed(seg);
          for (let k = from; k < seg.count && out.length < maxRecords; k++) {
            const frameBytes = (loaded.offsets[k + 1] ?? seg.bytes) - loaded.offsets[k]!;
            if (bytes + frameBytes > maxBytes && out.length > 0) return out;
            out.push(loaded.records[k]!);
            bytes += frameBytes;
            idx += 1;
          }
        }
      }
      return out;
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Appending

  /**
   * Appends records whose idx continue the log without a gap (a broken sequence is a bug and throws an
   * AssertionError). Resolves once they are fsynced, together with whatever else was queued in the same
   * tick. Rejects with PAYLOAD_TOO_LARGE for a record over MAX_RECORD_BYTES, with DISK_FULL when the
   * disk is full (nothing of it is left on disk; a later append retries), and with the same error when
   * an append queued before it failed.
   */
  async append(records: readonly R[]): Promise<void> {
    // No await before the record joins the queue: appends are queued in call order.
    this.assertUsable();
    if (records.length === 0) return;
    const frames: Buffer[] = [];
    let bytes = 0;
    let expected = this.nextIdxQueued;
    for (const record of records) {
      assert.ok(Number.isSafeInteger(record.idx) && Number.isFinite(record.term), `a log record needs an integer idx and a numeric term, got idx ${record.idx}, term ${record.term}`);
      assert.equal(record.idx, expected, `log idx must be contiguous: appending idx ${record.idx} where idx ${expected} is next`);
      expected += 1;
      const frame = encodeRecord(record);
      if (frame.length - FRAME_HEADER_BYTES > MAX_RECORD_BYTES) {
        throw new ShoalError(
          'PAYLOAD_TOO_LARGE',
          `log record idx ${record.idx} is ${frame.length - FRAME_HEADER_BYTES} bytes encoded; the event log accepts at most ${MAX_RECORD_BYTES} bytes (4 MiB) per record`,
        );
      }
      frames.push(frame);
      bytes += frame.length;
    }
    const { promise, resolve, reject } = Promise.withResolvers<void>();
    const entry: AppendEntry<R> = { records, frames, bytes, resolve, reject };
    const tail = this.ops.at(-1);
    if (tail?.kind === 'append' && tail.bytes + bytes <= MAX_BATCH_BYTES) {
      tail.entries.push(entry);
      tail.bytes += bytes;
      tail.lastIdx = expected - 1;
    } else {
      this.ops.push({ kind: 'append', entries: [entry], bytes, lastIdx: expected - 1 });
    }
    this.nextIdxQueued = expected;
    this.kick();
    return promise;
  }

  /**
   * Durably removes every record after `idx` (a follower cutting a conflicting suffix), across segment
   * boundaries and into compressed segments. Snapshots past `idx` describe discarded records and are
   * deleted too.
   */
  async truncateAfter(idx: number): Promise<void> {
    assert.ok(Number.isSafeInteger(idx) && idx >= 0, `truncateAfter needs an integer idx >= 0, got ${idx}`);
    return this.enqueueTask({ truncateAfter: idx }, () => this.doTruncateAfter(idx));
  }

  /**
   * Durably discards every record and continues the log at `idx + 1`: for a follower that installed a
   * snapshot at `idx` (save it first) and takes the tail after it. Snapshots past `idx` are deleted.
   */
  async resetAfter(idx: number): Promise<void> {
    assert.ok(Number.isSafeInteger(idx) && idx >= 0, `resetAfter needs an integer idx >= 0, got ${idx}`);
    return this.enqueueTask({ resetAfter: idx }, () => this.lock.exclusive(() => this.doReset(idx)));
  }

  /**
   * Deletes every whole segment whose records all lie below `idx`; `idx` may not exceed the newest saved
   * snapshot's idx. The active segment is always kept. Resolves to the number of records removed.
   */
  async compactBefore(idx: number): Promise<number> {
    const newest = this.snapshotIdxs.at(-1);
    assert.ok(newest !== undefined && idx <= newest, `compactBefore(${idx}) needs a saved snapshot at idx >= ${idx} (newest: ${newest ?? 'none'})`);
    return this.enqueueTask(null, () =>
      this.lock.exclusive(async () => {
        let removed = 0;
        // Oldest first, so a crash part-way leaves a shorter but gap-free log.
        while (this.segments.length > 1) {
          const seg = this.segments[0]!;
          if (seg === this.active.seg || seg.firstIdx + seg.count - 1 >= idx) break;
          await this.guard('maintenance', () => unlink(join(this.dir, segmentFile(seg))));
          this.segments.shift();
          removed += seg.count;
          if (this.cache?.seg === seg) this.cache = null;
        }
        if (removed > 0) {
          await this.guard('maintenance', () => fsyncDir(this.dir));
          this.log.info({ dir: this.dir, removed, firstIdx: this.firstIdx() }, 'event log: compacted segments covered by a snapshot');
        }
        return removed;
      }),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Snapshots and term

  /**
   * Writes `snapshot-<idx>.msgpack` atomically (tmp, fsync, rename, fsync dir), then deletes all but the
   * newest SNAPSHOTS_KEPT (by idx). Not queued behind appends.
   */
  async saveSnapshot(snapshot: Snapshot<S>): Promise<void> {
    assert.ok(Number.isSafeInteger(snapshot.idx) && snapshot.idx >= 0, `a snapshot needs an integer idx >= 0, got ${snapshot.idx}`);
    this.assertUsable();
    return this.onSideChain(async () => {
      const frame = encodeSnapshot(snapshot);
      await this.guard('snapshot', () => writeSnapshotFile(this.dir, snapshot.idx, frame));
      this.healthTracker.clear('snapshot');
      this.snapshotIdxs = [...new Set([...this.snapshotIdxs, snapshot.idx])].sort((a, b) => a - b);
      while (this.snapshotIdxs.length > SNAPSHOTS_KEPT) await this.deleteSnapshot(this.snapshotIdxs[0]!);
    });
  }

  /**
   * The newest readable snapshot, or null when there is none. A damaged newest snapshot is skipped
   * (and logged) when the older one plus the log still cover everything; otherwise LOG_CORRUPT.
   */
  async loadSnapshot(): Promise<Snapshot<S> | null> {
    this.assertUsable();
    const candidates = [...this.snapshotIdxs].reverse();
    let damaged: { file: string; reason: string } | null = null;
    for (const idx of candidates) {
      const read = await readSnapshotFile<S>(this.dir, idx);
      if (read === null) continue;
      if ('damaged' in read) {
        const file = snapshotFile(idx);
        this.log.error({ dir: this.dir, file, reason: read.damaged }, 'event log: snapshot file is damaged; trying an older one');
        damaged ??= { file, reason: read.damaged };
        continue;
      }
      if (damaged !== null && !this.coversAfter(read.snapshot.idx)) break;
      return read.snapshot;
    }
    if (damaged === null) return null;
    if (this.coversAfter(0)) return null;
    throw logCorrupt(this.dir, damaged.file, '0', `${damaged.reason}, and the log no longer holds the records it covered`);
  }

  /** Persists the current term atomically (the election persists it before sending anything in it). */
  async saveTerm(term: number): Promise<void> {
    assert.ok(Number.isSafeInteger(term) && term >= 0, `term must be an integer >= 0, got ${term}`);
    this.assertUsable();
    return this.onSideChain(async () => {
      await this.guard('term', () => writeTermFile(this.dir, term));
      this.healthTracker.clear('term');
    });
  }

  /** The persisted term; 0 when none was ever saved. */
  async loadTerm(): Promise<number> {
    this.assertUsable();
    return readTermFile(this.dir);
  }

  // ---------------------------------------------------------------------------------------------
  // Closing

  /** Resolves once the background compression of closed segments queued so far has finished. */
  async backgroundIdle(): Promise<void> {
    await this.compressing;
  }

  /** Waits for queued appends, background compression and snapshot writes, then closes the files. */
  close(): Promise<void> {
    if (this.closing === null) {
      const queued = this.enqueueTask(null, async () => {
        this.closed = true;
      }, true);
      this.closing = (async () => {
        await queued;
        await this.compressing;
        await this.sideChain;
        await this.lock.exclusive(() => this.active.fh.close()).catch(() => {}); // already closed if broken
      })();
    }
    return this.closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  // ---------------------------------------------------------------------------------------------
  // The write queue

  /** Misuse (after close) is a bug and throws; a store left broken by a failed truncation throws its error. */
  private assertUsable(): void {
    assert.ok(!this.closed && this.closing === null, `the event log in ${this.dir} is closed`);
    if (this.broken !== null) throw this.broken;
  }

  private enqueueTask<T>(effect: { truncateAfter: number } | { resetAfter: number } | null, run: () => Promise<T>, closing = false): Promise<T> {
    if (!closing) this.assertUsable();
    const { promise, resolve, reject } = Promise.withResolvers<T>();
    this.ops.push({ kind: 'task', effect, run: async () => resolve(await run()), reject });
    this.applyEffect(effect);
    this.kick();
    return promise;
  }

  private applyEffect(effect: { truncateAfter: number } | { resetAfter: number } | null): void {
    if (effect === null) return;
    if ('truncateAfter' in effect) this.nextIdxQueued = Math.min(this.nextIdxQueued, effect.truncateAfter + 1);
    else this.nextIdxQueued = effect.resetAfter + 1;
  }

  private kick(): void {
    if (this.draining) return;
    this.draining = true;
    // setImmediate: every append issued in this turn of the event loop joins the first batch.
    setImmediate(() => void this.drain());
  }

  private async drain(): Promise<void> {
    while (this.ops.length > 0) {
      const op = this.ops.shift()!;
      if (op.kind === 'append') await this.writeBatch(op);
      else await op.run().catch(op.reject);
    }
    this.draining = false;
  }

  private async writeBatch(op: Extract<Op<R>, { kind: 'append' }>): Promise<void> {
    const firstIdx = op.entries[0]!.records[0]!.idx;
    assert.equal(firstIdx, this.lastIdx() + 1, 'a queued append does not continue the durable log');
    try {
      if (this.needsRepair) await this.repair();
      if (this.active.seg.bytes >= this.maxSegmentBytes && this.active.seg.count > 0) await this.rotate();
      const { seg, fh, offsets } = this.active;
      const frames = op.entries.flatMap((entry) => entry.frames);
      const buf = frames.length === 1 ? frames[0]! : Buffer.concat(frames, op.bytes);
      try {
        let written = 0;
        while (written < buf.length) {
          const { bytesWritten } = await fh.write(buf, written, buf.length - written, seg.bytes + written);
          written += bytesWritten;
        }
        await fh.datasync();
      } catch (error) {
        // Never leave a half-written frame as the tail: cut the file back to its last good length
        // (and if even that fails, before anything else is written).
        this.needsRepair = true;
        await this.repair().catch(() => {});
        throw error;
      }
      this.onFsync?.();
      let pos = seg.bytes;
      for (const frame of frames) {
        offsets.push(pos);
        pos += frame.length;
      }
      seg.bytes = pos;
      seg.count += frames.length;
      this.last = op.entries.at(-1)!.records.at(-1)!;
      this.healthTracker.clear('append');
      for (const entry of op.entries) entry.resolve();
    } catch (error) {
      const failure = this.healthTracker.failure('append', error);
      for (const entry of op.entries) entry.reject(failure);
      // Every append still queued was issued on top of this one: fail them too, then recompute the
      // next idx from what is durable plus the truncations still queued.
      for (let i = this.ops.length - 1; i >= 0; i--) {
        const queued = this.ops[i]!;
        if (queued.kind !== 'append') continue;
        for (const entry of queued.entries) entry.reject(failure);
        this.ops.splice(i, 1);
      }
      this.nextIdxQueued = this.lastIdx() + 1;
      for (const queued of this.ops) if (queued.kind === 'task') this.applyEffect(queued.effect);
    }
  }

  private async repair(): Promise<void> {
    await this.active.fh.truncate(this.active.seg.bytes);
    await this.active.fh.datasync();
    this.needsRepair = false;
  }

  /** Closes the active segment (it is full) and starts the next; the closed one is compressed later. */
  private async rotate(): Promise<void> {
    await this.lock.exclusive(async () => {
      const seg: Segment = { firstIdx: this.lastIdx() + 1, count: 0, bytes: 0, compressed: false };
      const fh = await open(join(this.dir, segmentFile(seg)), 'w+', LOG_FILE_MODE);
      try {
        await fsyncDir(this.dir);
      } catch (error) {
        await fh.close().catch(() => {});
        throw error;
      }
      const old = this.active;
      this.segments.push(seg);
      this.active = { seg, fh, offsets: [] };
      await old.fh.close();
      this.scheduleCompression(old.seg);
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Structural changes (run from the write queue)

  private async doTruncateAfter(idx: number): Promise<void> {
    if (idx >= this.lastIdx()) return;
    const first = this.firstIdx();
    if (first === null || idx < first) {
      await this.lock.exclusive(() => this.doReset(idx));
      return;
    }
    await this.lock.exclusive(async () => {
      const at = this.segments.findIndex((s) => s.count > 0 && idx >= s.firstIdx && idx < s.firstIdx + s.count);
      assert.ok(at >= 0, `no segment holds idx ${idx}`);
      const seg = this.segments[at]!;
      const keep = idx - seg.firstIdx + 1;

      if (seg === this.active.seg) {
        const keepBytes = this.active.offsets[keep] ?? seg.bytes;
        await this.guard('maintenance', () => this.active.fh.truncate(keepBytes));
        // From here memory follows the disk; a failed fsync is repaired before the next write.
        this.active.offsets.length = keep;
        seg.bytes = keepBytes;
        seg.count = keep;
        this.last = (await this.readUnlocked(idx)) ?? null;
        try {
          await this.active.fh.datasync();
        } catch (error) {
          this.needsRepair = true;
          throw this.healthTracker.failure('maintenance', error);
        }
        await this.deleteSnapshotsAfter(idx);
        this.log.info({ dir: this.dir, lastIdx: idx }, 'event log: truncated after idx');
        return;
      }

      // The kept records end inside a closed segment, which becomes the active one again. First the step
      // that needs disk space, so a full disk changes nothing: the uncompressed prefix of a .gz segment.
      const loaded = await this.loadClosed(seg);
      const keepBytes = loaded.offsets[keep] ?? seg.bytes;
      const offsets = loaded.offsets.slice(0, keep);
      const lastKept = loaded.records[keep - 1]!;
      const plainPath = join(this.dir, segmentFile({ firstIdx: seg.firstIdx, compressed: false }));
      if (seg.compressed) {
        const bytes = await readSegmentBytes(this.dir, seg);
        await this.guard('maintenance', () => writeFileSynced(`${plainPath}.tmp`, bytes.subarray(0, keepBytes)));
      }
      await this.mutate(async () => {
        // Later segments go first, newest first, so a crash part-way leaves a shorter but gap-free log.
        while (this.segments.length > at + 1) {
          const doomed = this.segments.at(-1)!;
          if (doomed === this.active.seg) await this.active.fh.close();
          await unlink(join(this.dir, segmentFile(doomed)));
          this.segments.pop();
        }
        await fsyncDir(this.dir);
        if (seg.compressed) {
          await rename(`${plainPath}.tmp`, plainPath);
          await fsyncDir(this.dir);
          await unlink(join(this.dir, segmentFile(seg)));
          seg.compressed = false;
          await fsyncDir(this.dir);
        }
        const fh = await open(plainPath, 'r+');
        await fh.truncate(keepBytes);
        await fh.datasync();
        seg.bytes = keepBytes;
        seg.count = keep;
        this.active = { seg, fh, offsets };
        this.last = lastKept;
        this.cache = null;
      });
      await this.deleteSnapshotsAfter(idx);
      this.log.info({ dir: this.dir, lastIdx: idx }, 'event log: truncated after idx');
    });
  }

  /** Deletes every segment and starts an empty one at `idx + 1`. Runs under the exclusive lock. */
  private async doReset(idx: number): Promise<void> {
    await this.mutate(async () => {
      for (let i = this.segments.length - 1; i >= 0; i--) {
        const doomed = this.segments[i]!;
        if (doomed === this.active.seg) await this.active.fh.close();
        await unlink(join(this.dir, segmentFile(doomed)));
        this.segments.pop();
      }
      this.cache = null;
      const seg: Segment = { firstIdx: idx + 1, count: 0, bytes: 0, compressed: false };
      const fh = await open(join(this.dir, segmentFile(seg)), 'w+', LOG_FILE_MODE);
      this.segments.push(seg);
      this.active = { seg, fh, offsets: [] };
      this.last = null;
      await fsyncDir(this.dir);
    });
    await this.deleteSnapshotsAfter(idx);
    this.log.info({ dir: this.dir, nextIdx: idx + 1 }, 'event log: reset; the log continues after idx');
  }

  /**
   * Runs a multi-step change of the files. If it fails part-way, the files are still a valid log (every
   * step is ordered for that) but this object no longer matches them: it refuses further use, and
   * reopening the directory recovers.
   */
  private async mutate(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (error) {
      const failure = this.healthTracker.failure('maintenance', error);
      const detail = errorMessage(failure);
      this.broken = new ShoalError('INTERNAL', `the event log in ${this.dir} stopped part-way through a change (${detail}); restart the node to reopen and recover it`, { cause: error });
      this.healthTracker.set('maintenance', this.broken.message, `restart the node; the log in ${this.dir} recovers when reopened`);
      throw this.broken;
    }
  }

  private async deleteSnapshotsAfter(idx: number): Promise<void> {
    for (const snapshotIdx of [...this.snapshotIdxs]) if (snapshotIdx > idx) await this.deleteSnapshot(snapshotIdx);
  }

  private async deleteSnapshot(idx: number): Promise<void> {
    await deleteSnapshotFile(this.dir, idx);
    this.snapshotIdxs = this.snapshotIdxs.filter((i) => i !== idx);
  }

  private async readUnlocked(idx: number): Promise<R | undefined> {
    const seg = this.segments.find((s) => s.count > 0 && idx >= s.firstIdx && idx < s.firstIdx + s.count);
    if (seg === undefined) return undefined;
    const k = idx - seg.firstIdx;
    if (seg === this.active.seg) {
      const start = this.active.offsets[k]!;
      const end = this.active.offsets[k + 1] ?? seg.bytes;
      const buf = Buffer.allocUnsafe(end - start);
      await this.active.fh.read(buf, 0, buf.length, start);
      return decodeRecords<R>(buf).records[0];
    }
    return (await this.loadClosed(seg)).records[k];
  }

  /** Records and frame offsets of a closed segment (one decoded segment is cached). */
  private async loadClosed(seg: Segment): Promise<{ records: R[]; offsets: number[] }> {
    if (this.cache?.seg === seg && this.cache.count === seg.count) return this.cache;
    const bytes = await readSegmentBytes(this.dir, seg);
    const decoded = decodeRecords<R>(bytes.subarray(0, seg.bytes));
    if (decoded.tail !== 'clean' || decoded.records.length !== seg.count) {
      throw logCorrupt(this.dir, segmentFile(seg), String(decoded.corruptAt ?? decoded.validBytes), `${decoded.reason ?? 'records missing'} (the file changed on disk after the log was opened)`);
    }
    this.cache = { seg, count: seg.count, records: decoded.records, offsets: decoded.offsets };
    return this.cache;
  }

  // ---------------------------------------------------------------------------------------------
  // Background compression

  private scheduleCompression(seg: Segment): void {
    if (!this.compressClosed) return;
    this.compressing = this.compressing.then(() => this.compress(seg));
  }

  private async compress(seg: Segment): Promise<void> {
    const stillClosed = (): boolean => !this.closed && this.segments.includes(seg) && seg !== this.active.seg && !seg.compressed;
    if (!stillClosed()) return;
    const plainName = segmentFile(seg);
    try {
      await compressSegment(this.dir, seg, this.lock, stillClosed);
    } catch (error) {
      if (!this.segments.includes(seg)) return;
      this.log.warn({ dir: this.dir, file: plainName, err: error }, 'event log: could not compress a closed segment; it stays uncompressed');
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Failures and health

  private onSideChain<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.sideChain.then(fn);
    this.sideChain = result.then(
      () => {},
      () => {},
    );
    return result;
  }

  /** Runs `fn`; a disk-full (or other I/O) failure marks the store degraded and becomes a ShoalError. */
  private async guard<T>(source: DegradedSource, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw this.healthTracker.failure(source, error);
    }
  }

  /** Whether the log holds every record after `idx` (nothing between was compacted away). */
  private coversAfter(idx: number): boolean {
    const first = this.firstIdx();
    return first === null ? this.lastIdx() <= idx : first <= idx + 1;
  }
}
