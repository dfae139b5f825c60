import { randomUUID } from 'node:crypto';
import { open, rename, unlink } from 'node:fs/promises';

/**
 * Replaces `path` with `data` so that a crash leaves either the old file or the new one, never half
 * of either: write a temp file beside it, fsync, rename over the target.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, options: { mode?: number } = {}): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${randomUUID().slice(0, 8)}`;
  const handle = await open(tmp, 'w', options.mode);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(tmp, path);
  } catch (error) {
    await unlink(tmp).catch(() => undefined);
    throw error;
  }
}
