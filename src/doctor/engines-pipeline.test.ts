// The engine build pipeline (clone a git bundle, configure, build, install atomically into the cache,
// progress, abort, failure) run for real with git, cmake and a C++ compiler, on a tiny stand-in source
// tree whose targets are named like llama.cpp's, so it takes seconds. The real llama.cpp build is
// test/integration/engines-build.test.ts.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildEngines, checkBuildTools, engineCacheDir, findEngine, readEngineManifest, type BuildProgress, type EngineSource } from './engines.js';

const run = promisify(execFile);

const MAIN = `#include <cstdio>
#include <cstring>
int main(int argc, char ** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--version") == 0) { std::fprintf(stderr, "version: 1 (fake)\\n"); return 0; }
  return 1;
}
`;

function cmakeLists(extra: string): string {
  return `cmake_minimum_required(VERSION 3.14)
project(fake CXX)
${extra}
add_executable(llama-server main.cpp)
add_executable(ggml-rpc-server main.cpp)
set_target_properties(llama-server ggml-rpc-server PROPERTIES RUNTIME_OUTPUT_DIRECTORY \${CMAKE_BINARY_DIR}/bin)
`;
}

let work: string;
let bundlePath: string;
const commits: { fast: string; slow: string; broken: string } = { fast: '', slow: '', broken: '' };
let toolsOk = false;

function git(...args: string[]): string {
  return execFileSync('git', ['-C', join(work, 'repo'), '-c', 'user.name=t', '-c', 'user.email=t@example.invalid', '-c', 'commit.gpgsign=false', ...args], {
    encoding: 'utf8',
  }).trim();
}

async function commit(files: Record<string, string>, message: string): Promise<string> {
  for (const [name, text] of Object.entries(files)) await writeFile(join(work, 'repo', name), text);
  git('add', '-A');
  git('commit', '-q', '-m', message);
  return git('rev-parse', 'HEAD');
}

before(async () => {
  toolsOk = (await checkBuildTools()).ok;
  if (!toolsOk) return;
  work = await mkdtemp(join(tmpdir(), 'shoal-engines-pipeline-'));
  await mkdir(join(work, 'repo'));
  git('init', '-q');
  commits.fast = await commit({ 'main.cpp': MAIN, 'CMakeLists.txt': cmakeLists('') }, 'fast');
  // Slow: every engine waits on a 60 s step, long enough to abort in the middle of the build.
  commits.slow = await commit(
    {
      'CMakeLists.txt': cmakeLists(`add_custom_command(OUTPUT \${CMAKE_BINARY_DIR}/slow.stamp COMMAND \${CMAKE_COMMAND} -E sleep 60 COMMAND \${CMAKE_COMMAND} -E touch \${CMAKE_BINARY_DIR}/slow.stamp)
add_custom_target(slow DEPENDS \${CMAKE_BINARY_DIR}/slow.stamp)`).replace(
        'set_target_properties',
        'add_dependencies(llama-server slow)\nadd_dependencies(ggml-rpc-server slow)\nset_target_properties',
      ),
    },
    'slow',
  );
  commits.broken = await commit({ 'CMakeLists.txt': cmakeLists(''), 'main.cpp': 'int main( { this is not C++ }\n' }, 'broken');
  bundlePath = join(work, 'source.bundle');
  git('bundle', 'create', '-q', bundlePath, '--all');
});

after(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

function source(commitId: string): EngineSource {
  return { bundlePath, commit: commitId, tag: 'test' };
}

async function leftovers(root: string): Promise<string[]> {
  return (await readdir(root)).filter((name) => name.startsWith('.build-'));
}

test('builds both engines into the cache by commit, with progress, then finds them cached', async (t) => {
  if (!toolsOk) return t.skip('git, cmake, a C++ compiler or make is missing');
  const root = join(work, 'cache-fast');
  const progress: BuildProgress[] = [];
  const result = await buildEngines({ cacheRoot: root, source: source(commits.fast), jobs: 2, onProgress: (p) => progress.push(p) });

  const dir = engineCacheDir(root, commits.fast);
  assert.equal(result.cached, false);
  assert.equal(result.dir, dir);
  assert.equal(result.compute, 'cpu');
  for (const path of Object.values(result.binaries)) {
    const { stderr } = await run(path, ['--version'], { encoding: 'utf8' });
    assert.match(stderr, /version: 1 \(fake\)/);
  }
  const manifest = await readEngineManifest(dir);
  assert.equal(manifest?.commit, commits.fast);
  assert.deepEqual(manifest?.engines, ['llama-server', 'ggml-rpc-server']);
  assert.deepEqual(await leftovers(root), [], 'the temporary build directory is gone');
  assert.deepEqual(await readdir(dir).then((names) => names.sort()), ['bin', 'manifest.json'], 'only the binaries and the manifest are kept');

  // Progress: every phase, never backwards, cmake's percentages in the build phase, 100 at the end.
  assert.deepEqual([...new Set(progress.map((p) => p.phase))], ['clone', 'configure', 'build', 'install']);
  for (let i = 1; i < progress.length; i++) assert.ok((progress[i]?.percent ?? 0) >= (progress[i - 1]?.percent ?? 0), 'progress went backwards');
  assert.ok(progress.some((p) => p.phase === 'build' && /^(compiling main\.cpp|linking (llama-server|ggml-rpc-server))$/.test(p.message)), JSON.stringify(progress));
  assert.equal(progress.at(-1)?.percent, 100);

  assert.equal(await findEngine('llama-server', { cacheRoot: root, commit: commits.fast }), result.binaries['llama-server']);

  const again = await buildEngines({ cacheRoot: root, source: source(commits.fast), onProgress: () => assert.fail('a cached build reports no progress') });
  assert.equal(again.cached, true);
  assert.equal(again.buildSeconds, manifest?.buildSeconds);

  const forced = await buildEngines({ cacheRoot: root, source: source(commits.fast), force: true, jobs: 2 });
  assert.equal(forced.cached, false);
  assert.notEqual((await readEngineManifest(dir))?.builtAt, manifest?.builtAt);
  assert.deepEqual(await leftovers(root), []);
});

test('an abort in the middle of the build stops it and leaves nothing behind', async (t) => {
  if (!toolsOk) return t.skip('git, cmake, a C++ compiler or make is missing');
  const root = join(work, 'cache-abort');
  const controller = new AbortController();
  const started = Date.now();
  await assert.rejects(
    buildEngines({
      cacheRoot: root,
      source: source(commits.slow),
      jobs: 2,
      signal: controller.signal,
      onProgress: (p) => {
        if (p.phase === 'build') setTimeout(() => controller.abort(), 500);
      },
    }),
    { code: 'CANCELLED' },
  );
  // The 60 s step was killed with its process group, not waited for.
  assert.ok(Date.now() - started < 45_000, `abort took ${Date.now() - started} ms`);
  assert.deepEqual(await leftovers(root), []);
  assert.equal(existsSync(engineCacheDir(root, commits.slow)), false);
});

test('a failing build says where it failed, with the end of the output and the log', async (t) => {
  if (!toolsOk) return t.skip('git, cmake, a C++ compiler or make is missing');
  const root = join(work, 'cache-broken');
  await assert.rejects(buildEngines({ cacheRoot: root, source: source(commits.broken), jobs: 2 }), (error: Error & { code?: string }) => {
    assert.equal(error.code, 'INTERNAL');
    assert.match(error.message, /engine build failed at build/);
    assert.match(error.message, /main\.cpp/);
    assert.match(error.message, /last-build\.log/);
    return true;
  });
  assert.match(await readFile(join(root, 'last-build.log'), 'utf8'), /error/);
  assert.deepEqual(await leftovers(root), []);
  assert.equal(existsSync(engineCacheDir(root, commits.broken)), false);
});
