// Engine processes (llama-server, ggml-rpc-server) run in process groups of their own, so a node
// that is killed outright (SIGKILL, OOM killer, power loss of the terminal) leaves them running,
// holding memory, a GPU and a port. Each engine child is therefore recorded on disk while it runs,
// and the next node start reaps whatever an earlier run left behind. While the node runs, its
// 'exit' handler kills every group it still owns.

import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { z } from 'zod';
import { writeFileAtomic } from '../../common/durable-fs.js';
import type { Logger } from '../../common/log.js';

const run = promisify(execFile);

export const EngineRecord = z.strictObject({
  pid: z.number().int().positive(),
  /** The process group to kill: the engine is spawned detached, so this is its own pid. */
  pgid: z.number().int().positive(),
  /** The executable as spawned (argv[0]); a reused pid running anything else is left alone. */
  binary: z.string().min(1),
  startedAtMs: z.number().int().nonnegative(),
});
export type EngineRecord = z.infer<typeof EngineRecord>;

export function engineRecordDir(dataDir: string): string {
  return join(dataDir, 'run', 'engines');
}

function recordPath(dataDir: string, pid: number): string {
  return join(engineRecordDir(dataDir), `${pid}.json`);
}

export async function writeEngineRecord(dataDir: string, record: EngineRecord): Promise<void> {
  await mkdir(engineRecordDir(dataDir), { recursive: true });
  await writeFileAtomic(recordPath(dataDir, record.pid), `${JSON.stringify(record)}\n`);
}

export async function removeEngineRecord(dataDir: string, pid: number): Promise<void> {
  await rm(recordPath(dataDir, pid), { force: true });
}

/** argv of a running process, or null when it is gone (or cannot be read). */
export async function processArgv(pid: number): Promise<string[] | null> {
  if (process.platform === 'linux') {
    try {
      const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      if (raw === '') return null; // a zombie: it has exited, only its parent has not reaped it
      return raw.replace(/\0$/, '').split('\0');
    } catch {
      return null;
    }
  }
  // Elsewhere (macOS), `ps` gives the command line; arguments with spaces are ambiguous there, but
  // argv[0] of an engine is an absolute path from the engine cache, which has none.
  try {
    const { stdout } = await run('ps', ['-o', 'command=', '-p', String(pid)], { encoding: 'utf8', timeout: 5000 });
    const line = stdout.trim();
    return line === '' ? null : line.split(' ');
  } catch {
    return null;
  }
}

function killGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

export interface ReapResult {
  reaped: EngineRecord[];
  /** Records whose process was gone or ran another program: deleted, nothing killed. */
  stale: EngineRecord[];
}

/**
 * Kills the process groups of engines that an earlier run of this node left running, and deletes
 * every record. Only a process still running the recorded binary is killed: a pid that the system
 * reused for something else is left alone. Call at node start, before any engine is spawned.
 */
export async function reapOrphans(dataDir: string, log: Logger): Promise<ReapResult> {
  const dir = engineRecordDir(dataDir);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { reaped: [], stale: [] };
    throw error;
  }
  const result: ReapResult = { reaped: [], stale: [] };
  for (const name of names) {
    const path = join(dir, name);
    if (name.includes('.tmp-')) {
      // A record write that an earlier crash interrupted; its final file, if any, is read below.
      await rm(path, { force: true });
      continue;
    }
    if (!name.endsWith('.json')) continue;
    let record: EngineRecord;
    try {
      record = EngineRecord.parse(JSON.parse(await readFile(path, 'utf8')));
    } catch (error) {
      log.warn({ err: error, path }, 'unreadable engine record; deleting it');
      await rm(path, { force: true });
      continue;
    }
    if (liveGroups.has(record.pgid)) continue; // ours, from this very process
    const argv = await processArgv(record.pid);
    if (argv && argv[0] === record.binary) {
      killGroup(record.pgid, 'SIGKILL');
      log.warn(
        { pid: record.pid, pgid: record.pgid, binary: record.binary, startedAt: new Date(record.startedAtMs).toISOString() },
        'killed an engine process left running by an earlier run of this node',
      );
      result.reaped.push(record);
    } else {
      result.stale.push(record);
    }
    await rm(path, { force: true });
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Groups this process owns, killed when it exits. An 'exit' handler runs on process.exit() and on
// a normal end of the event loop; signals need the node's own handlers to exit through it.

const liveGroups = new Set<number>();
let exitHookInstalled = false;

export function trackLiveGroup(pgid: number): void {
  liveGroups.add(pgid);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.on('exit', () => {
      for (const group of liveGroups) killGroup(group, 'SIGKILL');
    });
  }
}

export function untrackLiveGroup(pgid: number): void {
  liveGroups.delete(pgid);
}
