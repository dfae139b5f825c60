// index.json: what the store holds (complete copies, and downloads under way or interrupted), with
// last-used times for LRU eviction. Written atomically (temp file, fsync, rename).

import { writeFileAtomic } from '../../common/durable-fs.js';
import { readFile, rename } from 'node:fs/promises';
import { z } from 'zod';

const hex64 = z.string().regex(/^[0-9a-f]{64}$/);
const hex40 = z.string().regex(/^[0-9a-f]{40}$/);

export const IndexedFileSchema = z.strictObject({
  path: z.string().min(1).max(1000),
  size: z.number().int().min(0),
  sha256: hex64.nullable(),
  gitOid: hex40.nullable(),
});
export type IndexedFile = z.infer<typeof IndexedFileSchema>;

export const StoredModelSchema = z.strictObject({
  modelId: z.string().min(1).max(200),
  repo: z.string().min(3).max(200),
  revision: hex40,
  /** The GGUF group's name in the repo (the path without shard suffix). */
  group: z.string().min(1).max(1000),
  primaryPath: z.string().min(1).max(1000),
  files: z.array(IndexedFileSchema).min(1),
  bytes: z.number().int().min(0),
  addedAtMs: z.number().int().min(0),
  lastUsedMs: z.number().int().min(0),
});
export type StoredModelRecord = z.infer<typeof StoredModelSchema>;

/** A download that started and has not completed: its part files can be resumed or cleaned up. */
export const PendingSchema = z.strictObject({
  modelId: z.string().min(1).max(200),
  repo: z.string().min(3).max(200),
  revision: hex40,
  files: z.array(IndexedFileSchema).min(1),
  startedAtMs: z.number().int().min(0),
});
export type PendingRecord = z.infer<typeof PendingSchema>;

export const StoreIndexSchema = z.strictObject({
  version: z.literal(1),
  models: z.record(z.string(), StoredModelSchema),
  pending: z.record(z.string(), PendingSchema),
});
export type StoreIndex = z.infer<typeof StoreIndexSchema>;

export function emptyIndex(): StoreIndex {
  return { version: 1, models: {}, pending: {} };
}

/**
 * Reads the index; a missing file is an empty store. A damaged one is moved aside to
 * `index.json.damaged-<ms>` (its files stay on disk, reported as untracked by usage()) and the store
 * starts empty, so a bad write never stops a node from starting.
 */
export async function loadIndex(path: string, now: number): Promise<{ index: StoreIndex; damaged: string | null }> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { index: emptyIndex(), damaged: null };
    throw error;
  }
  try {
    return { index: StoreIndexSchema.parse(JSON.parse(text)), damaged: null };
  } catch {
    const aside = `${path}.damaged-${now}`;
    await rename(path, aside);
    return { index: emptyIndex(), damaged: aside };
  }
}

export async function saveIndex(path: string, index: StoreIndex): Promise<void> {
  await writeFileAtomic(path, JSON.stringify(index, null, 1));
}
