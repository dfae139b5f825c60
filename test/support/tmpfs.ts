// A real full disk for tests: a tmpfs of a few MiB mounted for one test file (needs root, as CI runs;
// the file's tests skip with the reason otherwise), and a writer that fills it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';

export const TMPFS_BYTES = 48 * 1024 * 1024;

export interface SmallTmpfs {
  /** The mount point, once `before` ran and the mount worked. */
  readonly path: string | null;
  /** Why the tests skip (not root, no tmpfs), or false. */
  readonly skip: string | false;
}

/** Registers this file's `before`/`after` hooks that mount and unmount a TMPFS_BYTES tmpfs. */
export function smallTmpfs(prefix: string): SmallTmpfs {
  const state: { path: string | null; skip: string | false } = { path: null, skip: false };
  before(async () => {
    if (process.getuid?.() !== 0) {
      state.skip = 'needs root to mount a small tmpfs as the full disk';
      return;
    }
    const dir = await mkdtemp(join(tmpdir(), prefix));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_BYTES}`, 'tmpfs', dir]);
      state.path = dir;
    } catch (error) {
      state.skip = `cannot mount a tmpfs here (${(error as Error).message.split('\n')[0]})`;
    }
  });
  after(() => {
    if (state.path !== null) execFileSync('umount', ['-l', state.path]);
  });
  return state;
}

/** Writes zeros into `path` until the filesystem refuses: the disk is then full. */
export async function fillDisk(path: string): Promise<void> {
  const handle = await open(path, 'w');
  const chunk = Buffer.alloc(256 * 1024);
  try {
    for (;;) await handle.write(chunk);
  } catch (error) {
    assert.equal((error as NodeJS.ErrnoException).code, 'ENOSPC');
  } finally {
    await handle.close().catch(() => {});
  }
}
