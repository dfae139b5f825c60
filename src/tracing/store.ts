// The traces an API node assembled, on disk under `<dataDir>/traces/`: one JSON file per trace,
// written atomically, kept for a retention (default 3 days) and within a count and a byte cap,
// oldest dropped first. An index of the summaries stays in memory, so `GET /traces` reads no file.

import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../common/durable-fs.js';
import { errorMessage, ShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { Trace, type TraceSummary } from '../wire/diagnostics.js';

/** How long a trace is kept unless SHOAL_TRACE_RETENTION_DAYS says otherwise. */
export const DEFAULT_TRACE_RETENTION_DAYS = 3;
/** Most traces kept on disk; the oldest go first. */
export const MAX_STORED_TRACES = 5000;
/** Most bytes of trace files kept on disk; the oldest go first. */
export const MAX_TRACE_STORE_BYTES = 64 * 2 ** 20;
/** How often retention is applied besides at start. */
export const TRACE_PRUNE_INTERVAL_MS = 10 * 60_000;
/** A trace file larger than this is not read (a trace of MAX_SPANS_PER_TRACE spans is far smaller). */
export const MAX_TRACE_FILE_BYTES = 4 * 2 ** 20;
const DAY_MS = 86_400_000;
/** Trace ids are 128 random bits in hex; nothing else names a file here. */
const TRACE_ID = /^[0-9a-f]{32}$/;

/** SHOAL_TRACE_RETENTION_DAYS as milliseconds (a positive number of days, fractions allowed); unset: the default. */
export function traceRetentionFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SHOAL_TRACE_RETENTION_DAYS;
  if (raw === undefined || raw.trim() === '') return DEFAULT_TRACE_RETENTION_DAYS * DAY_MS;
  const days = Number(raw);
  if (!Number.isFinite(days) || days <= 0) throw new ShoalError('BAD_REQUEST', `SHOAL_TRACE_RETENTION_DAYS must be a positive number of days (such as 3 or 0.5), got '${raw}'`);
  return days * DAY_MS;
}

export interface TraceStoreOptions {
  dir: string;
  log: Logger;
  retentionMs?: number;
  maxTraces?: number;
  maxBytes?: number;
  /** Unix ms; injected so tests can age traces. */
  now?: () => number;
}

interface Entry {
  summary: TraceSummary;
  bytes: number;
}

function summaryOf(trace: Trace): TraceSummary {
  const { spans: _spans, offsets: _offsets, ...summary } = trace;
  return summary;
}

export class TraceStore {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private timer: NodeJS.Timeout | null = null;
  readonly retentionMs: number;
  private readonly maxTraces: number;
  private readonly maxBytes: number;
  private readonly now: () => number;

  private constructor(private readonly options: TraceStoreOptions) {
    this.retentionMs = options.retentionMs ?? DEFAULT_TRACE_RETENTION_DAYS * DAY_MS;
    this.maxTraces = options.maxTraces ?? MAX_STORED_TRACES;
    this.maxBytes = options.maxBytes ?? MAX_TRACE_STORE_BYTES;
    this.now = options.now ?? Date.now;
  }

  /** Reads what an earlier run kept (removing unreadable files and temp files a crash left) and prunes it. */
  static async open(options: TraceStoreOptions): Promise<TraceStore> {
    const store = new TraceStore(options);
    await mkdir(options.dir, { recursive: true, mode: 0o700 });
    for (const name of await readdir(options.dir)) {
      const id = name.endsWith('.json') ? name.slice(0, -'.json'.length) : null;
      const path = join(options.dir, name);
      const trace = id !== null && TRACE_ID.test(id) ? await store.read(path) : null;
      if (trace === null || trace.traceId !== id) {
        await rm(path, { force: true, recursive: true });
        continue;
      }
      store.index(trace, Buffer.byteLength(JSON.stringify(trace)));
    }
    await store.prune();
    return store;
  }

  /** Applies retention every TRACE_PRUNE_INTERVAL_MS until `stop`. */
  start(): void {
    this.timer ??= setInterval(() => void this.prune().catch((error: unknown) => this.options.log.warn({ err: error }, 'pruning old traces failed')), TRACE_PRUNE_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  async save(trace: Trace): Promise<void> {
    const text = JSON.stringify(trace);
    await writeFileAtomic(this.pathOf(trace.traceId), text, { mode: 0o600 });
    this.index(trace, Buffer.byteLength(text));
    await this.prune();
  }

  /** Newest first. */
  list(limit: number): TraceSummary[] {
    return [...this.entries.values()]
      .map((e) => e.summary)
      .sort((a, b) => b.startedAtMs - a.startedAtMs)
      .slice(0, Math.max(0, limit));
  }

  async get(traceId: string): Promise<Trace | null> {
    if (!TRACE_ID.test(traceId) || !this.entries.has(traceId)) return null;
    return this.read(this.pathOf(traceId));
  }

  /** Drops traces older than the retention, then the oldest until the count and byte caps hold. */
  async prune(): Promise<void> {
    const oldestFirst = [...this.entries.values()].sort((a, b) => a.summary.startedAtMs - b.summary.startedAtMs);
    const cutoff = this.now() - this.retentionMs;
    const doomed: string[] = [];
    let count = this.entries.size;
    let bytes = this.bytes;
    for (const entry of oldestFirst) {
      if (entry.summary.startedAtMs >= cutoff && count <= this.maxTraces && bytes <= this.maxBytes) break;
      doomed.push(entry.summary.traceId);
      count--;
      bytes -= entry.bytes;
    }
    for (const id of doomed) {
      this.bytes -= this.entries.get(id)?.bytes ?? 0;
      this.entries.delete(id);
      await rm(this.pathOf(id), { force: true });
    }
  }

  private index(trace: Trace, bytes: number): void {
    this.bytes += bytes - (this.entries.get(trace.traceId)?.bytes ?? 0);
    this.entries.set(trace.traceId, { summary: summaryOf(trace), bytes });
  }

  private pathOf(traceId: string): string {
    return join(this.options.dir, `${traceId}.json`);
  }

  private async read(path: string): Promise<Trace | null> {
    try {
      const info = await stat(path);
      if (!info.isFile() || info.size > MAX_TRACE_FILE_BYTES) return null;
      const parsed = Trace.safeParse(JSON.parse(await readFile(path, 'utf8')));
      return parsed.success ? parsed.data : null;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') this.options.log.warn({ path, err: errorMessage(error) }, 'a stored trace could not be read');
      return null;
    }
  }
}
