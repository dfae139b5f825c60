import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderReport, type ReportMeta } from './report.js';

const meta: ReportMeta = {
  startedAt: new Date('2025-01-02T03:04:05Z'),
  durationS: 321.5,
  machine: { cpuModel: 'Test CPU 9000', cores: 8, memoryBytes: 16 * 1024 ** 3, gpu: null },
  versions: { shoal: '0.1.0', node: 'v20.0.0', nodeLlamaCpp: '3.21.1', llamaCppCommit: 'abc123' },
};

const summary = (median: number, n = 5) => ({ median, min: median - 1, max: median + 1, p25: median - 0.5, p75: median + 0.5, n, samples: [] });

/** The table row whose first cell starts with `label`. */
function row(report: string, label: string): string {
  const line = report.split('\n').find((l) => l.startsWith(`| ${label}`));
  assert.ok(line, `no row ${label} in\n${report}`);
  return line;
}

describe('renderReport', () => {
  it('has a title with the date, machine and versions', () => {
    const report = renderReport({}, meta);
    assert.match(report, /^# Shoal benchmark report — 2025-01-02/);
    assert.match(report, /Test CPU 9000, 8 logical cores, 16 GiB memory, GPU: none/);
    assert.match(report, /Shoal 0\.1\.0, Node v20\.0\.0, node-llama-cpp 3\.21\.1, llama\.cpp abc123/);
    assert.match(report, /duration: 321\.5 s/);
  });

  it('renders serve-overhead medians, spread, ratio and overhead against the direct baseline', () => {
    const report = renderReport(
      {
        'serve-overhead': {
          benchmark: 'serve-overhead',
          direct: { decodeTokPerS: summary(80), ttftMs: summary(100) },
          shoal: { decodeTokPerS: summary(76), ttftMs: summary(104) },
          decodeRatio: 0.95,
          ttftOverheadMs: 4,
          targets: { decodeRatio: '>= 0.97', ttftOverheadMs: '<= 10' },
        },
      },
      meta,
    );
    assert.match(report, /## serve-overhead/);
    const decode = row(report, 'Decode tok/s, via Shoal');
    assert.match(decode, /\| 76 tok\/s \| 75–77 \| 75\.5–76\.5 \| 5 \|/);
    assert.match(decode, /ratio 0\.95 \(target >= 0\.97: ❌ not met\)/);
    assert.match(row(report, 'Decode tok/s, node-llama-cpp direct'), /\| 80 tok\/s \|/);
    assert.match(row(report, 'TTFT, via Shoal'), /overhead \+4 ms \(target <= 10 ms: ✅ met\)/);
  });

  it('marks control-plane targets met and not met, with the ratio to the target', () => {
    const report = renderReport(
      {
        'control-plane': {
          reps: 3,
          eventAppend: { eventsPerS: summary(150000, 3), meetsTarget: true },
          startToListed: { listedMs: summary(800, 3), meetsTarget: false, failures: ['rep 2: timeout'] },
          failover: { acceptedMs: summary(1500, 3), meetsTarget: true },
          catchUp: { error: 'follower never caught up' },
          targets: { startToListedMs: '<= 500', failoverMs: '<= 3000', eventsPerS: '>= 20000', catchUpMs: '<= 2000', nodeRssMiB: '<= 200' },
        },
      },
      meta,
    );
    const append = row(report, 'Event append');
    assert.match(append, /150,000 events\/s/);
    assert.match(append, /✅ met/);
    assert.match(append, /7\.5× target/);
    const listed = row(report, 'Start → listed');
    assert.match(listed, /\| 800 ms \|/);
    assert.match(listed, /<= 500 ms \| ❌ not met \| 1\.6× target/);
    assert.match(row(report, 'Failover'), /1,500|1500/);
    assert.match(row(report, 'Follower catch-up'), /\| n\/a \| n\/a \| n\/a \| n\/a \| <= 2000 ms \| n\/a \|/);
    assert.match(report, /catchUp: \*\*Failed:\*\* follower never caught up/);
    assert.match(report, /startToListed: 1 failed repetition\(s\): rep 2: timeout/);
    assert.doesNotMatch(report, /Idle node RSS/);
  });

  it('renders log-append events/s per appender count', () => {
    const report = renderReport(
      {
        'log-append': {
          results: [
            { appenders: 1, eventsPerS: summary(5000), fsyncsPerS: summary(5000), recordsPerFsync: 1 },
            { appenders: 64, eventsPerS: summary(90000), fsyncsPerS: summary(1400), recordsPerFsync: 64.3 },
          ],
          targetEventsPerS: 20000,
          meetsTarget: true,
        },
      },
      meta,
    );
    assert.match(row(report, '1 appender(s)'), /5000 events\/s.*❌ not met/);
    assert.match(row(report, '64 appender(s)'), /90,000 events\/s.*✅ met.*64\.3 records\/fsync/);
    assert.match(report, /Best median meets the target \(>= 20,000 events\/s\): ✅ met/);
  });

  it('shows missing and malformed fields as n/a without throwing', () => {
    const report = renderReport(
      {
        'serve-overhead': { shoal: { decodeTokPerS: 'fast' }, decodeRatio: null },
        'log-append': { results: 'nope' },
        'control-plane': 42,
      },
      { startedAt: 'not a date', durationS: NaN, machine: {}, versions: {} } as unknown as ReportMeta,
    );
    assert.match(row(report, 'Decode tok/s, via Shoal'), /\| n\/a \| n\/a \| n\/a \| n\/a \|.*ratio n\/a/);
    assert.match(report, /Results: n\/a/);
    assert.match(report, /## control-plane\n\nResult: n\/a/);
    assert.match(report, /duration: n\/a/);
  });

  it('dumps the numeric summaries of an unknown benchmark generically', () => {
    const report = renderReport({ 'new-bench': { widgetsPerS: summary(42), nested: { latencyMs: summary(7) }, totalSeconds: 12.5, note: 'x' } }, meta);
    assert.match(report, /## new-bench/);
    assert.match(report, /No dedicated layout/);
    assert.match(row(report, 'widgetsPerS'), /\| 42 \| 41–43 \|/);
    assert.match(row(report, 'nested.latencyMs'), /\| 7 \|/);
    assert.match(report, /- totalSeconds: 12\.5/);
  });
});
