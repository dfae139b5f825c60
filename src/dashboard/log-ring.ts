import { z } from 'zod';
import { Ring } from '../metrics/ring.js';

/**
 * The node's recent log lines, for `GET /logs`, the dashboard and `shoal logs`: a logger destination
 * (pino JSON lines, see createLogger's `recent`) that keeps the newest lines within a line count and
 * a byte budget, each numbered so a reader can ask for "everything after n" and learn what it missed.
 */

export const LOG_RING_MAX_LINES = 2000;
export const LOG_RING_MAX_BYTES = 1024 * 1024;
/** A longer line is kept with its message cut and its other fields dropped. */
export const LOG_LINE_MAX_BYTES = 8 * 1024;
/** Lines per page (`/logs`, `/shoal/logs/1`). */
export const LOG_PAGE_MAX_LINES = 500;
/** Bytes of log lines per page: a page always fits a data-plane frame (1 MiB). */
export const LOG_PAGE_MAX_BYTES = 512 * 1024;
/** Lines of a history read from the log file (`/logs?history=`, `shoal logs --lines`); at most LOG_PAGE_MAX_BYTES of them over HTTP. */
export const LOG_HISTORY_MAX_LINES = 2000;

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const LogEntry = z.strictObject({
  seq: z.number().int().positive(),
  /** Unix milliseconds. */
  time: z.number().nonnegative(),
  level: z.enum(LOG_LEVELS),
  msg: z.string(),
  /** Every other field of the line (`part`, `err`, ids...). */
  fields: z.record(z.string(), z.unknown()),
});
export type LogEntry = z.infer<typeof LogEntry>;

export const LogPage = z.strictObject({
  entries: z.array(LogEntry).max(LOG_PAGE_MAX_LINES),
  /** The oldest line still kept (the next line's number when none is). */
  firstSeq: z.number().int().positive(),
  /** The newest line so far (0 before the first); ask for `since=lastSeq` to follow. */
  lastSeq: z.number().int().nonnegative(),
  /** Lines after `since` that were evicted before this read: the reader missed them. */
  dropped: z.number().int().nonnegative(),
});
export type LogPage = z.infer<typeof LogPage>;

interface Stored {
  seq: number;
  line: string;
  bytes: number;
}

const LEVEL_OF: Record<number, LogLevel> = { 10: 'trace', 20: 'debug', 30: 'info', 40: 'warn', 50: 'error', 60: 'fatal' };
const OMITTED = new Set(['level', 'time', 'msg', 'pid', 'hostname']);

export class LogRing {
  private readonly lines: Ring<Stored>;
  private bytes = 0;
  private nextSeq = 1;
  private partial = '';

  constructor(private readonly limits: { maxLines: number; maxBytes: number; maxLineBytes: number } = { maxLines: LOG_RING_MAX_LINES, maxBytes: LOG_RING_MAX_BYTES, maxLineBytes: LOG_LINE_MAX_BYTES }) {
    this.lines = new Ring<Stored>(limits.maxLines);
  }

  /** The logger's write: whole lines ending in `\n` (a chunk without one waits for the rest, bounded). */
  write(chunk: string | Uint8Array): void {
    const text = this.partial + (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    const parts = text.split('\n');
    this.partial = parts.pop()!;
    if (Buffer.byteLength(this.partial) > this.limits.maxLineBytes) {
      this.add(this.partial);
      this.partial = '';
    }
    for (const line of parts) if (line.trim() !== '') this.add(line);
  }

  get lastSeq(): number {
    return this.nextSeq - 1;
  }

  get size(): { lines: number; bytes: number } {
    return { lines: this.lines.size, bytes: this.bytes };
  }

  /**
   * With `since`: the oldest lines after it, up to `limit` (paging forward, following). Without:
   * the newest `limit` lines (a tail). Oldest first either way, and never more than LOG_PAGE_MAX_BYTES.
   */
  page(options: { since?: number | null; limit?: number } = {}): LogPage {
    const limit = Math.max(1, Math.min(LOG_PAGE_MAX_LINES, Math.floor(options.limit ?? LOG_PAGE_MAX_LINES)));
    const kept = this.lines.toArray();
    const firstSeq = kept[0]?.seq ?? this.nextSeq;
    const since = options.since ?? null;
    let chosen: Stored[];
    if (since === null) {
      chosen = [];
      let bytes = 0;
      for (let i = kept.length - 1; i >= 0 && chosen.length < limit; i -= 1) {
        bytes += kept[i]!.bytes;
        if (bytes > LOG_PAGE_MAX_BYTES && chosen.length > 0) break;
        chosen.push(kept[i]!);
      }
      chosen.reverse();
    } else {
      chosen = [];
      let bytes = 0;
      // Seqs are consecutive, so the first line after `since` is found by arithmetic.
      for (let i = Math.max(0, since + 1 - firstSeq); i < kept.length && chosen.length < limit; i += 1) {
        bytes += kept[i]!.bytes;
        if (bytes > LOG_PAGE_MAX_BYTES && chosen.length > 0) break;
        chosen.push(kept[i]!);
      }
    }
    return {
      entries: chosen.map(toEntry),
      firstSeq,
      lastSeq: this.lastSeq,
      dropped: since === null ? 0 : Math.max(0, Math.min(firstSeq, this.nextSeq) - since - 1),
    };
  }

  private add(raw: string): void {
    let line = raw;
    let bytes = Buffer.byteLength(line);
    if (bytes > this.limits.maxLineBytes) {
      line = shorten(line, bytes, this.limits.maxLineBytes);
      bytes = Buffer.byteLength(line);
    }
    const stored: Stored = { seq: this.nextSeq, line, bytes };
    this.nextSeq += 1;
    const evicted = this.lines.push(stored);
    if (evicted) this.bytes -= evicted.bytes;
    this.bytes += bytes;
    while (this.bytes > this.limits.maxBytes && this.lines.size > 1) this.bytes -= this.lines.shift()!.bytes;
  }
}

/** A line over the budget keeps its level, time and the start of its message. */
function shorten(line: string, bytes: number, maxBytes: number): string {
  let parsed: Record<string, unknown> = {};
  try {
    const value: unknown = JSON.parse(line);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) parsed = value as Record<string, unknown>;
  } catch {
    parsed = { msg: line };
  }
  const note = ` [line of ${bytes} bytes cut]`;
  const msg = String(parsed.msg ?? '');
  // Characters, not bytes: a character is at most 4 bytes, so a quarter of the budget always fits.
  const keep = Math.max(0, Math.floor(maxBytes / 4) - note.length - 64);
  return JSON.stringify({ level: parsed.level ?? 30, time: parsed.time ?? Date.now(), msg: msg.slice(0, keep) + note });
}

function toEntry(stored: Stored): LogEntry {
  return { seq: stored.seq, ...parseLine(stored.line) };
}

/** A line read back from the log file (src/common/log-file.ts), cut as the ring cuts it; only the ring numbers lines. */
export function entryOfFileLine(raw: string, maxLineBytes = LOG_LINE_MAX_BYTES): Omit<LogEntry, 'seq'> {
  const bytes = Buffer.byteLength(raw);
  return parseLine(bytes > maxLineBytes ? shorten(raw, bytes, maxLineBytes) : raw);
}

function parseLine(line: string): Omit<LogEntry, 'seq'> {
  let parsed: Record<string, unknown>;
  try {
    const value: unknown = JSON.parse(line);
    parsed = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : { msg: line };
  } catch {
    parsed = { msg: line };
  }
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(parsed)) if (!OMITTED.has(key)) fields[key] = value;
  const time = typeof parsed.time === 'number' && Number.isFinite(parsed.time) && parsed.time >= 0 ? parsed.time : 0;
  return {
    time,
    level: typeof parsed.level === 'number' ? (LEVEL_OF[parsed.level] ?? 'info') : LOG_LEVELS.includes(parsed.level as LogLevel) ? (parsed.level as LogLevel) : 'info',
    msg: typeof parsed.msg === 'string' ? parsed.msg : parsed.msg === undefined ? '' : JSON.stringify(parsed.msg),
    fields,
  };
}
