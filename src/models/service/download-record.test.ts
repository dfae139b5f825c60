import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ModelsError } from '../hub/errors.js';
import { RATE_WINDOW_MS } from '../store/progress.js';
import { downloadView, type DownloadRecord } from './download-record.js';

const T0 = Date.UTC(2026, 0, 1);

function record(over: Partial<DownloadRecord> = {}): DownloadRecord {
  return {
    id: 'dl-1',
    modelId: 'acme/M-GGUF:Q4_K_M',
    repo: 'acme/M-GGUF',
    revision: 'a'.repeat(40),
    state: 'downloading',
    progress: { modelId: 'acme/M-GGUF:Q4_K_M', repo: 'acme/M-GGUF', revision: 'a'.repeat(40), files: [], doneBytes: 10, totalBytes: 100, fetchedBytes: 10, bytesPerSecond: 5, etaSeconds: 18, done: false },
    progressAtMs: T0,
    startedAtMs: T0,
    finishedAtMs: null,
    path: null,
    error: null,
    controller: new AbortController(),
    settled: Promise.resolve(),
    source: { kind: 'hub', endpoint: 'http://hub' },
    peerFailures: [],
    ...over,
  };
}

test('a running download shows its rate until its last progress is older than the rate window', () => {
  assert.deepEqual([downloadView(record(), T0 + 100).bytesPerSecond, downloadView(record(), T0 + 100).etaSeconds], [5, 18]);
  const stale = downloadView(record(), T0 + RATE_WINDOW_MS + 1);
  assert.deepEqual([stale.bytesPerSecond, stale.etaSeconds], [0, null]);
});

test('a finished download has no rate; a done one no time left; a failed one its error with the reason', () => {
  const done = downloadView(record({ state: 'done', finishedAtMs: T0 + 50, path: '/m.gguf' }), T0 + 60);
  assert.deepEqual([done.bytesPerSecond, done.etaSeconds, done.done, done.finishedAt], [0, 0, true, new Date(T0 + 50).toISOString()]);
  const failed = downloadView(record({ state: 'failed', finishedAtMs: T0 + 50, error: new ModelsError('CHECKSUM_MISMATCH', 'bad bytes') }), T0 + 60);
  assert.deepEqual([failed.etaSeconds, failed.error], [null, { code: 'INTERNAL', reason: 'CHECKSUM_MISMATCH', message: 'bad bytes' }]);
});
