// Runs the real `shoal doctor --fix`, which builds llama-server and ggml-rpc-server from the llama.cpp
// source bundled with node-llama-cpp into the engine cache ($SHOAL_ENGINE_CACHE, else
// $XDG_CACHE_HOME/shoal/engines, else ~/.cache/shoal/engines). The first run on a machine compiles
// (about 6 minutes on 2 cores); the cache is kept, so later runs find the build and take seconds.
// Then it checks that both binaries run, and that a second --fix is a no-op reporting them cached.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { checkBuildTools, engineCacheRoot, findEngineBuild, readEngineManifest } from '../../src/doctor/engines.js';
import { DoctorReport } from '../../src/doctor/report.js';
import { CLI_PATH } from '../support/node-process.js';

const run = promisify(execFile);
const BUILD_TIMEOUT_MS = 15 * 60_000;

let dataDir: string;

before(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'shoal-engines-build-'));
});

after(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

async function doctorFix(): Promise<{ code: number; report: DoctorReport; stderr: string }> {
  let stdout: string;
  let stderr: string;
  let code = 0;
  try {
    ({ stdout, stderr } = await run(process.execPath, [CLI_PATH, 'doctor', '--fix', '--json', '--data-dir', dataDir], {
      encoding: 'utf8',
      timeout: BUILD_TIMEOUT_MS,
      maxBuffer: 64 * 1024 * 1024,
    }));
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    code = typeof e.code === 'number' ? e.code : 1;
    stdout = e.stdout ?? '';
    stderr = e.stderr ?? '';
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    assert.fail(`doctor --fix printed no JSON (exit ${code}).\nstdout: ${stdout.slice(-2000)}\nstderr: ${stderr.slice(-4000)}`);
  }
  return { code, report: DoctorReport.parse(parsed), stderr };
}

test('doctor --fix builds llama-server and ggml-rpc-server into the cache, and a second --fix finds them cached', { timeout: BUILD_TIMEOUT_MS + 60_000 }, async (t) => {
  if (!(await findEngineBuild())) {
    const tools = await checkBuildTools();
    if (!tools.ok) return t.skip(`no cached build and ${tools.missing.join(', ')} missing (${tools.installHint})`);
  }
  const first = await doctorFix();
  const engineFix = first.report.fixes?.find((fix) => fix.id === 'engines');
  assert.ok(engineFix, `no engines fix in ${JSON.stringify(first.report.fixes)}`);
  assert.ok(engineFix.action === 'built' || engineFix.action === 'cached', `engines fix: ${JSON.stringify(engineFix)}\n${first.stderr.slice(-4000)}`);
  assert.equal(first.code, 0, `doctor --fix exited ${first.code}: ${JSON.stringify(first.report.checks.filter((c) => c.level === 'error'))}`);
  if (engineFix.action === 'built') {
    // Not a terminal: progress comes as plain lines, with cmake's percentages.
    assert.match(first.stderr, /engines: +\d+% build: /, 'no plain progress lines on stderr');
  }

  const { engines, backends } = first.report;
  const source = engines.source;
  assert.ok(source, 'the bundled llama.cpp source was not found');
  assert.equal(engines.cacheRoot, engineCacheRoot());
  assert.equal(engines.cacheDir, join(engineCacheRoot(), source.commit));
  assert.equal(engines.compute, 'cpu');
  for (const binary of engines.binaries) {
    assert.ok(binary.built && binary.runs, `${binary.name}: ${JSON.stringify(binary)}`);
    assert.equal(binary.path, join(engines.cacheDir, 'bin', binary.name));
  }
  assert.ok(backends.tags.includes('llama_cpp-cpu'), backends.tags.join(','));
  assert.ok(backends.tags.includes('llama_server-cpu'), backends.tags.join(','));
  assert.ok(backends.tags.includes('rpc-cpu'), backends.tags.join(','));
  // --fix also made the models directory.
  assert.ok((await stat(join(dataDir, 'models'))).isDirectory());

  // The binaries run on their own; llama-server names the pinned commit.
  const llamaServer = join(engines.cacheDir, 'bin', 'llama-server');
  const server = await run(llamaServer, ['--version'], { encoding: 'utf8', timeout: 30_000 });
  assert.ok(`${server.stdout}${server.stderr}`.includes(source.commit.slice(0, 7)), `llama-server --version: ${server.stderr}`);
  // ggml-rpc-server has no version flag: it prints its usage and exits 0, which proves it runs.
  const rpc = await run(join(engines.cacheDir, 'bin', 'ggml-rpc-server'), ['--version'], { encoding: 'utf8', timeout: 30_000 });
  assert.match(`${rpc.stdout}${rpc.stderr}`, /Usage: .*ggml-rpc-server/);

  const manifestBefore = await readEngineManifest(engines.cacheDir);
  const mtimeBefore = (await stat(llamaServer)).mtimeMs;

  // The second --fix builds nothing.
  const second = await doctorFix();
  assert.equal(second.code, 0);
  const again = second.report.fixes?.find((fix) => fix.id === 'engines');
  assert.equal(again?.action, 'cached', JSON.stringify(again));
  assert.doesNotMatch(second.stderr, /engines: +\d+% build/);
  assert.deepEqual(await readEngineManifest(engines.cacheDir), manifestBefore);
  assert.equal((await stat(llamaServer)).mtimeMs, mtimeBefore);
  assert.ok(second.report.fixes?.every((fix) => fix.action !== 'created'), 'the directories were already there');
});
