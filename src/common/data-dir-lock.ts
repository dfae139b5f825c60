import { randomBytes } from 'node:crypto';
import { link, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ShoalError } from './errors.js';
import { writeFileAtomic } from './durable-fs.js';
import type { Logger } from './log.js';

/**
 * One node per data dir. Two nodes on one dir would share an identity and an event log, both run the
 * placed models, and each delete the other's run files at exit.
 *
 * Why a lock file with the holder's pid rather than a held OS lock: Node has no flock/fcntl API, and
 * a listening Unix socket as the lock breaks on data dirs whose path exceeds the ~104-byte socket path
 * limit. A crashed node leaves the file behind, so the file alone never decides: the next start takes
 * a lock over when its holder is gone. "Gone" is `kill(pid, 0)` failing, or (on Linux) the pid now
 * belonging to a process that started at another time than the holder (pid reuse, as in a container
 * where every start is pid 1), or the pid being this process's own when this process holds no lock.
 *
 * The file appears with its whole content at once (written to a temp file, then `link`ed to the lock
 * name, which fails when the name exists), so a reader never sees a half-written holder. Taking over
 * a stale lock happens under a second, briefly held file of the same kind, and only when the lock
 * still holds the stale content it judged: two starts that find the same stale lock cannot both win.
 */

const LockHolder = z.strictObject({
  pid: z.number().int().positive(),
  /** The API's URL, once it listens; null while the node starts. */
  url: z.string().nullable(),
  startedAtMs: z.number().int().nonnegative(),
  /** Linux: the holder's start time (`/proc/<pid>/stat` field 22), to tell a reused pid from the holder. */
  procStart: z.string().nullable(),
  /** Tells this start's lock from any other, for `release`. */
  token: z.string(),
});
type LockHolder = z.infer<typeof LockHolder>;

const lockPath = (dataDir: string): string => join(dataDir, 'run', 'node.lock');
/** Locks this process holds, so that a lock naming this pid but not held here reads as stale. */
const heldHere = new Set<string>();
/** Tries to take a lock before giving up; each lost race (another start took it first) costs one. */
const LOCK_ATTEMPTS = 5;

async function procStartOf(pid: number): Promise<string | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may contain spaces: count fields after it.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch {
    return null;
  }
}

async function holderAlive(holder: LockHolder, path: string): Promise<boolean> {
  if (holder.pid === process.pid) return heldHere.has(path);
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: alive, but another user's.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (holder.procStart === null) return true;
  const now = await procStartOf(holder.pid);
  return now === null || now === holder.procStart;
}

/** The holder's record; null when the file is gone, `damaged` when it is not a holder record (a crash mid-takeover, a stray edit). */
async function readHolder(path: string): Promise<{ holder: LockHolder; text: string } | null | 'damaged'> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const holder = LockHolder.safeParse(JSON.parse(text));
    return holder.success ? { holder: holder.data, text } : 'damaged';
  } catch {
    return 'damaged';
  }
}

/** Creates `path` with `text` unless it exists: false when it does. */
async function createWhole(path: string, text: string): Promise<boolean> {
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, text, { mode: 0o600, flag: 'wx' });
  try {
    await link(tmp, path);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    // File systems without hard links (FAT, some network mounts): an exclusive create, whose one
    // small write a concurrent reader could in theory see half done.
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw error;
    try {
      await writeFile(path, text, { mode: 0o600, flag: 'wx' });
      return true;
    } catch (fallbackError) {
      if ((fallbackError as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw fallbackError;
    }
  } finally {
    await rm(tmp, { force: true });
  }
}

function describe(holder: LockHolder): string {
  return `pid ${holder.pid}, ${holder.url ?? 'still starting'}`;
}

export class DataDirLock {
  private released = false;

  private constructor(
    private readonly path: string,
    private holder: LockHolder,
  ) {}

  /**
   * Takes the data dir's lock, or throws naming the node that holds it. A lock whose holder is gone
   * (a crash, a kill) is taken over with a log line.
   */
  static async acquire(dataDir: string, log: Logger): Promise<DataDirLock> {
    const path = lockPath(dataDir);
    await mkdir(join(dataDir, 'run'), { recursive: true, mode: 0o700 });
    const holder: LockHolder = { pid: process.pid, url: null, startedAtMs: Date.now(), procStart: await procStartOf(process.pid), token: randomBytes(16).toString('hex') };
    const text = `${JSON.stringify(holder)}\n`;
    for (let attempt = 0; attempt < LOCK_ATTEMPTS; attempt++) {
      if (await createWhole(path, text)) {
        heldHere.add(path);
        return new DataDirLock(path, holder);
      }
      const found = await readHolder(path);
      if (found === null) continue;
      if (found !== 'damaged' && (await holderAlive(found.holder, path))) {
        throw new ShoalError('BAD_REQUEST', `a node (${describe(found.holder)}) already runs from this data dir (${dataDir}): stop it first, or pass another --data-dir`);
      }
      const stale = found === 'damaged' ? await readFile(path, 'utf8').catch(() => null) : found.text;
      if (stale === null) continue;
      if (!(await takeOver(path, stale))) continue;
      if (found === 'damaged') log.warn({ lock: path }, `took over the data dir lock ${path}: it was damaged`);
      else log.warn({ lock: path, stalePid: found.holder.pid }, `took over the data dir lock of pid ${found.holder.pid}, which is no longer running (it did not stop cleanly)`);
    }
    throw new ShoalError('BAD_REQUEST', `could not lock the data dir ${dataDir}: other starts kept taking it; start one node per data dir`);
  }

  /** Records where the API listens, for the message a second start on this data dir prints. */
  async setUrl(url: string): Promise<void> {
    if (this.released) return;
    this.holder = { ...this.holder, url };
    await writeFileAtomic(this.path, `${JSON.stringify(this.holder)}\n`, { mode: 0o600 });
  }

  /** Removes the lock if it is still this start's (never another node's). */
  async release(): Promise<void> {
    if (this.released) return;
    this.released = true;
    heldHere.delete(this.path);
    const found = await readHolder(this.path);
    if (found !== null && found !== 'damaged' && found.holder.token === this.holder.token) await rm(this.path, { force: true });
  }
}

/**
 * Removes the stale lock `path` if it still holds `stale`, under a guard file so that no other start
 * removes a lock between this one's check and its removal. False when another start holds the guard;
 * the caller then looks at the lock again. A guard whose holder is gone is removed.
 */
async function takeOver(path: string, stale: string): Promise<boolean> {
  const guard = `${path}.takeover`;
  if (!(await createWhole(guard, `${process.pid}\n`))) {
    const pid = Number((await readFile(guard, 'utf8').catch(() => '')).trim());
    let guardAlive = Number.isInteger(pid) && pid > 0 && pid !== process.pid;
    if (guardAlive) {
      try {
        process.kill(pid, 0);
      } catch (error) {
        guardAlive = (error as NodeJS.ErrnoException).code === 'EPERM';
      }
    }
    if (!guardAlive) await rm(guard, { force: true });
    else await new Promise((resolve) => setTimeout(resolve, 50));
    return false;
  }
  try {
    const now = await readFile(path, 'utf8').catch(() => null);
    if (now !== stale) return false;
    await rm(path, { force: true });
    return true;
  } finally {
    await rm(guard, { force: true });
  }
}
