// The process tree and open descriptors of the node and its children, read from /proc (Linux), for the
// capture bundle. Only files are read: nothing here signals, waits on or talks to a process, so it
// answers the same when a runner hangs.

import { readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';

/** Most processes of the tree listed (the node first, then its descendants breadth first). */
export const BUNDLE_PROCESSES_MAX = 256;
/** Most descriptors listed per process. */
export const BUNDLE_FDS_PER_PROCESS_MAX = 1024;
/** Longest command line shown per process. */
const COMMAND_MAX_CHARS = 4096;

export interface ProcessEntry {
  pid: number;
  ppid: number;
  state: string;
  rssKiB: number | null;
  command: string;
}

/** `pid (comm) S ppid ...`: comm may hold spaces and parentheses, so fields are counted from the last `)`. */
function parseStat(text: string): { state: string; ppid: number } | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const fields = text.slice(close + 2).split(' ');
  const ppid = Number(fields[1]);
  return fields[0] !== undefined && Number.isInteger(ppid) ? { state: fields[0], ppid } : null;
}

const readText = (path: string): Promise<string | null> => readFile(path, 'utf8').then((t) => t, () => null);

/** The process `rootPid` and its descendants, or null where there is no /proc. */
export async function processTree(rootPid: number, procRoot = '/proc'): Promise<ProcessEntry[] | null> {
  let names: string[];
  try {
    names = await readdir(procRoot);
  } catch {
    return null;
  }
  const parents = new Map<number, { ppid: number; state: string }>();
  await Promise.all(
    names
      .filter((n) => /^\d+$/.test(n))
      .map(async (name) => {
        const text = await readText(join(procRoot, name, 'stat'));
        const stat = text === null ? null : parseStat(text);
        if (stat !== null) parents.set(Number(name), stat);
      }),
  );
  const children = new Map<number, number[]>();
  for (const [pid, { ppid }] of parents) children.set(ppid, [...(children.get(ppid) ?? []), pid]);
  const order: number[] = [];
  const queue = parents.has(rootPid) ? [rootPid] : [];
  while (queue.length > 0 && order.length < BUNDLE_PROCESSES_MAX) {
    const pid = queue.shift()!;
    order.push(pid);
    queue.push(...(children.get(pid) ?? []).sort((a, b) => a - b));
  }
  return Promise.all(
    order.map(async (pid) => {
      const status = await readText(join(procRoot, String(pid), 'status'));
      const rss = status === null ? null : /^VmRSS:\s+(\d+)\s+kB/m.exec(status)?.[1];
      const cmdline = await readText(join(procRoot, String(pid), 'cmdline'));
      const command = cmdline === null || cmdline === '' ? '' : cmdline.replace(/\0+$/, '').split('\0').join(' ').slice(0, COMMAND_MAX_CHARS);
      const stat = parents.get(pid)!;
      return { pid, ppid: stat.ppid, state: stat.state, rssKiB: rss === undefined || rss === null ? null : Number(rss), command };
    }),
  );
}

export function formatProcesses(entries: ProcessEntry[] | null): string {
  if (entries === null) return 'no /proc on this system: the process tree is not available\n';
  const lines = ['pid\tppid\tstate\trss_kib\tcommand', ...entries.map((e) => `${e.pid}\t${e.ppid}\t${e.state}\t${e.rssKiB ?? '-'}\t${e.command}`)];
  return `${lines.join('\n')}\n`;
}

/** `pid fd -> target` for each process, or what kept them from being read. */
export async function openDescriptors(pids: readonly number[], procRoot = '/proc'): Promise<string> {
  const sections = await Promise.all(
    pids.map(async (pid) => {
      const dir = join(procRoot, String(pid), 'fd');
      let fds: string[];
      try {
        fds = (await readdir(dir)).filter((n) => /^\d+$/.test(n)).sort((a, b) => Number(a) - Number(b));
      } catch (error) {
        return `# pid ${pid}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}\n`;
      }
      const shown = fds.slice(0, BUNDLE_FDS_PER_PROCESS_MAX);
      const targets = await Promise.all(shown.map((fd) => readlink(join(dir, fd)).then((t) => t, (e: NodeJS.ErrnoException) => `(${e.code ?? 'unreadable'})`)));
      const more = fds.length > shown.length ? `# ... ${fds.length - shown.length} more\n` : '';
      return `# pid ${pid}: ${fds.length} open\n${shown.map((fd, i) => `${pid}\t${fd}\t${targets[i]}`).join('\n')}\n${more}`;
    }),
  );
  return sections.join('');
}
