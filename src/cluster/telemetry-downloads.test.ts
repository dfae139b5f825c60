import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NodeId } from '../common/ids.js';
import { jsonBytes, MAX_TELEMETRY_MESSAGE_BYTES, TelemetryMessage } from '../master/core/messages.js';
import type { DownloadView } from '../models/views.js';
import { DOWNLOAD_FAILURE_REPORTED_MS, DOWNLOAD_REPORT_ERROR_MAX_CHARS, MAX_REPORTED_DOWNLOADS, type DownloadReport } from '../wire/telemetry.js';
import { downloadReports, downloadsView } from './telemetry-downloads.js';

const NODE = (n: number): NodeId => `12D3KooW${String(n).padStart(44, 'x').replace(/0/g, 'z')}` as NodeId;
const NOW = Date.parse('2026-12-02T02:00:00Z');

function view(id: string, overrides: Partial<DownloadView> = {}): DownloadView {
  return {
    id,
    modelId: 'acme/m:Q4_K_M',
    repo: 'acme/m',
    revision: 'f'.repeat(40),
    state: 'downloading',
    files: [],
    doneBytes: 100,
    totalBytes: 1000,
    fetchedBytes: 100,
    bytesPerSecond: 50,
    etaSeconds: 18,
    done: false,
    startedAt: new Date(NOW - 2000).toISOString(),
    finishedAt: null,
    path: null,
    error: null,
    source: { kind: 'hub', endpoint: 'http://127.0.0.1:1' },
    peerFailures: [],
    ...overrides,
  };
}

test('the largest downloads report the schema allows stays under the telemetry byte limit', () => {
  const downloads: DownloadReport[] = Array.from({ length: MAX_REPORTED_DOWNLOADS }, (_, i) => ({
    id: 'd'.repeat(32),
    modelId: `${i}/${'m'.repeat(195)}:Q8` as DownloadReport['modelId'],
    state: 'failed',
    doneBytes: Number.MAX_SAFE_INTEGER,
    totalBytes: Number.MAX_SAFE_INTEGER,
    bytesPerSecond: Number.MAX_SAFE_INTEGER,
    source: { kind: 'peer', nodeId: NODE(2) },
    // Three UTF-8 bytes a character: the longest message in bytes.
    error: { code: 'C'.repeat(40), message: '€'.repeat(DOWNLOAD_REPORT_ERROR_MAX_CHARS) },
    agoMs: Number.MAX_SAFE_INTEGER,
  }));
  const message = { type: 'downloads', clusterId: 'c'.repeat(32), nodeId: NODE(1), seq: Number.MAX_SAFE_INTEGER, downloads };
  assert.equal(TelemetryMessage.parse(message).type, 'downloads');
  assert.ok(jsonBytes(message) < MAX_TELEMETRY_MESSAGE_BYTES, `${jsonBytes(message)} bytes of JSON`);
  assert.equal(TelemetryMessage.safeParse({ ...message, downloads: [...downloads, downloads[0]] }).success, false, 'one more entry is refused');
});

test('reports: running ones newest first, then recent failures with their clipped error; done and old failures are left out', () => {
  const failedAt = new Date(NOW - 1000).toISOString();
  const long = `the model hub at http://127.0.0.1:1 cut the transfer ${'x'.repeat(300)}`;
  const reports = downloadReports(
    [
      view('dl-old', { startedAt: new Date(NOW - 9000).toISOString(), source: { kind: 'peer', nodeId: NODE(3), name: 'gamma' } }),
      view('dl-new', { state: 'resolving', source: null, bytesPerSecond: 0 }),
      view('dl-done', { state: 'done', finishedAt: failedAt, done: true }),
      view('dl-failed', { state: 'failed', finishedAt: failedAt, error: { code: 'HUB_UNREACHABLE', reason: null, message: long } }),
      view('dl-stale', { state: 'failed', finishedAt: new Date(NOW - DOWNLOAD_FAILURE_REPORTED_MS - 1).toISOString(), error: { code: 'X', reason: null, message: 'old' } }),
    ],
    NOW,
  );
  assert.deepEqual(reports.map((r) => r.id), ['dl-new', 'dl-old', 'dl-failed']);
  assert.deepEqual(reports[1]?.source, { kind: 'peer', nodeId: NODE(3) });
  assert.equal(reports[1]?.agoMs, 9000);
  assert.equal(reports[0]?.source, null);
  const failed = reports[2];
  assert.equal(failed?.error?.code, 'HUB_UNREACHABLE');
  assert.equal(failed?.error?.message.length, DOWNLOAD_REPORT_ERROR_MAX_CHARS);
  assert.ok(failed?.error?.message.endsWith('…'));
  assert.equal(failed?.agoMs, 1000, 'a failure counts from when it ended');
});

test('reports: at most MAX_REPORTED_DOWNLOADS, running ones kept first', () => {
  const many = Array.from({ length: MAX_REPORTED_DOWNLOADS + 2 }, (_, i) => view(`dl-${i}`, { startedAt: new Date(NOW - i * 10).toISOString() }));
  const failed = view('dl-f', { state: 'failed', finishedAt: new Date(NOW).toISOString(), error: { code: 'X', reason: null, message: 'no' } });
  const reports = downloadReports([failed, ...many], NOW);
  assert.equal(reports.length, MAX_REPORTED_DOWNLOADS);
  assert.ok(reports.every((r) => r.state === 'downloading'));
});

test('the view names peer sources from the roster and drops nodes that are no longer members', () => {
  const report = downloadReports([view('dl-1', { source: { kind: 'peer', nodeId: NODE(3), name: 'gamma' } })], NOW)[0] as DownloadReport;
  const names = (id: NodeId): string | null => (id === NODE(1) ? 'alpha' : id === NODE(3) ? 'gamma' : null);
  const out = downloadsView(new Map([[NODE(1), { downloads: [report], ageMs: 12.4 }], [NODE(9), { downloads: [report], ageMs: 1 }]]), names);
  assert.deepEqual(Object.keys(out), [NODE(1)]);
  assert.equal(out[NODE(1)]?.ageMs, 12);
  assert.deepEqual(out[NODE(1)]?.downloads[0]?.source, { kind: 'peer', nodeId: NODE(3), name: 'gamma' });
});
