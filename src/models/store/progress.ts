// Download progress: per-file and overall bytes, a transfer rate over a sliding window, and a
// one-line progress bar for terminals.

import { formatBytes } from '../../common/format-bytes.js';

export type FileState = 'queued' | 'present' | 'linked' | 'downloading' | 'verifying' | 'done' | 'failed';

export interface FileProgress {
  path: string;
  totalBytes: number;
  /** Bytes on disk for this file (a resumed file starts with its part file's bytes). */
  doneBytes: number;
  state: FileState;
}

export interface DownloadProgress {
  modelId: string;
  repo: string;
  revision: string;
  files: FileProgress[];
  doneBytes: number;
  totalBytes: number;
  /** Bytes fetched from the network by this run (excludes what was already on disk). */
  fetchedBytes: number;
  /** Over the last RATE_WINDOW_MS; 0 until two samples exist. */
  bytesPerSecond: number;
  /** Seconds left at the current rate; null while the rate is unknown. */
  etaSeconds: number | null;
  done: boolean;
}

export const RATE_WINDOW_MS = 5_000;
/** Least time between two progress callbacks (state changes are reported at once). */
export const DEFAULT_PROGRESS_INTERVAL_MS = 200;

/** Sliding-window rate of a growing counter. */
export class RateMeter {
  private readonly samples: { t: number; bytes: number }[] = [];

  constructor(private readonly windowMs = RATE_WINDOW_MS) {}

  sample(t: number, cumulativeBytes: number): void {
    this.samples.push({ t, bytes: cumulativeBytes });
    while (this.samples.length > 2 && (this.samples[0] as { t: number }).t < t - this.windowMs) this.samples.shift();
  }

  bytesPerSecond(): number {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (!first || !last || last.t <= first.t) return 0;
    return ((last.bytes - first.bytes) * 1000) / (last.t - first.t);
  }
}

/** Collects per-file progress and calls back at most every `intervalMs` (and on every state change). */
export class ProgressTracker {
  private readonly files: FileProgress[];
  private readonly rate = new RateMeter();
  private fetched = 0;
  private lastEmit = -Infinity;
  private finished = false;

  constructor(
    private readonly meta: { modelId: string; repo: string; revision: string },
    files: readonly { path: string; size: number }[],
    private readonly listeners: Set<(p: DownloadProgress) => void>,
    private readonly now: () => number,
    private readonly intervalMs = DEFAULT_PROGRESS_INTERVAL_MS,
  ) {
    this.files = files.map((f) => ({ path: f.path, totalBytes: f.size, doneBytes: 0, state: 'queued' }));
    this.rate.sample(now(), 0);
  }

  private file(path: string): FileProgress {
    const f = this.files.find((x) => x.path === path);
    if (!f) throw new Error(`progress for unknown file ${path}`);
    return f;
  }

  setState(path: string, state: FileState, doneBytes?: number): void {
    const f = this.file(path);
    f.state = state;
    if (doneBytes !== undefined) f.doneBytes = doneBytes;
    this.emit(true);
  }

  /** `delta` new bytes fetched for `path`; `doneBytes` is the file's bytes on disk now. */
  fetchedBytes(path: string, delta: number, doneBytes: number): void {
    this.file(path).doneBytes = doneBytes;
    this.fetched += delta;
    this.emit(false);
  }

  finish(): void {
    this.finished = true;
    this.emit(true);
  }

  snapshot(): DownloadProgress {
    const t = this.now();
    this.rate.sample(t, this.fetched);
    const doneBytes = this.files.reduce((s, f) => s + f.doneBytes, 0);
    const totalBytes = this.files.reduce((s, f) => s + f.totalBytes, 0);
    const bytesPerSecond = this.rate.bytesPerSecond();
    return {
      ...this.meta,
      files: this.files.map((f) => ({ ...f })),
      doneBytes,
      totalBytes,
      fetchedBytes: this.fetched,
      bytesPerSecond,
      etaSeconds: this.finished ? 0 : bytesPerSecond > 0 ? (totalBytes - doneBytes) / bytesPerSecond : null,
      done: this.finished,
    };
  }

  private emit(force: boolean): void {
    if (this.listeners.size === 0) return;
    const t = this.now();
    if (!force && t - this.lastEmit < this.intervalMs) return;
    this.lastEmit = t;
    const snap = this.snapshot();
    for (const listener of this.listeners) {
      try {
        listener(snap);
      } catch {
        // A failing progress callback must not break the download.
      }
    }
  }
}

function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * One terminal line for a progress snapshot, at most `width` columns:
 * `owner/repo:Q4_K_M [#########---------]  48%  1.20 GiB/2.50 GiB  34.5 MiB/s  ETA 41s`.
 */
export function renderProgressLine(p: DownloadProgress, width = 80): string {
  const pct = p.totalBytes > 0 ? Math.min(1, p.doneBytes / p.totalBytes) : p.done ? 1 : 0;
  const pctText = `${Math.floor(pct * 100)}%`.padStart(4);
  const sizes = `${formatBytes(p.doneBytes)}/${formatBytes(p.totalBytes)}`;
  const rate = p.done ? 'done' : p.bytesPerSecond > 0 ? `${formatBytes(p.bytesPerSecond)}/s` : '';
  const eta = !p.done && p.etaSeconds !== null ? `ETA ${formatDuration(p.etaSeconds)}` : '';
  const tail = [pctText, sizes, rate, eta].filter((s) => s !== '').join('  ');
  let label = p.modelId;
  const room = Math.max(0, width - tail.length - 4);
  const barWidth = Math.max(0, Math.min(30, room - Math.min(label.length, 40) - 1));
  const labelRoom = Math.max(0, room - barWidth - (barWidth > 0 ? 1 : 0));
  if (label.length > labelRoom) label = labelRoom > 1 ? `…${label.slice(label.length - labelRoom + 1)}` : '';
  const filled = Math.round(pct * barWidth);
  const bar = barWidth > 0 ? `[${'#'.repeat(filled)}${'-'.repeat(barWidth - filled)}]` : '';
  return [label, bar, tail].filter((s) => s !== '').join(' ').slice(0, width);
}

/**
 * A progress callback that redraws one line on `stream` when it is a terminal, and does nothing
 * otherwise (logs and pipes get no bar). Call `end()` once to finish the line.
 */
export function progressBarWriter(stream: NodeJS.WriteStream = process.stderr): { onProgress: (p: DownloadProgress) => void; end: () => void } {
  const tty = stream.isTTY === true;
  let drawn = false;
  return {
    onProgress(p) {
      if (!tty) return;
      stream.write(`\r${renderProgressLine(p, Math.max(20, (stream.columns ?? 80) - 1))}\x1b[K`);
      drawn = true;
    },
    end() {
      if (tty && drawn) stream.write('\n');
      drawn = false;
    },
  };
}
