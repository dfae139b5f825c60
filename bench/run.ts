import '../src/polyfill.js';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundledSource, nodeLlamaCppDir } from '../src/doctor/engines.js';
import { renderReport } from './report.js';

/**
 * Runs every benchmark in bench/, each in its own process, and writes one JSON file per benchmark
 * to bench/results/<timestamp>/, then a REPORT.md beside them. Each benchmark takes its own options
 * when run alone.
 */
const BENCHMARKS = ['serve-overhead', 'log-append', 'control-plane'];

const startedAt = new Date();
const started = performance.now();
const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
const outDir = join('bench', 'results', stamp);
mkdirSync(outDir, { recursive: true });
let failed = 0;
const results: Record<string, unknown> = {};
for (const name of BENCHMARKS) {
  const script = fileURLToPath(new URL(`./${name}.js`, import.meta.url));
  process.stderr.write(`== ${name}\n`);
  const result = spawnSync(process.execPath, [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    failed += 1;
    process.stderr.write(`${name} failed with ${result.status ?? result.signal}\n`);
    results[name] = { error: `exited with ${result.status ?? result.signal}`, ...parseResult(result.stdout) };
    continue;
  }
  writeFileSync(join(outDir, `${name}.json`), result.stdout);
  results[name] = parseResult(result.stdout);
  process.stdout.write(result.stdout);
}

const reportPath = join(outDir, 'REPORT.md');
writeFileSync(
  reportPath,
  renderReport(results, {
    startedAt,
    durationS: Math.round((performance.now() - started) / 100) / 10,
    machine: { cpuModel: cpus()[0]?.model ?? 'unknown', cores: cpus().length, memoryBytes: totalmem(), gpu: gpuName() },
    versions: {
      shoal: packageVersion(fileURLToPath(new URL('../../package.json', import.meta.url))) ?? 'unknown',
      node: process.version,
      nodeLlamaCpp: nodeLlamaCppVersion() ?? 'unknown',
      llamaCppCommit: bundledSource()?.commit ?? null,
    },
  }),
);
process.stderr.write(`results in ${outDir}\n`);
process.stderr.write(`report: ${reportPath}\n`);
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

function packageVersion(path: string): string | null {
  try {
    const version = (JSON.parse(readFileSync(path, 'utf8')) as { version?: unknown }).version;
    return typeof version === 'string' ? version : null;
  } catch {
    return null;
  }
}

function nodeLlamaCppVersion(): string | null {
  try {
    return packageVersion(join(nodeLlamaCppDir(), 'package.json'));
  } catch {
    return null;
  }
}

/** The first NVIDIA GPU's name, when nvidia-smi is there to say; else null. */
function gpuName(): string | null {
  const out = spawnSync('nvidia-smi', ['--query-gpu=name', '--format=csv,noheader'], { encoding: 'utf8', timeout: 5000 });
  const first = out.status === 0 ? out.stdout.split('\n')[0]?.trim() : '';
  return first ? first : null;
}
