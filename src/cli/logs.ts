import { parseArgs } from './args.js';
import { isShoalError, ShoalError } from '../common/errors.js';
import { resolveDataDir } from '../common/paths.js';
import { logsDir, readLogTail } from '../common/log-file.js';
import { entryOfFileLine, LOG_HISTORY_MAX_LINES, LOG_PAGE_MAX_LINES, type LogEntry, type LogPage } from '../dashboard/log-ring.js';
import type { LogHistory } from '../dashboard/logs.js';
import { readRunFiles } from '../node/run-files.js';
import { connectToNode } from './client.js';

const USAGE = `Usage: shoal logs [<node>] [--follow] [--json] [--lines <n>] [--data-dir <dir>]

Prints a node's recent log lines: this node's, or a member's by node id, name or nickname.
When this node is not running, prints the last lines of its log file (<data-dir>/logs/shoal.log).

Options:
  -f, --follow       keep printing new lines as they come (Ctrl-C stops)
  --json             one JSON object per line instead of readable text
  -n, --lines <n>    how many recent lines to print first (default 100, at most 2000; more than
                     the node keeps in memory come from its log file, across restarts)
  --data-dir <dir>   the data dir of the local node to ask (default as for 'shoal run')`;

/** A line of the ring (numbered) or of the log file (not). */
type ShownEntry = LogEntry | Omit<LogEntry, 'seq'>;

const DEFAULT_LINES = 100;
const MAX_LINES = LOG_HISTORY_MAX_LINES;

export async function logsCommand(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        follow: { type: 'boolean', short: 'f' },
        json: { type: 'boolean' },
        lines: { type: 'string', short: 'n' },
        'data-dir': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    console.error(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const lines = values.lines === undefined ? DEFAULT_LINES : Number(values.lines);
  if (positionals.length > 1 || !Number.isInteger(lines) || lines < 1 || lines > MAX_LINES) {
    console.error(positionals.length > 1 ? USAGE : `--lines must be an integer from 1 to ${MAX_LINES}, got '${values.lines}'`);
    return 2;
  }
  const node = positionals[0];
  const json = values.json === true;
  const color = !json && process.stdout.isTTY === true && process.env.NO_COLOR === undefined;
  const print = (entry: ShownEntry): void => {
    process.stdout.write(`${json ? JSON.stringify(entry) : formatEntry(entry, color)}\n`);
  };

  try {
    const client = await connectToNode(values['data-dir']);
    // The ring's page when it can hold that many, else the log file's history (which also says where following goes on).
    const query = new URLSearchParams({ ...(lines > LOG_PAGE_MAX_LINES ? { history: String(lines) } : { limit: String(lines) }), ...(node === undefined ? {} : { node }) });
    const page = await client.call<LogPage | LogHistory>('GET', `/logs?${query.toString()}`);
    for (const entry of page.entries) print(entry);
    if (values.follow !== true) return 0;
    return await follow(values['data-dir'], node, page.lastSeq, print);
  } catch (error) {
    // NOT_FOUND: no run files, or a node that does not answer (stopped, crashed): this node's file still has its lines.
    if (node === undefined && isShoalError(error) && error.code === 'NOT_FOUND') return printFromFile(resolveDataDir(values['data-dir']), lines, values.follow === true, error.message, print);
    console.error(isShoalError(error) ? error.message : (error as Error).message);
    return 1;
  }
}

/** A stopped node's last lines, read from its log file. */
async function printFromFile(dataDir: string, lines: number, following: boolean, why: string, print: (entry: ShownEntry) => void): Promise<number> {
  const dir = logsDir(dataDir);
  // No byte budget here (nothing crosses a frame), but each line is cut as the ring cuts it.
  const raw = await readLogTail(dir, { maxLines: lines, maxBytes: Number.POSITIVE_INFINITY });
  if (raw.length === 0) {
    console.error(`${why}; and it has no log file yet (${dir})`);
    return 1;
  }
  console.error(`(no node answers from ${dataDir}: its last ${raw.length} log lines, from ${dir})`);
  for (const line of raw) print(entryOfFileLine(line));
  if (!following) return 0;
  console.error(`nothing to follow: ${why}`);
  return 1;
}

/** Follows `/logs/stream` from `since` until Ctrl-C (0) or the node goes away (1). */
async function follow(dataDirFlag: string | undefined, node: string | undefined, since: number, print: (entry: ShownEntry) => void): Promise<number> {
  const dataDir = resolveDataDir(dataDirFlag);
  const { info, token } = await readRunFiles(dataDir);
  const query = new URLSearchParams({ since: String(since), ...(node === undefined ? {} : { node }) });
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const res = await fetch(`http://127.0.0.1:${info.apiPort}/logs/stream?${query.toString()}`, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
      signal: stop.signal,
    });
    if (!res.ok || res.body === null) {
      const text = await res.text();
      let message = `${res.status} ${text}`;
      try {
        message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message;
      } catch {
        // not JSON: keep the raw text
      }
      throw new ShoalError('BAD_REQUEST', message);
    }
    for await (const event of sseEvents(res.body)) {
      if (event.event === 'log') print(JSON.parse(event.data) as LogEntry);
      else if (event.event === 'gap') console.error(`... ${(JSON.parse(event.data) as { dropped: number }).dropped} lines were dropped before they could be read ...`);
      else if (event.event === 'status') {
        const status = JSON.parse(event.data) as { ok: boolean; error: string | null };
        console.error(status.ok ? '... the node answers again ...' : `... ${status.error ?? 'the node does not answer'} ...`);
      }
    }
    if (stop.signal.aborted) return 0;
    console.error('the node closed the log stream (it stopped?)');
    return 1;
  } catch (error) {
    if (stop.signal.aborted) return 0;
    throw error;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** Parses a text/event-stream body into its events (`event` defaults to "message"). */
export async function* sseEvents(body: AsyncIterable<Uint8Array>): AsyncGenerator<{ event: string; data: string }> {
  const decoder = new TextDecoder();
  let buffer = '';
  let event = 'message';
  let data: string[] = [];
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let newline;
    while ((newline = buffer.search(/\r\n|\n|\r/)) !== -1) {
      // A CR at the very end may be the first half of a CRLF split across chunks.
      if (newline === buffer.length - 1 && buffer[newline] === '\r') break;
      const line = buffer.slice(0, newline);
      buffer = buffer.slice(newline + (buffer.startsWith('\r\n', newline) ? 2 : 1));
      if (line === '') {
        if (data.length > 0) yield { event, data: data.join('\n') };
        event = 'message';
        data = [];
      } else if (!line.startsWith(':')) {
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'event') event = value;
        else if (field === 'data') data.push(value);
      }
    }
  }
}

const LEVEL_COLORS: Record<string, string> = { trace: '90', debug: '34', info: '32', warn: '33', error: '31', fatal: '35' };

/** Terminal control characters in a log line (a prompt fragment, a remote's text) are shown, never obeyed. */
function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/g, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`));
}

/** `2025-06-01 14:03:07.123 INFO  [api] message key=value`, in local time. */
export function formatEntry(entry: ShownEntry, color: boolean): string {
  const d = new Date(entry.time);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  const time = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
  const level = entry.level.toUpperCase().padEnd(5);
  const shownLevel = color ? `\u001b[${LEVEL_COLORS[entry.level] ?? '0'}m${level}\u001b[0m` : level;
  const { part, err, ...rest } = entry.fields;
  const parts = [time, shownLevel];
  if (typeof part === 'string') parts.push(`[${printable(part)}]`);
  parts.push(printable(entry.msg));
  for (const [key, value] of Object.entries(rest)) parts.push(`${printable(key)}=${printable(typeof value === 'string' ? value : JSON.stringify(value))}`);
  let line = parts.join(' ');
  if (err !== undefined) {
    const e = err as { message?: unknown; stack?: unknown };
    const stack = typeof e.stack === 'string' ? e.stack : typeof e.message === 'string' ? e.message : JSON.stringify(err);
    line += `\n    ${stack.split('\n').map(printable).join('\n    ')}`;
  }
  return line;
}
