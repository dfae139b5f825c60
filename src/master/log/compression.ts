// Background gzip of a closed segment: `log-<idx>.seg` becomes `log-<idx>.seg.gz`.

import { readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { gzip as gzipCb } from 'node:zlib';
import { fsyncDir } from '../../common/durable-fs.js';
import { writeFileSynced } from './files.js';
import type { RwLock } from './lock.js';
import { segmentFile, type Segment } from './segments.js';

const gzip = promisify(gzipCb);

/**
 * Compresses `seg` into `.seg.gz.tmp` outside the lock, then swaps the files under the exclusive lock,
 * so no read sees the segment's flag and its files disagree. Gives up quietly whenever `stillClosed`
 * turns false (the segment was truncated, reopened or deleted meanwhile). A failure deletes the
 * temporary file, leaves the plain one in place and rethrows.
 */
export async function compressSegment(dir: string, seg: Segment, lock: RwLock, stillClosed: () => boolean): Promise<void> {
  const plainName = segmentFile(seg);
  const gzName = segmentFile({ firstIdx: seg.firstIdx, compressed: true });
  const tmpName = `${gzName}.tmp`;
  try {
    const bytes = await readFile(join(dir, plainName));
    if (!stillClosed() || bytes.length !== seg.bytes) return;
    const packed = await gzip(bytes);
    if (!stillClosed()) return;
    await writeFileSynced(join(dir, tmpName), packed);
    await lock.exclusive(async () => {
      if (!stillClosed() || seg.bytes !== bytes.length) {
        await unlink(join(dir, tmpName));
        return;
      }
      await rename(join(dir, tmpName), join(dir, gzName));
      await fsyncDir(dir);
      seg.compressed = true;
      await unlink(join(dir, plainName));
      await fsyncDir(dir);
    });
  } catch (error) {
    await unlink(join(dir, tmpName)).catch(() => {});
    throw error;
  }
}
