// Opening a log directory: every segment is read and checked, a torn tail of the last segment is cut
// off, damage anywhere else is LOG_CORRUPT, and leftovers of interrupted writes are deleted.

import { mkdir, open, readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from '../../common/durable-fs.js';
import { decodeRecords } from './codec.js';
import { LOG_DIR_MODE, LOG_FILE_MODE, logCorrupt } from './files.js';
import { isRecordLike, makeActive, readSegmentBytes, SEGMENT_NAME, segmentFile, type Active, type Segment } from './segments.js';
import { SNAPSHOT_NAME } from './snapshot-file.js';
import type { LogRecordBase, LogStoreLogger, RecoveryReport } from './types.js';

export interface Recovered<R> {
  segments: Segment[];
  /** The last segment, open for appending. */
  active: Active;
  last: R | null;
  /** The idx of every snapshot file, ascending. */
  snapshotIdxs: number[];
  recovery: RecoveryReport;
}

export async function recoverLog<R extends LogRecordBase>(dir: string, log: LogStoreLogger): Promise<Recovered<R>> {
  await mkdir(dir, { recursive: true, mode: LOG_DIR_MODE });
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
    const fh = await open(join(dir, segmentFile(seg)), 'w+', LOG_FILE_MODE);
    await fsyncDir(dir);
    active = { seg, fh, offsets: [] };
  } else {
    const seg = segments.at(-1)!;
    active = await makeActive(dir, seg, seg.bytes, lastRecords?.offsets ?? []);
  }
  recovery.segments = segments.length;
  return { segments, active, last, snapshotIdxs, recovery };
}
