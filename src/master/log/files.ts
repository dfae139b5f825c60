// File helpers of the event log. Its temporary files are `<name>.tmp`, which `open` deletes as
// leftovers of an interrupted write (src/master/log/recovery.ts).

import { join } from 'node:path';
import { open } from 'node:fs/promises';
import { writeFileAtomic } from '../../common/durable-fs.js';
import { ShoalError } from '../../common/errors.js';

/** The log records every decision of the cluster: only the node's own user may read it. */
export const LOG_FILE_MODE = 0o600;
export const LOG_DIR_MODE = 0o700;

/** Indexes in file names are zero-padded to 20 digits, so names sort in idx order. */
export function padIdx(idx: number): string {
  return String(idx).padStart(20, '0');
}

export function errnoCode(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}

export function logCorrupt(dir: string, file: string, offset: string, detail: string): ShoalError {
  return new ShoalError(
    'LOG_CORRUPT',
    `the event log file ${join(dir, file)} is corrupt at byte ${offset}: ${detail}. The records after that point cannot be trusted, ` +
      `so this node will not start on this log. Move ${dir} aside (for example: mv ${dir} ${dir}.corrupt) and start this node again: ` +
      `it starts standalone with the same identity. If it was in a cluster, run 'shoal invite --code' on any member and ` +
      `'shoal join <code>' here: it rejoins as the same member and catches up from the cluster.`,
  );
}

export async function writeFileSynced(path: string, bytes: Uint8Array): Promise<void> {
  const fh = await open(path, 'w', LOG_FILE_MODE);
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

/** Writes `name` in `dir` atomically, through a `<name>.tmp` that the log's recovery sweeps. */
export function writeAtomic(dir: string, name: string, bytes: Uint8Array): Promise<void> {
  return writeFileAtomic(join(dir, name), bytes, { tempPath: join(dir, `${name}.tmp`), mode: LOG_FILE_MODE });
}
