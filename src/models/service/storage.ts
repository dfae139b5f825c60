// Sizes on this node's disk: of files, of the generated built-in models, and the storage report of
// GET /store/storage.

import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { modelsDir } from '../../common/paths.js';
import type { StorageView } from '../views.js';
import type { ModelsContext } from './context.js';

/** A file's size, or null when it is not there. */
export async function sizeOf(path: string): Promise<number | null> {
  try {
    return (await stat(path)).size;
  } catch {
    return null;
  }
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) total += await dirBytes(path);
    else if (e.isFile()) total += (await sizeOf(path)) ?? 0;
  }
  return total;
}

/** The store's usage, the room downloads still have, the downloads under way and the built-in models. */
export async function storageView(ctx: ModelsContext, running: () => StorageView['downloads']): Promise<StorageView> {
  const usage = await ctx.store.usage();
  const builtinDir = join(modelsDir(ctx.dataDir), 'builtin');
  return {
    ...usage,
    root: ctx.store.root,
    availableBytes: Math.max(0, usage.disk.freeBytes - usage.disk.reserveBytes),
    downloads: running(),
    builtin: { dir: builtinDir, bytes: await dirBytes(builtinDir) },
  };
}
