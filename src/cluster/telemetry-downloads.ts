// This node's downloads as the telemetry plane carries them, and the others' as this node heard them:
// the whole cluster sees every member's downloads (bytes, rate, source, error). Pure but for the
// `Heard` bookkeeping; the clock comes in.

import type { NodeId } from '../common/ids.js';
import type { DownloadReportView, NodeDownloadsView } from '../api/control/control.js';
import type { DownloadView } from '../models/views.js';
import {
  DOWNLOAD_FAILURE_REPORTED_MS,
  DOWNLOAD_REPORT_ERROR_MAX_CHARS,
  DownloadReport,
  MAX_REPORTED_DOWNLOADS,
} from '../wire/telemetry.js';

/** Downloads go out every beat while any is listed, and at least this often otherwise (a lost "none" heals). */
export const DOWNLOADS_INTERVAL_MS = 1_000;
export const DOWNLOADS_IDLE_INTERVAL_MS = 5_000;

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * The reports for `views` (GET /models/downloads): every running download, newest first, then those that
 * failed or were cancelled within DOWNLOAD_FAILURE_REPORTED_MS, newest first; finished ones are the
 * artifacts report's business. At most MAX_REPORTED_DOWNLOADS; one the wire schema refuses is left out.
 */
export function downloadReports(views: readonly DownloadView[], nowMs: number): DownloadReport[] {
  const running = views.filter((d) => d.finishedAt === null).sort((a, b) => Date.parse(b.startedAt) - Date.parse(a.startedAt));
  const failed = views
    .filter((d) => (d.state === 'failed' || d.state === 'cancelled') && d.finishedAt !== null && nowMs - Date.parse(d.finishedAt) <= DOWNLOAD_FAILURE_REPORTED_MS)
    .sort((a, b) => Date.parse(b.finishedAt as string) - Date.parse(a.finishedAt as string));
  const out: DownloadReport[] = [];
  for (const d of [...running, ...failed]) {
    if (out.length >= MAX_REPORTED_DOWNLOADS) break;
    const since = d.finishedAt ?? d.startedAt;
    const report = DownloadReport.safeParse({
      id: d.id,
      modelId: d.modelId,
      state: d.state,
      doneBytes: d.doneBytes,
      totalBytes: d.totalBytes,
      bytesPerSecond: Math.max(0, d.bytesPerSecond),
      source: d.source === null ? null : d.source.kind === 'peer' ? { kind: 'peer', nodeId: d.source.nodeId } : { kind: d.source.kind },
      error: d.error === null ? null : { code: d.error.code.slice(0, 40), message: clip(d.error.message, DOWNLOAD_REPORT_ERROR_MAX_CHARS) },
      agoMs: Math.max(0, Math.round(nowMs - Date.parse(since))),
    });
    if (report.success) out.push(report.data);
  }
  return out;
}

/** `reports` per node with the peer sources named from `names` (the roster); a node that left is dropped. */
export function downloadsView(reports: ReadonlyMap<NodeId, { downloads: DownloadReport[]; ageMs: number }>, names: (nodeId: NodeId) => string | null): Record<string, NodeDownloadsView> {
  const out: Record<string, NodeDownloadsView> = {};
  for (const [nodeId, heard] of reports) {
    if (names(nodeId) === null) continue;
    out[nodeId] = { ageMs: Math.round(heard.ageMs), downloads: heard.downloads.map((d) => reportView(d, names)) };
  }
  return out;
}

/** One report with its peer source named (null when the peer is no longer a member). */
export function reportView(d: DownloadReport, names: (nodeId: NodeId) => string | null): DownloadReportView {
  return { ...d, source: d.source?.kind === 'peer' ? { kind: 'peer', nodeId: d.source.nodeId, name: names(d.source.nodeId) } : d.source };
}
