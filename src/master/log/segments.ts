// Segment files: `log-<firstIdx>.seg`, closed ones gzipped to `.seg.gz`, each a run of CRC-framed
// records (codec.ts).

import { open, readFile, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gunzip as gunzipCb } from 'node:zlib';
import { fsyncDir } from '../../common/durable-fs.js';
import { logCorrupt, padIdx, writeAtomic } from './files.js';
import type { LogRecordBase } from './types.js';
import { errorMessage } from '../../common/errors.js';

const gunzip = promisify(gunzipCb);

export const SEGMENT_NAME = /^log-(\d{20})\.seg(\.gz)?$/;

export interface Segment {
  /** The idx its name carries: its first record's idx (or the next idx to append, while empty). */
  firstIdx: number;
  /** Durable records. */
  count: number;
  /** Durable bytes of frames (uncompressed). */
  bytes: number;
  compressed: boolean;
}

export interface Active {
  seg: Segment;
  fh: FileHandle;
  /** Byte offset of each durable record's frame. */
  offsets: number[];
}

export function segmentFile(seg: { firstIdx: number; compressed: boolean }): string {
  return `log-${padIdx(seg.firstIdx)}.seg${seg.compressed ? '.gz' : ''}`;
}

export function isRecordLike(value: unknown): value is LogRecordBase & Record<string, unknown> {
  return typeof value === 'object' && value !== null && typeof (value as LogRecordBase).idx === 'number' && typeof (value as LogRecordBase).term === 'number';
}

/** A segment's frames, decompressed when it is gzipped. */
export async function readSegmentBytes(dir: string, seg: Segment): Promise<Buffer> {
  const file = segmentFile(seg);
  const raw = await readFile(join(dir, file));
  if (!seg.compressed) return raw;
  try {
    return await gunzip(raw);
  } catch (error) {
    throw logCorrupt(dir, file, '0', `not a readable gzip file (${errorMessage(error)})`);
  }
}

/** Opens `seg` for appending with `keepBytes` of it: a compressed segment is written back uncompressed. */
export async function makeActive(dir: string, seg: Segment, keepBytes: number, offsets: number[]): Promise<Active> {
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
