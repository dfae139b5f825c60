#!/usr/bin/env node
// `npm start [-- <shoal run options>]`: builds Shoal when a source changed since the last build made
// here, then runs `shoal run` in this process. A full build takes about a minute, so an unchanged
// checkout must not pay it at every start; the build says what it does so the wait is not silence.
//
// "Changed" is a hash of the contents of every build input (sources, configs, the lockfile), kept in
// dist/.build-stamp after a build that succeeded. Contents, not mtimes: a checkout or a copy that
// touches files without changing them does not rebuild, and an edit within the same second does.
import { createHash } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const stampPath = join(root, 'dist', '.build-stamp');
const entry = join(root, 'dist', 'src', 'cli', 'main.js');
const dashboardIndex = join(root, 'dashboard', 'dist', 'index.html');

/** Directories whose files the build reads (tsconfig.json's include, the dashboard's Vite input). */
const INPUT_DIRS = ['src', 'test', 'bench', 'scripts', 'dashboard/src'];
const INPUT_FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'dashboard/index.html', 'dashboard/vite.config.ts', 'dashboard/tsconfig.json'];
/** Outputs and data under the input dirs, which no build reads. */
const SKIPPED = new Set(['node_modules', 'dist', 'results', 'models', '.git']);

function inputFiles(dir) {
  let entries;
  try {
    entries = readdirSync(join(root, dir), { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const path = `${dir}/${e.name}`;
    if (e.isDirectory()) return SKIPPED.has(e.name) ? [] : inputFiles(path);
    return e.isFile() && !e.name.endsWith('.gguf') ? [path] : [];
  });
}

function sourcesHash() {
  const hash = createHash('sha256');
  const files = [...INPUT_FILES.filter((f) => existsSync(join(root, f))), ...INPUT_DIRS.flatMap(inputFiles)].sort();
  for (const file of files) {
    hash.update(`${file}\0`);
    hash.update(readFileSync(join(root, file)));
    hash.update('\0');
  }
  return hash.digest('hex');
}

function run(what, args) {
  console.error(`  ${what}…`);
  const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) {
    console.error(`the build failed while ${what}: fix the error above, then run 'npm start' again`);
    process.exit(result.status ?? 1);
  }
}

const hash = sourcesHash();
const stamp = existsSync(stampPath) ? readFileSync(stampPath, 'utf8').trim() : null;
const built = existsSync(entry) && existsSync(dashboardIndex);
if (built && stamp === hash) {
  console.error('Shoal is built and no source changed since: starting the node');
} else {
  const why = !built ? 'no build yet' : stamp === null ? 'built outside npm start' : 'sources changed';
  console.error(`building Shoal (${why})… this takes about a minute`);
  const started = Date.now();
  run('compiling TypeScript', [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json']);
  run('building the dashboard', [join(root, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', 'dashboard', '--logLevel', 'warn']);
  writeFileSync(stampPath, `${hash}\n`);
  console.error(`built in ${Math.round((Date.now() - started) / 1000)} s (${relative(process.cwd(), stampPath) || stampPath} records what was built): starting the node`);
}

// The node runs in this process, so signals reach it directly and its exit code is npm's.
process.argv = [process.argv[0], entry, 'run', ...process.argv.slice(2)];
await import(pathToFileURL(entry).href);
