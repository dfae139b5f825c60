import '../src/polyfill.js';
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Runs every benchmark in bench/, each in its own process, and writes one JSON file per benchmark
 * to bench/results/<timestamp>/. Each benchmark takes its own options when run alone.
 */
const BENCHMARKS = ['serve-overhead', 'log-append', 'control-plane'];

const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const outDir = join('bench', 'results', stamp);
mkdirSync(outDir, { recursive: true });
let failed = 0;
for (const name of BENCHMARKS) {
  const script = fileURLToPath(new URL(`./${name}.js`, import.meta.url));
  process.stderr.write(`== ${name}\n`);
  const result = spawnSync(process.execPath, [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    failed += 1;
    process.stderr.write(`${name} failed with ${result.status ?? result.signal}\n`);
    continue;
  }
  writeFileSync(join(outDir, `${name}.json`), result.stdout);
  process.stdout.write(result.stdout);
}
process.stderr.write(`results in ${outDir}\n`);
process.exitCode = failed > 0 ? 1 : 0;
