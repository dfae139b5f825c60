import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { ensureLlamaServer, machineInfo, versions } from './common.js';
import { linkAvailable } from './link.js';
import { concurrencyPoints, renderPng, throughputSpec, ttftSpec } from './plots.js';
import { renderReport, type Plot, type ReportMeta } from './report.js';

/**
 * Runs every benchmark in bench/, each in its own process, and writes one JSON file per benchmark
 * to bench/results/<timestamp>/, the concurrency plots as PNG, meta.json (machine, versions, timing)
 * and a REPORT.md beside them. A benchmark fails the run only when it cannot run (it exits non-zero);
 * no speed figure does. Each benchmark also runs alone: `node dist/bench/<name>.js [--quick]`.
 *
 * Usage: npm run bench [-- --quick] [-- --only concurrency,model-transfer]
 * Then `npm run bench:readme` puts the headline figures into README.md.
 */

// In the order they run: the inference benchmarks first, while nothing else of the run is warm.
const BENCHMARKS = ['physical-limit', 'serve-overhead', 'llama-server-baseline', 'prediction', 'concurrency', 'in-process-concurrency', 'prefix-cache', 'multi-node', 'model-transfer', 'model-transfer-link', 'peer-copy', 'peer-copy-link', 'install-size', 'log-append', 'control-plane'];

// `<name>-link` runs the transfer benchmark `<name>` again with its server and client sides in two network
// namespaces joined by a link shaped to LINK_RATE (bench/link.ts): the LAN users copy models over, where the
// link and not the CPU bounds both Shoal and curl. Needs root, ip, tc and nft; skipped with the reason otherwise.
const LINK_RATE = '1gbit';
const LINK_VARIANTS: Record<string, string> = { 'model-transfer-link': 'model-transfer', 'peer-copy-link': 'peer-copy' };

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
  },
});
const quick = values.quick === true;
const selected = values.only ? values.only.split(',').map((s) => s.trim()) : BENCHMARKS;
const unknown = selected.filter((name) => !BENCHMARKS.includes(name));
if (unknown.length) throw new Error(`unknown benchmark(s) ${unknown.join(', ')}: choose from ${BENCHMARKS.join(', ')}`);

const startedAt = new Date();
const started = performance.now();
const loadAtStart = loadavg()[0]!;
const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
const outDir = join('bench', 'results', stamp);
mkdirSync(outDir, { recursive: true });
process.stderr.write(`benchmarks${quick ? ' (--quick)' : ''}: ${selected.join(', ')} → ${outDir}\n`);

// Looked up once up front (never built: ensureLlamaServer), so a missing engine is said before the first benchmark.
try {
  process.stderr.write(`llama-server: ${await ensureLlamaServer()}\n`);
} catch (error) {
  process.stderr.write(`${(error as Error).message}; the benchmarks that compare with it will fail\n`);
}

// Asynchronous, so a Ctrl-C or SIGTERM reaches this process between benchmarks' output and stops the
// run (common.ts exits on them); the benchmark running then is told to stop too, and cleans up itself.
let current: ChildProcess | null = null;
process.once('exit', () => current?.kill('SIGTERM'));

function runBenchmark(script: string, args: string[] = []): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...(quick ? ['--quick'] : []), ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    current = child;
    let stdout = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      current = null;
      resolve({ code, signal, stdout });
    });
  });
}

let failed = 0;
const results: Record<string, unknown> = {};
const secondsByBenchmark: Record<string, number> = {};
let linkCheck: Awaited<ReturnType<typeof linkAvailable>> | undefined;
for (const name of BENCHMARKS.filter((b) => selected.includes(b))) {
  const base = LINK_VARIANTS[name];
  if (base !== undefined) {
    linkCheck ??= await linkAvailable();
    if (!linkCheck.ok) {
      process.stderr.write(`== ${name}: skipped (${linkCheck.reason})\n`);
      continue;
    }
  }
  const script = fileURLToPath(new URL(`./${base ?? name}.js`, import.meta.url));
  process.stderr.write(`== ${name}\n`);
  const benchStarted = performance.now();
  const result = await runBenchmark(script, base === undefined ? [] : ['--link', LINK_RATE]);
  secondsByBenchmark[name] = Math.round((performance.now() - benchStarted) / 100) / 10;
  process.stderr.write(`== ${name}: ${secondsByBenchmark[name]} s\n`);
  if (result.code !== 0) {
    failed += 1;
    process.stderr.write(`${name} failed with ${result.code ?? result.signal}\n`);
    results[name] = { error: `exited with ${result.code ?? result.signal}`, ...parseResult(result.stdout) };
    continue;
  }
  writeFileSync(join(outDir, `${name}.json`), result.stdout);
  results[name] = parseResult(result.stdout);
}

const plots: Plot[] = [];
const points = concurrencyPoints(results.concurrency);
if (points.throughput.length > 0) {
  const c = results.concurrency as { model?: { name?: string }; threads?: number; slots?: number; maxTokens?: number };
  const subtitle = `${c.model?.name ?? 'model'}, ${c.threads} engine thread(s), ${c.slots} slots, ${c.maxTokens} tokens per request; ${machineInfo().cpuModel}`;
  try {
    writeFileSync(join(outDir, 'concurrency-throughput.png'), await renderPng(throughputSpec(points.throughput, subtitle)));
    plots.push({ benchmark: 'concurrency', file: 'concurrency-throughput.png', alt: 'Aggregate decode throughput vs concurrent clients, Shoal vs llama-server' });
    writeFileSync(join(outDir, 'concurrency-ttft.png'), await renderPng(ttftSpec(points.ttft, subtitle)));
    plots.push({ benchmark: 'concurrency', file: 'concurrency-ttft.png', alt: 'Time to first token p50 and p95 vs concurrent clients, Shoal vs llama-server' });
  } catch (error) {
    process.stderr.write(`plots not drawn: ${(error as Error).message}\n`);
  }
}

const durationS = Math.round((performance.now() - started) / 100) / 10;
const machine = machineInfo();
const meta: ReportMeta = {
  startedAt: startedAt.toISOString(),
  durationS,
  quick,
  machine: { cpuModel: machine.cpuModel, cores: machine.cores, memoryBytes: machine.memoryBytes, gpu: machine.gpu },
  versions: await versions(),
  loadAverage: { start: Math.round(loadAtStart * 100) / 100, end: machine.loadAverage1m },
  plots,
  secondsByBenchmark,
};
writeFileSync(join(outDir, 'meta.json'), `${JSON.stringify(meta, null, 2)}\n`);
const reportPath = join(outDir, 'REPORT.md');
writeFileSync(reportPath, renderReport(results, meta));
process.stderr.write(`run took ${durationS} s (${Object.entries(secondsByBenchmark).map(([n, s]) => `${n} ${s} s`).join(', ')})\n`);
process.stderr.write(`report: ${reportPath}\n`);
process.stderr.write('README: `npm run bench:readme` copies it to bench/latest/ and refreshes the Performance section\n');
process.exitCode = failed > 0 ? 1 : 0;

/** A benchmark's stdout as JSON; a failed or partial run may print something else. */
function parseResult(stdout: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(stdout);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
