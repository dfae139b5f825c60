import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * Makes the entries of `path` (a directory) durable: a file created, renamed or removed in it
 * survives a crash only once the directory itself is fsynced, not the file alone.
 *
 * Errors propagate (EIO, ENOSPC): a caller that goes on as if the rename were durable would
 * promise what the disk does not hold. The one exception is Windows, where a directory cannot be
 * fsynced at all (Node answers EPERM) and NTFS journals the rename itself; there this does nothing.
 */
export async function fsyncDir(path: string): Promise<void> {
  if (process.platform === 'win32') return;
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/**
 * Replaces `path` with `data` so that a crash leaves either the old file or the whole new one,
 * never part of either, and once this resolves the new one survives a crash: write a temp file in
 * the same directory (a rename across file systems is not atomic), fsync it, rename it over
 * `path`, fsync the directory.
 *
 * The temp file is `<path>.tmp-<pid>-<8 hex>`: created exclusively (`wx`, so a stale or planted
 * file of that name is never written through), removed again on any failure, and recognisable by
 * its `.tmp-` for the sweeps that delete what a crash left behind (src/worker/engines/orphans.ts).
 * `mode` is set with chmod after creation, so the umask cannot narrow it.
 *
 * `tempPath` names the temp file instead, for an owner that is alone in its directory and sweeps
 * that name itself at start (the event log's `<name>.tmp`, src/master/log/recovery.ts); it is
 * truncated rather than created exclusively, since a crash may have left it.
 */
export async function writeFileAtomic(path: string, data: string | Uint8Array, options: { mode?: number; tempPath?: string } = {}): Promise<void> {
  const tmp = options.tempPath ?? `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const handle = await open(tmp, options.tempPath === undefined ? 'wx' : 'w', options.mode);
  try {
    try {
      if (options.mode !== undefined) await handle.chmod(options.mode);
      await handle.writeFile(data);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (error) {
    // The original failure is the one to report; a temp file that cannot be removed is swept later.
    await rm(tmp, { force: true }).catch(() => undefined);
    throw error;
  }
  await fsyncDir(dirname(path));
}
