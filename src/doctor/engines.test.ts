import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  buildEngines,
  buildToolsInstallHint,
  bundledSource,
  chooseEngineCompute,
  cmakeFlags,
  defaultBuildJobs,
  describeBuildLine,
  engineBinaryPath,
  engineCacheDir,
  engineCacheRoot,
  findEngine,
  findEngineBuild,
  manifestPath,
  overallPercent,
  parseBundleHead,
  parseCmakeProgress,
  type ComputeFacts,
  type EngineManifest,
} from './engines.js';

const COMMIT = '80fb11ac73e66d89eae2c6a91d8a77428fa733ed';
const OTHER = '0123456789abcdef0123456789abcdef01234567';

test('cmake progress: make percentages, ninja fractions, nothing else', () => {
  assert.equal(parseCmakeProgress('[  0%] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o'), 0);
  assert.equal(parseCmakeProgress('[ 42%] Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o'), 42);
  assert.equal(parseCmakeProgress('[100%] Built target llama-server'), 100);
  assert.equal(parseCmakeProgress('  [  7%] Linking CXX static library libggml.a'), 7);
  assert.equal(parseCmakeProgress('[17/200] Building CXX object common/CMakeFiles/common.dir/arg.cpp.o'), 8);
  assert.equal(parseCmakeProgress('[200/200] Linking CXX executable bin/llama-server'), 100);
  assert.equal(parseCmakeProgress('[0/0] nothing'), null);
  assert.equal(parseCmakeProgress('[250%] odd'), null);
  assert.equal(parseCmakeProgress('-- Configuring done'), null);
  assert.equal(parseCmakeProgress('/src/ggml.c:12: warning: [ 42%] is not progress'), null);
  assert.equal(parseCmakeProgress(''), null);
});

test('build lines are shortened for the progress display', () => {
  assert.equal(describeBuildLine('[ 16%] Building CXX object src/CMakeFiles/llama.dir/llama-kv-cache.cpp.o'), 'compiling llama-kv-cache.cpp');
  assert.equal(describeBuildLine('[  8%] Building C object ggml/src/CMakeFiles/ggml-base.dir/ggml.c.o'), 'compiling ggml.c');
  assert.equal(describeBuildLine('[ 99%] Linking CXX executable ../../bin/llama-server'), 'linking llama-server');
  assert.equal(describeBuildLine('[ 12%] Linking CXX static library libggml-base.a'), 'linking libggml-base.a');
  assert.equal(describeBuildLine('[100%] Built target ggml-rpc-server'), 'built ggml-rpc-server');
  assert.equal(describeBuildLine('[42/99] Generating build details from Git'), 'Generating build details from Git');
});

test('overall percent maps each phase into its share of the bar', () => {
  assert.equal(overallPercent('clone', 0), 0);
  assert.equal(overallPercent('configure', 0), 3);
  assert.equal(overallPercent('build', 0), 8);
  assert.equal(overallPercent('build', 50), 54);
  assert.equal(overallPercent('build', 100), 99);
  assert.equal(overallPercent('install', 100), 100);
  assert.equal(overallPercent('build', 180), 99);
});

test('cache root: SHOAL_ENGINE_CACHE, then XDG_CACHE_HOME, then ~/.cache', () => {
  assert.equal(engineCacheRoot({ SHOAL_ENGINE_CACHE: '/srv/engines', XDG_CACHE_HOME: '/x' }, '/home/a'), '/srv/engines');
  assert.equal(engineCacheRoot({ XDG_CACHE_HOME: '/x/cache' }, '/home/a'), '/x/cache/shoal/engines');
  assert.equal(engineCacheRoot({ XDG_CACHE_HOME: '' }, '/home/a'), '/home/a/.cache/shoal/engines');
  assert.equal(engineCacheRoot({}, '/home/a'), '/home/a/.cache/shoal/engines');
  assert.equal(engineCacheRoot({ SHOAL_ENGINE_CACHE: 'rel/dir' }, '/home/a'), join(process.cwd(), 'rel/dir'));
});

test('cache entries are keyed by the full commit', () => {
  assert.equal(engineCacheDir('/c', COMMIT), `/c/${COMMIT}`);
  assert.throws(() => engineCacheDir('/c', '80fb11ac'), /full git commit/);
  assert.throws(() => engineCacheDir('/c', '../etc'), /full git commit/);
  assert.equal(engineBinaryPath(`/c/${COMMIT}`, 'llama-server', 'linux'), `/c/${COMMIT}/bin/llama-server`);
  assert.equal(engineBinaryPath(`/c/${COMMIT}`, 'ggml-rpc-server', 'win32'), `/c/${COMMIT}/bin/ggml-rpc-server.exe`);
  assert.equal(manifestPath(`/c/${COMMIT}`), `/c/${COMMIT}/manifest.json`);
});

test('git bundle headers name the pinned commit', () => {
  assert.equal(parseBundleHead(`# v2 git bundle\n${COMMIT} HEAD\n\nPACK...`), COMMIT);
  assert.equal(parseBundleHead(`# v3 git bundle\n@object-format=sha1\n${OTHER} refs/heads/master\n${COMMIT} HEAD\n\n`), COMMIT);
  assert.equal(parseBundleHead(`# v2 git bundle\n${OTHER} refs/tags/b1\n\n`), OTHER);
  assert.equal(parseBundleHead('PK\u0003\u0004 not a bundle'), null);
});

test('the bundled source of node-llama-cpp is found with its commit', () => {
  const source = bundledSource();
  assert.ok(source, 'node-llama-cpp/llama/gitRelease.bundle not found');
  assert.match(source.commit, /^[0-9a-f]{40}$/);
  assert.match(source.bundlePath, /node-llama-cpp[/\\]llama[/\\]gitRelease\.bundle$/);
  assert.equal(bundledSource('/nonexistent'), null);
});

test('the cmake flags build static, without downloads or the web UI', () => {
  const flags = cmakeFlags('cpu');
  for (const flag of ['-DGGML_RPC=ON', '-DLLAMA_BUILD_SERVER=ON', '-DLLAMA_USE_PREBUILT_UI=OFF', '-DLLAMA_BUILD_UI=OFF', '-DLLAMA_OPENSSL=OFF', '-DBUILD_SHARED_LIBS=OFF']) {
    assert.ok(flags.includes(flag), flag);
  }
  assert.ok(cmakeFlags('cuda').includes('-DGGML_CUDA=ON'));
  assert.ok(cmakeFlags('vulkan').includes('-DGGML_VULKAN=ON'));
  assert.ok(!flags.includes('-DGGML_CUDA=ON'));
});

test('build jobs follow CPUs, limited by memory', () => {
  assert.equal(defaultBuildJobs(2, 24 * 1024 ** 3), 2);
  assert.equal(defaultBuildJobs(64, 8 * 1024 ** 3), 5);
  assert.equal(defaultBuildJobs(4, 512 * 1024 ** 2), 1);
});

test('the install hint names apt-get on Linux and brew on macOS', () => {
  assert.equal(buildToolsInstallHint([], 'linux'), null);
  assert.equal(buildToolsInstallHint(['cmake', 'c++ compiler', 'git'], 'linux'), 'sudo apt-get install -y cmake g++ git');
  assert.equal(buildToolsInstallHint(['cmake'], 'darwin'), 'brew install cmake');
  assert.equal(buildToolsInstallHint(['c++ compiler', 'cmake'], 'darwin'), 'xcode-select --install && brew install cmake');
});

async function fakeCacheEntry(root: string, manifest: Partial<EngineManifest> = {}, compute: EngineManifest['compute'] = 'cpu'): Promise<string> {
  const dir = engineCacheDir(root, manifest.commit ?? COMMIT, compute);
  await mkdir(join(dir, 'bin'), { recursive: true });
  for (const name of ['llama-server', 'ggml-rpc-server']) {
    await writeFile(join(dir, 'bin', name), '#!/bin/sh\necho "version: 1 (80fb11ac)" >&2\n');
    await chmod(join(dir, 'bin', name), 0o755);
  }
  const full: EngineManifest = {
    commit: COMMIT,
    compute: 'cpu',
    engines: ['llama-server', 'ggml-rpc-server'],
    cmakeFlags: cmakeFlags('cpu'),
    builtAt: '2026-01-01T00:00:00.000Z',
    buildSeconds: 300,
    ...manifest,
  };
  await writeFile(manifestPath(dir), JSON.stringify(full));
  return dir;
}

test('findEngine returns the cached binary for the pinned commit, null otherwise', async () => {
  const root = await mkdtemp(join(tmpdir(), 'shoal-engines-find-'));
  try {
    assert.equal(await findEngine('llama-server', { cacheRoot: root, commit: COMMIT }), null);
    const dir = await fakeCacheEntry(root);
    assert.equal(await findEngine('llama-server', { cacheRoot: root, commit: COMMIT }), join(dir, 'bin', 'llama-server'));
    assert.equal(await findEngine('ggml-rpc-server', { cacheRoot: root, commit: COMMIT }), join(dir, 'bin', 'ggml-rpc-server'));
    assert.equal(await findEngine('llama-server', { cacheRoot: root, commit: OTHER }), null, 'another pin has no build');
    assert.equal((await findEngineBuild({ cacheRoot: root, commit: COMMIT }))?.manifest.buildSeconds, 300);
    // The compute the engines were built for is what the node advertises them as; CPU when not recorded.
    const { compute: _compute, ...unrecorded } = JSON.parse(await readFile(manifestPath(dir), 'utf8')) as EngineManifest;
    await writeFile(manifestPath(dir), JSON.stringify({ ...unrecorded, compute: 'cuda' }));
    assert.equal((await findEngineBuild({ cacheRoot: root, commit: COMMIT }))?.manifest.compute, 'cuda');
    await writeFile(manifestPath(dir), JSON.stringify(unrecorded));
    assert.equal((await findEngineBuild({ cacheRoot: root, commit: COMMIT }))?.manifest.compute, 'cpu');

    await chmod(join(dir, 'bin', 'ggml-rpc-server'), 0o644);
    assert.equal(await findEngine('ggml-rpc-server', { cacheRoot: root, commit: COMMIT }), null, 'not executable');
    await writeFile(manifestPath(dir), '{"commit": "truncated');
    assert.equal(await findEngine('llama-server', { cacheRoot: root, commit: COMMIT }), null, 'a broken manifest is no build');
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('buildEngines returns a complete cached build without running anything', async () => {
  const root = await mkdtemp(join(tmpdir(), 'shoal-engines-cached-'));
  try {
    const dir = await fakeCacheEntry(root);
    const progress: unknown[] = [];
    const result = await buildEngines({
      cacheRoot: root,
      source: { bundlePath: '/nonexistent.bundle', commit: COMMIT, tag: null },
      onProgress: (p) => progress.push(p),
    });
    assert.deepEqual(result, {
      dir,
      commit: COMMIT,
      compute: 'cpu',
      cached: true,
      buildSeconds: 300,
      binaries: { 'llama-server': join(dir, 'bin', 'llama-server'), 'ggml-rpc-server': join(dir, 'bin', 'ggml-rpc-server') },
    });
    assert.deepEqual(progress, []);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('buildEngines without build tools names them and the apt-get line', async (t) => {
  if (process.platform !== 'linux') return t.skip('apt-get hint is for Linux');
  const root = await mkdtemp(join(tmpdir(), 'shoal-engines-notools-'));
  const empty = await mkdtemp(join(tmpdir(), 'shoal-empty-path-'));
  const path = process.env.PATH;
  process.env.PATH = empty;
  try {
    await assert.rejects(
      buildEngines({ cacheRoot: root, source: { bundlePath: '/nonexistent.bundle', commit: OTHER, tag: null } }),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, 'CAPABILITY_MISSING');
        assert.match(error.message, /needs git, cmake, c\+\+ compiler, make/);
        assert.match(error.message, /sudo apt-get install -y git cmake g\+\+ make/);
        return true;
      },
    );
  } finally {
    process.env.PATH = path;
    await rm(root, { recursive: true, force: true });
    await rm(empty, { recursive: true, force: true });
  }
});

test('an aborted signal cancels before anything runs', async () => {
  const root = await mkdtemp(join(tmpdir(), 'shoal-engines-abort-'));
  try {
    await assert.rejects(
      buildEngines({ cacheRoot: root, source: { bundlePath: '/nonexistent.bundle', commit: OTHER, tag: null }, signal: AbortSignal.abort() }),
      { code: 'CANCELLED' },
    );
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});

test('the bundle commit bundledSource reads is what git reads', (t) => {
  const source = bundledSource();
  if (!source) return t.skip('no bundle');
  let heads: string;
  try {
    heads = execFileSync('git', ['bundle', 'list-heads', source.bundlePath], { encoding: 'utf8' });
  } catch {
    return t.skip('git is not installed');
  }
  assert.ok(heads.includes(`${source.commit} HEAD`), heads);
});

// A Linux machine with no GPU and no toolkit; each case adds what it has.
const BARE: ComputeFacts = { platform: 'linux', nvidiaGpu: false, renderNode: false, nvccPath: null, glslc: false, vulkanHeaders: false };

test('doctor --fix builds for the compute it detects, and says what a GPU it cannot use needs', () => {
  assert.deepEqual(chooseEngineCompute(BARE), { compute: 'cpu', reason: 'no GPU detected', missing: null });
  const cuda = chooseEngineCompute({ ...BARE, nvidiaGpu: true, nvccPath: '/usr/local/cuda/bin/nvcc' });
  assert.equal(cuda.compute, 'cuda');
  assert.equal(cuda.missing, null);
  assert.ok(cmakeFlags(cuda.compute).includes('-DGGML_CUDA=ON'));
  const vulkan = chooseEngineCompute({ ...BARE, renderNode: true, glslc: true, vulkanHeaders: true });
  assert.equal(vulkan.compute, 'vulkan');
  assert.ok(cmakeFlags(vulkan.compute).includes('-DGGML_VULKAN=ON'));
  assert.equal(chooseEngineCompute({ ...BARE, platform: 'darwin' }).compute, 'metal');

  // An NVIDIA GPU without nvcc: a CPU build, and the toolkit's install line.
  const noToolkit = chooseEngineCompute({ ...BARE, nvidiaGpu: true });
  assert.equal(noToolkit.compute, 'cpu');
  assert.deepEqual(noToolkit.missing, { compute: 'cuda', tools: ['nvcc (the CUDA toolkit)'], installHint: 'sudo apt-get install -y nvidia-cuda-toolkit' });
  // ... but with the Vulkan SDK, Vulkan drives it, still naming what CUDA would need.
  const viaVulkan = chooseEngineCompute({ ...BARE, nvidiaGpu: true, glslc: true, vulkanHeaders: true });
  assert.equal(viaVulkan.compute, 'vulkan');
  assert.equal(viaVulkan.missing?.compute, 'cuda');
  // A GPU with half the Vulkan SDK: CPU, naming the missing half.
  const halfVulkan = chooseEngineCompute({ ...BARE, renderNode: true, glslc: true });
  assert.equal(halfVulkan.compute, 'cpu');
  assert.deepEqual(halfVulkan.missing, { compute: 'vulkan', tools: ['the Vulkan headers'], installHint: 'sudo apt-get install -y glslc libvulkan-dev' });
});

test('--compute forces the build, and a forced compute that cannot build says so', () => {
  assert.deepEqual(chooseEngineCompute({ ...BARE, nvidiaGpu: true, nvccPath: 'nvcc' }, 'cpu'), { compute: 'cpu', reason: 'asked for with --compute', missing: null });
  assert.deepEqual(chooseEngineCompute(BARE, 'cuda').missing?.installHint, 'sudo apt-get install -y nvidia-cuda-toolkit');
  assert.deepEqual(chooseEngineCompute(BARE, 'vulkan').missing?.tools, ['glslc', 'the Vulkan headers']);
  assert.equal(chooseEngineCompute(BARE, 'metal').missing?.compute, 'metal');
  assert.equal(chooseEngineCompute({ ...BARE, nvccPath: 'nvcc' }, 'cuda').missing, null);
});

test('builds are cached per commit and compute; a node runs its GPU build first', async () => {
  assert.equal(engineCacheDir('/c', COMMIT, 'cpu'), `/c/${COMMIT}`);
  assert.equal(engineCacheDir('/c', COMMIT, 'cuda'), `/c/${COMMIT}-cuda`);
  const root = await mkdtemp(join(tmpdir(), 'shoal-engines-compute-'));
  try {
    const cpuDir = await fakeCacheEntry(root);
    assert.equal((await findEngineBuild({ cacheRoot: root, commit: COMMIT }))?.dir, cpuDir);
    const cudaDir = await fakeCacheEntry(root, { compute: 'cuda', cmakeFlags: cmakeFlags('cuda') }, 'cuda');
    assert.equal((await findEngineBuild({ cacheRoot: root, commit: COMMIT }))?.manifest.compute, 'cuda');
    assert.equal(await findEngine('llama-server', { cacheRoot: root, commit: COMMIT }), join(cudaDir, 'bin', 'llama-server'));
    assert.equal((await findEngineBuild({ cacheRoot: root, commit: COMMIT, compute: 'cpu' }))?.dir, cpuDir, 'the CPU build is still there');
    // Asking for the cached compute builds nothing.
    const cached = await buildEngines({ cacheRoot: root, compute: 'cuda', source: { commit: COMMIT, tag: null, bundlePath: '/nonexistent.bundle' } });
    assert.equal(cached.cached, true);
    assert.equal(cached.dir, cudaDir);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
