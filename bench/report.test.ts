import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { headlines, renderReport, type ReportMeta } from './report.js';

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

describe('renderReport, comparisons with the hand-launched engines', () => {
  const model = { name: 'bench-100M-f16', params: 100e6, type: 'f16', bytes: 200 * 1024 ** 2 };
  const results = {
    'physical-limit': {
      quick: true,
      bandwidth: [
        { threads: 1, gbPerS: summary(30) },
        { threads: 2, gbPerS: summary(40) },
      ],
      engineThreads: 2,
      bandwidthGBPerS: 40,
      model: { ...model, bytesReadPerToken: 200 * 1024 ** 2 },
      decodeBoundTokPerS: 190.7,
      llamaServerDecodeTokPerS: summary(150),
      fractionOfBound: 0.787,
      machine: { cores: 2, loadAverage1m: 3.5 },
    },
    'serve-overhead': {
      model,
      direct: { decodeTokPerS: summary(100), ttftMs: summary(30) },
      shoal: { decodeTokPerS: summary(95), ttftMs: summary(33) },
      decodeRatio: 0.95,
      ttftOverheadMs: 3,
    },
    'llama-server-baseline': {
      model,
      threads: 2,
      slots: 1,
      maxTokens: 64,
      shoal: { decodeTokPerS: summary(95), ttftMs: summary(33) },
      llamaServer: { decodeTokPerS: summary(150), ttftMs: summary(20) },
      decodeRatio: 0.633,
      ttftRatio: 1.65,
      ttftOverheadMs: 13,
      llamaServerCommand: 'llama-server -m m.gguf -t 2',
    },
    concurrency: {
      model: { name: 'bench-20M-f16', params: 20e6, type: 'f16', bytes: 40e6 },
      threads: 2,
      slots: 16,
      reps: 1,
      maxTokens: 32,
      results: [
        { clients: 1, shoal: { aggregateTokPerS: summary(200), ttftMs: { p50: 20, p95: 22 } }, llamaServer: { aggregateTokPerS: summary(400), ttftMs: { p50: 10, p95: 11 } }, aggregateRatio: 0.5, ttftP95Ratio: 2 },
        { clients: 16, shoal: { aggregateTokPerS: summary(800), ttftMs: { p50: 120, p95: 200 } }, llamaServer: { aggregateTokPerS: summary(1000), ttftMs: { p50: 100, p95: 150 } }, aggregateRatio: 0.8, ttftP95Ratio: 1.333 },
      ],
    },
    'model-transfer': {
      file: { name: 'bench-100M-f16.gguf', bytes: 200e6 },
      baseline: 'curl',
      throughput: { curl: { mbPerS: summary(1000) }, hubDownload: { mbPerS: summary(250) }, curlFsync: { mbPerS: summary(700) } },
      ratios: { hubDownload: 0.25, curlFsync: 0.7 },
      targetRatio: '>= 0.9',
    },
    'install-size': { fresh: false, totalBytes: 1024 ** 3, packages: 475, bytesByCategory: { production: 140 * 1024 ** 2, optional: 700 * 1024 ** 2, dev: 200 * 1024 ** 2 }, largest: [{ name: 'big', bytes: 300 * 1024 ** 2, category: 'optional' }] },
  };
  const report = renderReport(results, {
    ...meta,
    quick: true,
    loadAverage: { start: 1, end: 4 },
    secondsByBenchmark: { 'physical-limit': 9.5, concurrency: 36 },
    plots: [{ benchmark: 'concurrency', file: 'concurrency-throughput.png', alt: 'Throughput vs clients' }],
  });

  it('says it is a quick run and how noisy the machine was', () => {
    assert.match(report, /mode: quick/);
    assert.match(report, /> Quick run \(`npm run bench -- --quick`\)/);
    assert.match(report, /Load average \(1 min\): 1 at the start, 4 at the end/);
    assert.match(report, /Time per benchmark: physical-limit 9\.5 s, concurrency 36 s/);
  });

  it('renders Shoal against llama-server with ratios', () => {
    assert.match(row(report, "Decode tok/s, Shoal's API"), /ratio 0\.633× llama-server/);
    assert.match(row(report, "TTFT, Shoal's API"), /ratio 1\.65×, \+13 ms/);
    assert.match(report, /Baseline command: `llama-server -m m\.gguf -t 2`/);
  });

  it('renders the concurrency curve as a table per level and embeds its plot', () => {
    assert.match(row(report, '16'), /\| 16 \| 800 \(799–801\) \| 1000 \(999–1001\) \| 0\.8× \| 120 \/ 200 ms \| 100 \/ 150 ms \| 1\.33× \|/);
    assert.match(report, /## concurrency[\s\S]*!\[Throughput vs clients\]\(concurrency-throughput\.png\)/);
  });

  it('puts measured decode next to the bandwidth bound, with the other decodes of the same model', () => {
    assert.match(row(report, 'Memory read bandwidth, 2 thread(s)'), /\| 40 GB\/s \|/);
    assert.match(row(report, 'Decode, llama-server by hand'), /78\.7% of the 190\.7 tok\/s bound/);
    assert.match(report, /Bound at 2 engine thread\(s\): 40 GB\/s ÷ 200 MiB = \*\*190\.7 tok\/s\*\*/);
    assert.match(report, /Shoal's API \(llama-server-baseline\): 95 tok\/s = 49\.82% of the bound/);
    assert.match(report, /node-llama-cpp in-process \(serve-overhead\): 100 tok\/s = 52\.44% of the bound/);
  });

  it('compares the download path with curl against its target', () => {
    assert.match(row(report, "Shoal's download path"), /\| 250 MB\/s \|.*ratio 0\.25× curl \(target >= 0\.9: ❌ not met\)/);
    assert.match(row(report, 'curl -o (baseline)'), /\| 1000 MB\/s \|.*baseline/);
  });

  it('says when the install size is not from a fresh npm ci', () => {
    assert.match(report, /\*\*Not a fresh install\*\* \(--quick\): this checkout's node_modules, \*\*1024 MiB\*\*/);
    assert.match(report, /\| big \| 300 MiB \| optional \|/);
  });

  it('opens with the headline figures', () => {
    const list = headlines(results);
    assert.deepEqual(
      list.map((h) => [h.key, h.value]),
      [
        ['decodeVsLlamaServer', '0.633×'],
        ['ttftVsLlamaServer', '+13 ms'],
        ['decodeVsDirect', '0.95×'],
        ['concurrencyThroughput', '0.8×'],
        ['physicalBound', '78.7%'],
        ['downloadVsCurl', '0.25×'],
        ['installSize', '1024 MiB'],
      ],
    );
    assert.match(list.find((h) => h.key === 'physicalBound')!.detail, /Shoal's API 49\.82%/);
    assert.match(list.find((h) => h.key === 'concurrencyThroughput')!.label, /at 16 concurrent clients/);
    assert.match(report, /## Headlines\n\n\| Figure \| Result \| Measured against \|/);
  });

  it('quotes the in-process engine against node-llama-cpp called directly, from the first model measured', () => {
    const list = headlines({
      'in-process-concurrency': {
        clients: 16,
        threads: 2,
        targets: { aggregateRatio: '>= 0.9' },
        results: [
          {
            model: { name: 'bench-20M-f16' },
            shoal: { aggregateTokPerS: summary(430), ttftMs: { p50: 290, p95: 310 } },
            direct: { aggregateTokPerS: summary(520), ttftMs: { p50: 330, p95: 350 } },
            aggregateRatio: 0.827,
          },
          { model: { name: 'shoal-tiny' }, aggregateRatio: 0.5 },
        ],
      },
    });
    const line = list.find((h) => h.key === 'inProcessConcurrency');
    assert.ok(line);
    assert.equal(line.value, '0.827×');
    assert.match(line.label, /at 16 concurrent clients/);
    assert.match(line.detail, /^430 vs 520 tok\/s, bench-20M-f16, 2 engine thread\(s\); TTFT p95 310 vs 350 ms; target >= 0\.9$/);
  });
});
