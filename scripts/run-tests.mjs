#!/usr/bin/env node
// Runs node's built-in test runner over the compiled tests. Node 20's `--test` takes no globs, so the
// files are found here. Usage: node scripts/run-tests.mjs [unit|sim|integration|multihost|browser|all]
// (default all).
// dist/dashboard holds the tests of the dashboard's pure helpers (dashboard/src/lib, built by the root tsc).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

const tier = process.argv[2] ?? 'all';
const roots = {
  unit: ['dist/src', 'dist/bench', 'dist/dashboard'],
  sim: ['dist/test/simulation'],
  integration: ['dist/test/integration'],
  multihost: ['dist/test/multihost'],
  browser: ['dist/test/browser'],
  all: ['dist/src', 'dist/bench', 'dist/dashboard', 'dist/test'],
}[tier];
if (!roots) {
  console.error(`unknown test tier "${tier}": use unit, sim, integration, multihost, browser or all`);
  process.exit(2);
}

function find(dir) {
  let out = [];
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const name of entries) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out = out.concat(find(path));
    else if (name.endsWith('.test.js')) out.push(path);
  }
  return out;
}

const files = roots.flatMap(find).sort();
if (files.length === 0) {
  console.error('no test files found: run `npm run build` first');
  process.exit(1);
}
const concurrency = process.env.SHOAL_TEST_CONCURRENCY ?? '1';
// No node a test starts provisions engines unless its test asks (SHOAL_PROVISION=1 in that node's env):
// on a machine without cached engines a background build would run for many minutes beside the suite.
process.env.SHOAL_PROVISION ??= '0';
const result = spawnSync(
  process.execPath,
  // --test-force-exit: a test file whose tests all finished but left a handle open (a libp2p timer, a
  // stream) would otherwise keep its process, and the whole run, waiting until CI's time limit.
  ['--test', '--test-force-exit', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...files],
  { stdio: 'inherit' },
);
process.exit(result.status ?? 1);
