// A download as the models service tracks it, and its view for the API. Pure: the clock comes in.

import type { ShoalError } from '../../common/errors.js';
import { RATE_WINDOW_MS, type DownloadProgress } from '../store/progress.js';
import type { DownloadSource, DownloadState, DownloadView } from '../views.js';
import { failureView } from './failures.js';

export interface DownloadRecord {
  id: string;
  modelId: string;
  repo: string;
  revision: string;
  state: DownloadState;
  progress: DownloadProgress | null;
  progressAtMs: number;
  startedAtMs: number;
  finishedAtMs: number | null;
  path: string | null;
  error: ShoalError | null;
  controller: AbortController;
  settled: Promise<void>;
  source: DownloadSource | null;
  peerFailures: { nodeId: string; name: string; message: string }[];
}

export function downloadView(d: DownloadRecord, nowMs: number): DownloadView {
  const p = d.progress;
  const finished = d.finishedAtMs !== null;
  // A snapshot older than the rate window means nothing arrived since: the rate is not known.
  const stale = !finished && nowMs - d.progressAtMs > RATE_WINDOW_MS;
  const done = d.state === 'done';
  return {
    id: d.id,
    modelId: d.modelId,
    repo: d.repo,
    revision: p?.revision ?? d.revision,
    state: d.state,
    files: p?.files.map((f) => ({ ...f })) ?? [],
    doneBytes: p?.doneBytes ?? 0,
    totalBytes: p?.totalBytes ?? 0,
    fetchedBytes: p?.fetchedBytes ?? 0,
    bytesPerSecond: finished || stale ? 0 : (p?.bytesPerSecond ?? 0),
    etaSeconds: done ? 0 : finished || stale ? null : (p?.etaSeconds ?? null),
    done,
    startedAt: new Date(d.startedAtMs).toISOString(),
    finishedAt: finished ? new Date(d.finishedAtMs as number).toISOString() : null,
    path: d.path,
    error: d.error ? failureView(d.error) : null,
    source: d.source ? { ...d.source } : null,
    peerFailures: d.peerFailures.map((f) => ({ ...f })),
  };
}
