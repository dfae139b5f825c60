import assert from 'node:assert/strict';
import { mkdir, open, readdir, readFile, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip as gunzipCb, gzip as gzipCb } from 'node:zlib';
import { ShoalError } from '../../common/errors.js';
import { decodeRecords, encodeRecord, FRAME_HEADER_BYTES, MAX_RECORD_BYTES } from './codec.js';

export { MAX_RECORD_BYTES } from './codec.js';

const gzip = promisify(gzipCb);
const gunzip = promisify(gunzipCb);

/** A segment is closed (and compressed) once it holds at least this many bytes (checked before each batch, so a segment can end up to one batch larger). */
export const DEFAULT_MAX_SEGMENT_BYTES = 16 * 1024 * 1024;
/** Appends queued together are written in one write+fsync of at most about this many bytes. */
export const MAX_BATCH_BYTES = 4 * 1024 * 1024;
/** Largest snapshot file payload accepted when reading one back. */
export const MAX_SNAPSHOT_BYTES = 1024 * 1024 * 1024;
/** How many snapshot files are kept; older ones are deleted after a new one is saved. */
export const SNAPSHOTS_KEPT = 2;

/** What the store needs to know about a record; everything else is opaque, msgpack-serializable data. */
export interface LogRecordBase {
  idx: number;
  term: number;
}

export interface Snapshot<S = unknown> {
  idx: number;
  term: number;
  hash: string;
  state: S;
}

export type LogHealth = { level: 'ok' } | { level: 'degraded'; reason: string; remediation: string };

/** Structurally compatible with a pino Logger. */
export interface LogStoreLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface LogStoreOptions {
  /** Close the active segment once it holds at least this many bytes. Default 16 MiB. */
  maxSegmentBytes?: number;
  /** Gzip closed segments in the background. Default true. */
  compressClosedSegments?: boolean;
  log?: LogStoreLogger;
  /** Called after every fsync of appended log data (observation only: tests count group commits). */
  onFsync?: () => void;
  onHealthChange?: (health: LogHealth) => void;
}

/** What `open` found and repaired. */
export interface RecoveryReport {
  segments: number;
  records: number;
  /** The torn tail cut from the last segment, if any. */
  truncated: { file: string; offset: number; bytes: number; reason: string } | null;
  /** Leftover temporary files (interrupted compressions or snapshot writes) that were deleted. */
  removedFiles: string[];
}

interface Segment {
  /** The idx its name carries: its first record's idx (or the next idx to append, while empty). */
  firstIdx: number;
  /** Durable records. */
  count: number;
  /** Durable bytes of frames (uncompressed). */
  bytes: number;
  compressed: boolean;
}

interface Active {
  seg: Segment;
  fh: FileHandle;
  /** Byte offset of each durable record's frame. */
  offsets: number[];
}

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

type DegradedSource = 'append' | 'snapshot' | 'term' | 'maintenance';

const SEGMENT_NAME = /^log-(\d{20})\.seg(\.gz)?$/;
const SNAPSHOT_NAME = /^snapshot-(\d{20})\.msgpack$/;
const TERM_FILE = 'term';

function pad(idx: number): string {
  return String(idx).padStart(20, '0');
}

function segmentFile(seg: { firstIdx: number; compressed: boolean }): string {
  return `log-${pad(seg.firstIdx)}.seg${seg.compressed ? '.gz' : ''}`;
}

function snapshotFile(idx: number): string {
  return `snapshot-${pad(idx)}.msgpack`;
}

function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}

const noopLogger: LogStoreLogger = { info: () => {}, warn: () => {}, error: () => {} };

/** A readers-writer lock: reads run together; structural changes (rotation, truncation, compaction) run alone. */
class RwLock {
  private readers = 0;
  private writer = false;
  private readonly waiting: { exclusive: boolean; grant: () => void }[] = [];

  async shared<T>(fn: () => Promise<T>): Promise<T> {
    if (this.writer || this.waiting.length > 0) await new Promise<void>((grant) => this.waiting.push({ exclusive: false, grant }));
    else this.readers += 1;
    try {
      return await fn();
    } finally {
      this.readers -= 1;
      this.pump();
    }
  }

  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.writer || this.readers > 0 || this.waiting.length > 0) await new Promise<void>((grant) => this.waiting.push({ exclusive: true, grant }));
    else this.writer = true;
    try {
      return await fn();
    } finally {
      this.writer = false;
      this.pump();
    }
  }

  private pump(): void {
    while (this.waiting.length > 0 && !this.writer) {
      const next = this.waiting[0]!;
      if (next.exclusive) {
        if (this.readers > 0) return;
        this.waiting.shift();
        this.writer = true;
        next.grant();
        return;
      }
      this.waiting.shift();
      this.readers += 1;
      next.grant();
    }
  }
}

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
  private readonly onHealthChange: ((health: LogHealth) => void) | undefined;

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
  private readonly degraded = new Map<DegradedSource, { reason: string; remediation: string }>();
  private cache: { seg: Segment; count: number; records: R[]; offsets: number[] } | null = null;
  private compressing: Promise<void> = Promise.resolve();
  private sideChain: Promise<void> = Promise.resolve();
  private closed = false;
  private closing: Promise<void> | null = null;
  private broken: ShoalError | null = null;

  private constructor(
    dir: string,
    options: LogStoreOptions,
    state: { segments: Segment[]; active: Active; last: R | null; snapshotIdxs: number[]; recovery: RecoveryReport },
  ) {
    this.dir = dir;
    this.maxSegmentBytes = options.maxSegmentBytes ?? DEFAULT_MAX_SEGMENT_BYTES;
    this.compressClosed = options.compressClosedSegments ?? true;
    this.log = options.log ?? noopLogger;
    this.onFsync = options.onFsync;
    this.onHealthChange = options.onHealthChange;
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
    await mkdir(dir, { recursive: true });
    const recovery: RecoveryReport = { segments: 0, records: 0, truncated: null, removedFiles: [] };

    const names = await readdir(dir);
    const plain = new Set<number>();
    const gz = new Set<number>();
    const snapshotIdxs: number[] = [];
    for (const name of names) {
      if (name.endsWith('.tmp')) {
        await unlink(join(dir, name));
        recovery.removedFiles.push(name);
        continue;
      }
      const seg = SEGMENT_NAME.exec(name);
      if (seg) {
        (seg[2] ? gz : plain).add(Number(seg[1]));
        continue;
      }
      const snap = SNAPSHOT_NAME.exec(name);
      if (snap) snapshotIdxs.push(Number(snap[1]));
    }
    // Both forms of one segment: a compression or decompression was interrupted after its rename. The
    // plain file is either identical (compression) or the truncated, newer one (truncateAfter).
    for (const idx of gz) {
      if (!plain.has(idx)) continue;
      const name = segmentFile({ firstIdx: idx, compressed: true });
      await unlink(join(dir, name));
      recovery.removedFiles.push(name);
      gz.delete(idx);
    }
    snapshotIdxs.sort((a, b) => a - b);
    const segments: Segment[] = [...plain].map((firstIdx) => ({ firstIdx, count: 0, bytes: 0, compressed: false }));
    for (const firstIdx of gz) segments.push({ firstIdx, count: 0, bytes: 0, compressed: true });
    segments.sort((a, b) => a.firstIdx - b.firstIdx);

    let last: R | null = null;
    let lastRecords: { records: R[]; offsets: number[] } | null = null;
    for (let i = 0; i < segments.length; i++) {
      const seg = segments[i]!;
      const file = segmentFile(seg);
      const isLast = i === segments.length - 1;
      const bytes = await readSegmentBytes(dir, seg);
      const decoded = decodeRecords<R>(bytes);
      const where = seg.compressed ? ' of its decompressed contents' : '';
      if (decoded.tail === 'corrupt' || (decoded.tail === 'torn' && !isLast)) {
        throw logCorrupt(dir, file, `${decoded.corruptAt ?? 0}${where}`, decoded.tail === 'torn' ? `${decoded.reason ?? 'bad frame'} at the end of a closed segment` : (decoded.reason ?? 'bad frame'));
      }
      decoded.records.forEach((record, k) => {
        if (!isRecordLike(record) || record.idx !== seg.firstIdx + k) {
          const got = isRecordLike(record) ? `idx ${record.idx}` : 'a value without a numeric idx and term';
          throw logCorrupt(dir, file, `${decoded.offsets[k] ?? 0}${where}`, `found ${got} where idx ${seg.firstIdx + k} belongs`);
        }
      });
      const next = segments[i + 1];
      if (next !== undefined && next.firstIdx !== seg.firstIdx + decoded.records.length) {
        throw logCorrupt(dir, segmentFile(next), '0', `the previous segment ${file} ends at idx ${seg.firstIdx + decoded.records.length - 1}, so this one should start at idx ${seg.firstIdx + decoded.records.length}`);
      }
      seg.count = decoded.records.length;
      seg.bytes = decoded.validBytes;
      last = decoded.records.at(-1) ?? last;
      recovery.records += seg.count;
      if (isLast) {
        lastRecords = { records: decoded.records, offsets: decoded.offsets };
        if (decoded.tail === 'torn') {
          recovery.truncated = { file, offset: decoded.validBytes, bytes: bytes.length - decoded.validBytes, reason: decoded.reason ?? 'bad frame' };
          log.warn({ dir, ...recovery.truncated }, 'event log: cut a torn tail off the last segment (an append interrupted by a crash or power loss; it was never acknowledged)');
        }
      }
    }

    let active: Active;
    if (segments.length === 0) {
      // A fresh log continues after the newest snapshot, if there is one.
      const seg: Segment = { firstIdx: (snapshotIdxs.at(-1) ?? 0) + 1, count: 0, bytes: 0, compressed: false };
      segments.push(seg);
      const fh = await open(join(dir, segmentFile(seg)), 'w+');
      await fsyncDir(dir);
      active = { seg, fh, offsets: [] };
    } else {
      const seg = segments.at(-1)!;
      active = await makeActive(dir, seg, seg.bytes, lastRecords?.offsets ?? []);
    }
    recovery.segments = segments.length;

    const store = new LogStore<R, S>(dir, options, { segments, active, last, snapshotIdxs, recovery });
    for (const seg of segments) if (seg !== active.seg && !seg.compressed) store.scheduleCompression(seg);
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
    for (const value of this.degraded.values()) return { level: 'degraded', ...value };
    return { level: 'ok' };
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
    const { promise, resolve, reject } = withResolvers<void>();
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
      // Everything the caller's snapshot carries is kept (the core's adds its state hash, term runs and
      // command memory): dropping them made every node that held a snapshot refuse to restart.
      const frame = encodeRecord({ ...snapshot });
      await this.guard('snapshot', () => writeAtomic(this.dir, snapshotFile(snapshot.idx), frame));
      this.degradedClear('snapshot');
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
      const file = snapshotFile(idx);
      let snapshot: Snapshot<S> | null = null;
      let reason = '';
      try {
        const decoded = decodeRecords<Snapshot<S>>(await readFile(join(this.dir, file)), { maxPayloadBytes: MAX_SNAPSHOT_BYTES });
        const value = decoded.records[0];
        if (decoded.tail !== 'clean' || decoded.records.length !== 1) reason = decoded.reason ?? 'expected exactly one record';
        else if (!isRecordLike(value) || value.idx !== idx || typeof value.hash !== 'string') reason = 'not a snapshot record for this idx';
        else snapshot = value;
      } catch (error) {
        if (errnoCode(error) === 'ENOENT') continue;
        throw error;
      }
      if (snapshot === null) {
        this.log.error({ dir: this.dir, file, reason }, 'event log: snapshot file is damaged; trying an older one');
        damaged ??= { file, reason };
        continue;
      }
      if (damaged !== null && !this.coversAfter(snapshot.idx)) break;
      return snapshot;
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
      await this.guard('term', () => writeAtomic(this.dir, TERM_FILE, encodeRecord({ term })));
      this.degradedClear('term');
    });
  }

  /** The persisted term; 0 when none was ever saved. */
  async loadTerm(): Promise<number> {
    this.assertUsable();
    let bytes: Buffer;
    try {
      bytes = await readFile(join(this.dir, TERM_FILE));
    } catch (error) {
      if (errnoCode(error) === 'ENOENT') return 0;
      throw error;
    }
    const decoded = decodeRecords<{ term: unknown }>(bytes);
    const term = decoded.records[0]?.term;
    if (decoded.tail !== 'clean' || decoded.records.length !== 1 || typeof term !== 'number' || !Number.isSafeInteger(term)) {
      throw logCorrupt(this.dir, TERM_FILE, String(decoded.corruptAt ?? 0), decoded.reason ?? 'not a term record');
    }
    return term;
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
    const { promise, resolve, reject } = withResolvers<T>();
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
      this.degradedClear('append');
      for (const entry of op.entries) entry.resolve();
    } catch (error) {
      const failure = this.failure('append', error);
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
      const fh = await open(join(this.dir, segmentFile(seg)), 'w+');
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
          throw this.failure('maintenance', error);
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
      const fh = await open(join(this.dir, segmentFile(seg)), 'w+');
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
      const failure = this.failure('maintenance', error);
      const detail = failure instanceof Error ? failure.message : String(failure);
      this.broken = new ShoalError('INTERNAL', `the event log in ${this.dir} stopped part-way through a change (${detail}); restart the node to reopen and recover it`, { cause: error });
      this.degradedSet('maintenance', this.broken.message, `restart the node; the log in ${this.dir} recovers when reopened`);
      throw this.broken;
    }
  }

  private async deleteSnapshotsAfter(idx: number): Promise<void> {
    for (const snapshotIdx of [...this.snapshotIdxs]) if (snapshotIdx > idx) await this.deleteSnapshot(snapshotIdx);
  }

  private async deleteSnapshot(idx: number): Promise<void> {
    await unlink(join(this.dir, snapshotFile(idx))).catch((error: unknown) => {
      if (errnoCode(error) !== 'ENOENT') throw error;
    });
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
    const gzName = segmentFile({ firstIdx: seg.firstIdx, compressed: true });
    const tmpName = `${gzName}.tmp`;
    try {
      const bytes = await readFile(join(this.dir, plainName));
      if (!stillClosed() || bytes.length !== seg.bytes) return;
      const packed = await gzip(bytes);
      if (!stillClosed()) return;
      await writeFileSynced(join(this.dir, tmpName), packed);
      await this.lock.exclusive(async () => {
        if (!stillClosed() || seg.bytes !== bytes.length) {
          await unlink(join(this.dir, tmpName));
          return;
        }
        await rename(join(this.dir, tmpName), join(this.dir, gzName));
        await fsyncDir(this.dir);
        seg.compressed = true;
        await unlink(join(this.dir, plainName));
        await fsyncDir(this.dir);
      });
    } catch (error) {
      await unlink(join(this.dir, tmpName)).catch(() => {});
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
      throw this.failure(source, error);
    }
  }

  private failure(source: DegradedSource, error: unknown): unknown {
    if (error instanceof ShoalError || error instanceof assert.AssertionError) return error;
    const code = errnoCode(error);
    const detail = error instanceof Error ? error.message : String(error);
    if (code === 'ENOSPC' || code === 'EDQUOT') {
      const reason = `the event log in ${this.dir} cannot be persisted: the disk is full (${code}, during ${source})`;
      const remediation = `free space on the filesystem holding ${this.dir}; this node will not persist new events until then, and retries on the next write`;
      this.degradedSet(source, reason, remediation);
      return new ShoalError('DISK_FULL', `${reason}; ${remediation}`, { cause: error });
    }
    const reason = `the event log in ${this.dir} cannot be persisted: ${detail}`;
    const remediation = `check the disk holding ${this.dir} (permissions, kernel log); the next write retries`;
    this.degradedSet(source, reason, remediation);
    return new ShoalError('INTERNAL', `${reason}; ${remediation}`, { cause: error });
  }

  private degradedSet(source: DegradedSource, reason: string, remediation: string): void {
    const before = this.health().level;
    // Logged once per change of reason, not once per refused write while the disk stays full.
    if (this.degraded.get(source)?.reason !== reason) this.log.error({ dir: this.dir, source, remediation }, reason);
    this.degraded.set(source, { reason, remediation });
    if (before === 'ok') this.onHealthChange?.(this.health());
  }

  private degradedClear(source: DegradedSource): void {
    if (!this.degraded.delete(source)) return;
    const now = this.health();
    this.log.info({ dir: this.dir, source, health: now.level }, 'event log: writes succeed again');
    if (now.level === 'ok') this.onHealthChange?.(now);
  }

  /** Whether the log holds every record after `idx` (nothing between was compacted away). */
  private coversAfter(idx: number): boolean {
    const first = this.firstIdx();
    return first === null ? this.lastIdx() <= idx : first <= idx + 1;
  }
}

// -----------------------------------------------------------------------------------------------
// File helpers

function withResolvers<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (reason?: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (reason?: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

function isRecordLike(value: unknown): value is LogRecordBase & Record<string, unknown> {
  return typeof value === 'object' && value !== null && typeof (value as LogRecordBase).idx === 'number' && typeof (value as LogRecordBase).term === 'number';
}

function logCorrupt(dir: string, file: string, offset: string, detail: string): ShoalError {
  return new ShoalError(
    'LOG_CORRUPT',
    `the event log file ${join(dir, file)} is corrupt at byte ${offset}: ${detail}. The records after that point cannot be trusted, ` +
      `so this node will not start on this log. Move ${dir} aside (for example: mv ${dir} ${dir}.corrupt) to start this node with an empty log; ` +
      `it will catch up from the cluster.`,
  );
}

async function readSegmentBytes(dir: string, seg: Segment): Promise<Buffer> {
  const file = segmentFile(seg);
  const raw = await readFile(join(dir, file));
  if (!seg.compressed) return raw;
  try {
    return await gunzip(raw);
  } catch (error) {
    throw logCorrupt(dir, file, '0', `not a readable gzip file (${error instanceof Error ? error.message : String(error)})`);
  }
}

/** Opens `seg` for appending with `keepBytes` of it: a compressed segment is written back uncompressed. */
async function makeActive(dir: string, seg: Segment, keepBytes: number, offsets: number[]): Promise<Active> {
  if (seg.compressed) {
    const bytes = await readSegmentBytes(dir, seg);
    const plain = { firstIdx: seg.firstIdx, compressed: false };
    await writeAtomic(dir, segmentFile(plain), bytes.subarray(0, keepBytes));
    await unlink(join(dir, segmentFile(seg)));
    await fsyncDir(dir);
    seg.compressed = false;
  }
  const fh = await open(join(dir, segmentFile(seg)), 'r+');
  try {
    const { size } = await fh.stat();
    if (size !== keepBytes) {
      await fh.truncate(keepBytes);
      await fh.datasync();
    }
  } catch (error) {
    await fh.close().catch(() => {});
    throw error;
  }
  seg.bytes = keepBytes;
  return { seg, fh, offsets };
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function writeFileSynced(path: string, bytes: Uint8Array): Promise<void> {
  const fh = await open(path, 'w');
  try {
    let written = 0;
    while (written < bytes.length) {
      const { bytesWritten } = await fh.write(bytes, written, bytes.length - written, written);
      written += bytesWritten;
    }
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Writes `name` in `dir` atomically: tmp file, fsync, rename over, fsync the directory. */
async function writeAtomic(dir: string, name: string, bytes: Uint8Array): Promise<void> {
  const tmp = join(dir, `${name}.tmp`);
  try {
    await writeFileSynced(tmp, bytes);
    await rename(tmp, join(dir, name));
  } catch (error) {
    await unlink(tmp).catch(() => {});
    throw error;
  }
  await fsyncDir(dir);
}
