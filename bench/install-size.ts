import { spawnSync } from 'node:child_process';
import { copyFile, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { log, machineInfo, printResult, versions } from './common.js';
import { installBreakdown, type LockEntry } from './install-breakdown.js';

/**
 * What installing Shoal costs on disk: the node_modules of a fresh `npm ci` in a temporary directory
 * holding only this checkout's package.json and package-lock.json (all `npm ci` reads, so it installs
 * exactly what a fresh clone would), measured with `du` (disk blocks), and split by what the lockfile
 * says each package is for (production, optional prebuilt engines, dev). With --quick it measures the
 * checkout's own node_modules instead (no install; it may hold extras) and says so. Prints one JSON object.
 */

const BENCHMARK = 'install-size';
const { values } = parseArgs({ options: { quick: { type: 'boolean', default: false } } });
const quick = values.quick === true;
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Disk bytes of each path, in one `du` run so a file hard-linked into two packages counts once. */
function duBytes(paths: string[], cwd: string): Map<string, number> {
  const sizes = new Map<string, number>();
  const out = spawnSync('du', ['-s', '-B1', '--', ...paths], { cwd, encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  if (out.status !== 0 && out.stdout === '') throw new Error(`du failed: ${out.error?.message ?? out.stderr}`);
  for (const line of out.stdout.split('\n')) {
    const match = /^(\d+)\t(.+)$/.exec(line);
    if (match) sizes.set(match[2]!, Number(match[1]));
  }
  return sizes;
}

/** The top-level package names under a node_modules directory (`x`, `@scope/x`). */
async function installedPackages(nodeModules: string): Promise<string[]> {
  const names: string[] = [];
  for (const entry of await readdir(nodeModules, { withFileTypes: true })) {
    if (!entry.isDirectory() || entry.name.startsWith('.')) continue;
    if (entry.name.startsWith('@')) {
      for (const scoped of await readdir(join(nodeModules, entry.name), { withFileTypes: true })) {
        if (scoped.isDirectory()) names.push(`${entry.name}/${scoped.name}`);
      }
    } else {
      names.push(entry.name);
    }
  }
  return names;
}

async function measure(dir: string): Promise<Record<string, unknown>> {
  const nodeModules = join(dir, 'node_modules');
  const total = duBytes(['node_modules'], dir).get('node_modules');
  if (total === undefined) throw new Error(`cannot measure ${nodeModules}`);
  const names = await installedPackages(nodeModules);
  const sizes = duBytes(names, nodeModules);
  const lock = JSON.parse(await readFile(join(dir, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const breakdown = installBreakdown(lock.packages, sizes);
  return { totalBytes: total, packages: names.length, ...breakdown };
}

async function main(): Promise<void> {
  const npmVersion = spawnSync('npm', ['--version'], { encoding: 'utf8' }).stdout.trim() || null;
  let result: Record<string, unknown>;
  if (quick) {
    log(BENCHMARK, `--quick: measuring this checkout's node_modules, not a fresh npm ci`);
    result = { fresh: false, dir: ROOT, ...(await measure(ROOT)) };
  } else {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-install-'));
    try {
      await copyFile(join(ROOT, 'package.json'), join(dir, 'package.json'));
      await copyFile(join(ROOT, 'package-lock.json'), join(dir, 'package-lock.json'));
      log(BENCHMARK, `npm ci in ${dir}...`);
      const started = performance.now();
      const out = spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: 30 * 60_000 });
      const npmCiSeconds = Math.round((performance.now() - started) / 100) / 10;
      if (out.status !== 0) throw new Error(`npm ci failed (${out.status ?? out.signal}): ${(out.stderr || out.error?.message || '').slice(-2000)}`);
      result = { fresh: true, npmCiSeconds, ...(await measure(dir)) };
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  printResult({
    benchmark: BENCHMARK,
    quick,
    method: quick
      ? "du -s -B1 of this checkout's node_modules (--quick: no fresh install; it may differ from a fresh npm ci)"
      : 'npm ci in a temporary directory with this checkout\'s package.json and package-lock.json; du -s -B1 of its node_modules; categories from package-lock.json (dev, optional, else production) over top-level package directories',
    npm: npmVersion,
    ...result,
    machine: machineInfo(),
    versions: await versions(),
  });
}

await main();
