// The snapshot files (`snapshot-<idx>.msgpack`) and the term file: each one CRC-framed record.

import { readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { decodeRecords, encodeRecord } from './codec.js';
import { errnoCode, logCorrupt, padIdx, writeAtomic } from './files.js';
import { isRecordLike } from './segments.js';
import type { Snapshot } from './types.js';

/** Largest snapshot file payload accepted when reading one back. */
export const MAX_SNAPSHOT_BYTES = 1024 * 1024 * 1024;

export const SNAPSHOT_NAME = /^snapshot-(\d{20})\.msgpack$/;
export const TERM_FILE = 'term';

export function snapshotFile(idx: number): string {
  return `snapshot-${padIdx(idx)}.msgpack`;
}

/** A snapshot as its file holds it: one frame. */
export function encodeSnapshot<S>(snapshot: Snapshot<S>): Buffer {
  // Everything the caller's snapshot carries is kept (the core's adds its state hash, term runs and
  // command memory): dropping them made every node that held a snapshot refuse to restart.
  return encodeRecord({ ...snapshot });
}

/** Writes `snapshot-<idx>.msgpack` atomically (tmp, fsync, rename, fsync dir). */
export async function writeSnapshotFile(dir: string, idx: number, frame: Uint8Array): Promise<void> {
  await writeAtomic(dir, snapshotFile(idx), frame);
}

/** The snapshot saved at `idx`; null when the file is gone, the reason when it is damaged. */
export async function readSnapshotFile<S>(dir: string, idx: number): Promise<{ snapshot: Snapshot<S> } | { damaged: string } | null> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dir, snapshotFile(idx)));
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return null;
    throw error;
  }
  const decoded = decodeRecords<Snapshot<S>>(bytes, { maxPayloadBytes: MAX_SNAPSHOT_BYTES });
  const value = decoded.records[0];
  if (decoded.tail !== 'clean' || decoded.records.length !== 1) return { damaged: decoded.reason ?? 'expected exactly one record' };
  if (!isRecordLike(value) || value.idx !== idx || typeof value.hash !== 'string') return { damaged: 'not a snapshot record for this idx' };
  return { snapshot: value };
}

export async function deleteSnapshotFile(dir: string, idx: number): Promise<void> {
  await unlink(join(dir, snapshotFile(idx))).catch((error: unknown) => {
    if (errnoCode(error) !== 'ENOENT') throw error;
  });
}

/** Persists the term atomically. */
export async function writeTermFile(dir: string, term: number): Promise<void> {
  await writeAtomic(dir, TERM_FILE, encodeRecord({ term }));
}

/** The persisted term; 0 when none was ever saved. */
export async function readTermFile(dir: string): Promise<number> {
  let bytes: Buffer;
  try {
    bytes = await readFile(join(dir, TERM_FILE));
  } catch (error) {
    if (errnoCode(error) === 'ENOENT') return 0;
    throw error;
  }
  const decoded = decodeRecords<{ term: unknown }>(bytes);
  const term = decoded.records[0]?.term;
  if (decoded.tail !== 'clean' || decoded.records.length !== 1 || typeof term !== 'number' || !Number.isSafeInteger(term)) {
    throw logCorrupt(dir, TERM_FILE, String(decoded.corruptAt ?? 0), decoded.reason ?? 'not a term record');
  }
  return term;
}
