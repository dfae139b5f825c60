// The managed llama.cpp engines (`llama-server` and `ggml-rpc-server`), built from the llama.cpp
// source that node-llama-cpp ships as a git bundle, pinned to that bundle's commit. A build is cached
// by commit and compute under $SHOAL_ENGINE_CACHE, else $XDG_CACHE_HOME/shoal/engines, else
// ~/.cache/shoal/engines: `<root>/<commit>[-<compute>]/bin/<engine>` plus `manifest.json`. It is assembled in a
// temporary directory beside the cache entry and renamed into place, so a reader sees a whole build
// or none.

import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, openSync, readSync, closeSync, readFileSync, readdirSync } from 'node:fs';
import { access, chmod, constants, copyFile, mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { availableParallelism, homedir, setPriority, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ShoalError } from '../common/errors.js';

export const ENGINE_NAMES = ['llama-server', 'ggml-rpc-server'] as const;
export type EngineName = (typeof ENGINE_NAMES)[number];

export const ENGINE_COMPUTES = ['cpu', 'cuda', 'vulkan', 'metal'] as const;
export type EngineCompute = (typeof ENGINE_COMPUTES)[number];

/** Compiler jobs get this much memory each; llama.cpp's larger files need about a GiB to compile. */
const BUILD_JOB_MEMORY_BYTES = 1.5 * 1024 ** 3;
/** Lines of build output kept for an error message. */
const BUILD_ERROR_TAIL_LINES = 40;
/** How long `<engine> --version` may take before the binary counts as not running. */
const VERSION_PROBE_TIMEOUT_MS = 10_000;
/** The niceness of a background build (the lowest priority): the node's own inference keeps the CPUs. */
const LOW_PRIORITY = 19;

/** Where the pinned llama.cpp source comes from. */
export interface EngineSource {
  /** The git bundle node-llama-cpp ships (`llama/gitRelease.bundle`). */
  bundlePath: string;
  /** Full commit id the bundle's HEAD points at: the pin. */
  commit: string;
  /** node-llama-cpp's release tag for that source (`llama/llama.cpp.info.json`), when present. */
  tag: string | null;
}

export const EngineManifest = z.strictObject({
  commit: z.string().regex(/^[0-9a-f]{40}$/),
  /** What the engines were built for (the node advertises `llama_server-<compute>`, `rpc-<compute>`); CPU when a manifest does not say. */
  compute: z.enum(ENGINE_COMPUTES).default('cpu'),
  engines: z.array(z.enum(ENGINE_NAMES)),
  cmakeFlags: z.array(z.string()),
  builtAt: z.string(),
  buildSeconds: z.number().nonnegative(),
  /** Where the binaries came from: built from the bundled source (absent: the manifests before releases), or a prebuilt release (src/doctor/releases.ts). */
  source: z.enum(['build', 'release']).optional(),
  /** The release archive's SHA-256, checked before it was unpacked (source `release` only). */
  sha256: z.string().regex(/^[0-9a-f]{64}$/).optional(),
});
export type EngineManifest = z.infer<typeof EngineManifest>;

// ---------------------------------------------------------------------------------------------
// Paths (pure)

/** The engine cache root: SHOAL_ENGINE_CACHE, else $XDG_CACHE_HOME/shoal/engines, else ~/.cache/shoal/engines. */
export function engineCacheRoot(env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string {
  if (env.SHOAL_ENGINE_CACHE) return resolve(env.SHOAL_ENGINE_CACHE);
  const xdg = env.XDG_CACHE_HOME && env.XDG_CACHE_HOME !== '' ? env.XDG_CACHE_HOME : join(home, '.cache');
  return join(resolve(xdg), 'shoal', 'engines');
}

/**
 * The cache entry for one pinned commit and compute: `<commit>` for the CPU (the layout before GPU
 * builds), `<commit>-<compute>` for a GPU one, so building for one compute never replaces another's.
 */
export function engineCacheDir(root: string, commit: string, compute: EngineCompute = 'cpu'): string {
  if (!/^[0-9a-f]{40}$/.test(commit)) throw new Error(`not a full git commit id: "${commit}"`);
  return join(root, compute === 'cpu' ? commit : `${commit}-${compute}`);
}

/** The order findEngineBuild looks in: a GPU build runs CPU parts too, so it wins over the CPU one. */
const LOOKUP_ORDER: readonly EngineCompute[] = ['cuda', 'vulkan', 'metal', 'cpu'];

export function engineBinaryPath(cacheDir: string, name: EngineName, platform: NodeJS.Platform = process.platform): string {
  return join(cacheDir, 'bin', platform === 'win32' ? `${name}.exe` : name);
}

export function manifestPath(cacheDir: string): string {
  return join(cacheDir, 'manifest.json');
}

/** The CMake cache flags of a build for `compute`: static (the binaries move), no downloads, no web UI. */
export function cmakeFlags(compute: EngineCompute): string[] {
  const flags = [
    '-DCMAKE_BUILD_TYPE=Release',
    '-DBUILD_SHARED_LIBS=OFF',
    '-DGGML_RPC=ON',
    '-DLLAMA_BUILD_SERVER=ON',
    '-DLLAMA_BUILD_TOOLS=ON',
    '-DLLAMA_USE_PREBUILT_UI=OFF',
    '-DLLAMA_BUILD_UI=OFF',
    '-DLLAMA_OPENSSL=OFF',
    '-DLLAMA_BUILD_TESTS=OFF',
    '-DLLAMA_BUILD_EXAMPLES=OFF',
  ];
  if (compute === 'cuda') flags.push('-DGGML_CUDA=ON');
  if (compute === 'vulkan') flags.push('-DGGML_VULKAN=ON');
  if (compute === 'metal') flags.push('-DGGML_METAL=ON');
  else if (process.platform === 'darwin') flags.push('-DGGML_METAL=OFF');
  return flags;
}

/** Compiler jobs: one per logical CPU, fewer when memory would not hold them all. */
export function defaultBuildJobs(cpus: number = availableParallelism(), memoryBytes: number = totalmem()): number {
  return Math.max(1, Math.min(cpus, Math.floor(memoryBytes / BUILD_JOB_MEMORY_BYTES)));
}

// ---------------------------------------------------------------------------------------------
// Progress parsing (pure)

/**
 * The completion a line of build output announces: Make's `[ 42%] Building ...` gives a percent,
 * Ninja's `[17/230] Building ...` a fraction. Null for any other line.
 */
export function parseCmakeProgress(line: string): number | null {
  const percent = /^\s*\[\s*(\d{1,3})%\]/.exec(line);
  if (percent) {
    const value = Number(percent[1]);
    return value <= 100 ? value : null;
  }
  const fraction = /^\s*\[(\d+)\/(\d+)\]/.exec(line);
  if (fraction) {
    const done = Number(fraction[1]);
    const total = Number(fraction[2]);
    if (total > 0 && done <= total) return Math.floor((done / total) * 100);
  }
  return null;
}

/**
 * A short description of a build output line for a progress display: the file being compiled or the
 * target being linked, without the long object paths cmake prints.
 */
export function describeBuildLine(line: string): string {
  const text = line.replace(/^\s*\[[^\]]*\]\s*/, '').trim();
  const compiling = /^Building \S+ object (\S+)$/.exec(text);
  if (compiling) return `compiling ${(compiling[1] ?? '').split('/').pop()?.replace(/\.o(bj)?$/, '')}`;
  const linking = /^Linking \S+ (?:static library|shared library|executable) (\S+)$/.exec(text);
  if (linking) return `linking ${(linking[1] ?? '').split('/').pop()}`;
  const built = /^Built target (\S+)$/.exec(text);
  if (built) return `built ${built[1]}`;
  return text;
}

export type BuildPhase = 'clone' | 'configure' | 'build' | 'install';

/** Each phase's share of the overall bar, as [start, end] percent. */
const PHASE_SPAN: Record<BuildPhase, [number, number]> = {
  clone: [0, 3],
  configure: [3, 8],
  build: [8, 99],
  install: [99, 100],
};

/** Maps a phase and its own percent (0..100) to the overall percent. */
export function overallPercent(phase: BuildPhase, phasePercent: number): number {
  const [start, end] = PHASE_SPAN[phase];
  const clamped = Math.min(100, Math.max(0, phasePercent));
  return Math.round(start + ((end - start) * clamped) / 100);
}

export interface BuildProgress {
  phase: BuildPhase;
  /** Overall completion, 0..100, never decreasing within one build. */
  percent: number;
  /** What is happening, for a progress line. */
  message: string;
}

// ---------------------------------------------------------------------------------------------
// The bundled source

/** node-llama-cpp's package directory. */
export function nodeLlamaCppDir(): string {
  let dir = dirname(fileURLToPath(import.meta.resolve('node-llama-cpp')));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, 'utf8')) as { name?: unknown }).name === 'node-llama-cpp') return dir;
      } catch {
        // not the package root; keep walking up
      }
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the node-llama-cpp package directory');
    dir = parent;
  }
}

/** The commit a git bundle's HEAD names, read from the bundle's text header (no git needed). */
export function parseBundleHead(header: string): string | null {
  const lines = header.split('\n');
  if (!/^# v[23] git bundle$/.test(lines[0] ?? '')) return null;
  let first: string | null = null;
  for (const line of lines.slice(1)) {
    if (line === '') break;
    const match = /^([0-9a-f]{40}) (\S+)$/.exec(line);
    if (!match) continue;
    if (match[2] === 'HEAD') return match[1] as string;
    first ??= match[1] as string;
  }
  return first;
}

function readBundleHead(bundlePath: string): string | null {
  const fd = openSync(bundlePath, 'r');
  try {
    const buffer = Buffer.alloc(4096);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    return parseBundleHead(buffer.subarray(0, n).toString('latin1'));
  } finally {
    closeSync(fd);
  }
}

/** The llama.cpp source node-llama-cpp ships, or null when it is not installed with it. */
export function bundledSource(packageDir?: string): EngineSource | null {
  let dir: string;
  try {
    dir = packageDir ?? nodeLlamaCppDir();
  } catch {
    return null;
  }
  const bundlePath = join(dir, 'llama', 'gitRelease.bundle');
  if (!existsSync(bundlePath)) return null;
  const commit = readBundleHead(bundlePath);
  if (!commit) return null;
  let tag: string | null = null;
  try {
    const info = JSON.parse(readFileSync(join(dir, 'llama', 'llama.cpp.info.json'), 'utf8')) as { tag?: unknown };
    if (typeof info.tag === 'string') tag = info.tag;
  } catch {
    // the tag is informational only
  }
  return { bundlePath, commit, tag };
}

// ---------------------------------------------------------------------------------------------
// The cache

export interface EngineLookupOptions {
  /** Cache root (default engineCacheRoot()). */
  cacheRoot?: string;
  /** Pinned commit (default: the bundled source's). */
  commit?: string;
  /** Only the build for this compute (default: the first found of cuda, vulkan, metal, cpu). */
  compute?: EngineCompute;
}

export async function readEngineManifest(cacheDir: string): Promise<EngineManifest | null> {
  try {
    const parsed = EngineManifest.safeParse(JSON.parse(await readFile(manifestPath(cacheDir), 'utf8')));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** The cache entry for the pinned commit (a GPU build first, see LOOKUP_ORDER), when one is complete; null otherwise. */
export async function findEngineBuild(options: EngineLookupOptions = {}): Promise<{ dir: string; manifest: EngineManifest } | null> {
  const commit = options.commit ?? bundledSource()?.commit;
  if (!commit) return null;
  for (const compute of options.compute !== undefined ? [options.compute] : LOOKUP_ORDER) {
    const dir = engineCacheDir(options.cacheRoot ?? engineCacheRoot(), commit, compute);
    const manifest = await readEngineManifest(dir);
    if (manifest && manifest.commit === commit) return { dir, manifest };
  }
  return null;
}

/** The cached, executable binary of `name` for the pinned commit, or null when it is not built. */
export async function findEngine(name: EngineName, options: EngineLookupOptions = {}): Promise<string | null> {
  const build = await findEngineBuild(options);
  if (!build || !build.manifest.engines.includes(name)) return null;
  const path = engineBinaryPath(build.dir, name);
  try {
    await access(path, constants.X_OK);
    return path;
  } catch {
    return null;
  }
}

export interface EngineProbe {
  ok: boolean;
  /** The first line of the version output (`version: 1 (80fb11ac)`), when there is one. */
  version: string | null;
  error: string | null;
}

/**
 * Runs `<binary> --version` and reports whether it ran. llama-server prints its version and build;
 * ggml-rpc-server has no version flag and prints its usage, exiting 0, which proves it runs.
 */
export async function probeEngine(path: string, signal?: AbortSignal): Promise<EngineProbe> {
  const result = await runCommand(path, ['--version'], { timeoutMs: VERSION_PROBE_TIMEOUT_MS, signal });
  if (result.error) return { ok: false, version: null, error: result.error };
  const output = `${result.stdout}\n${result.stderr}`;
  const versionLine = output.split('\n').find((line) => /^version:/.test(line.trim()));
  if (result.code !== 0) {
    return { ok: false, version: null, error: `exited with code ${result.code}: ${lastLines(output, 5)}` };
  }
  return { ok: true, version: versionLine?.trim() ?? null, error: null };
}

// ---------------------------------------------------------------------------------------------
// Build tools

export interface BuildToolsCheck {
  ok: boolean;
  missing: string[];
  /** The command that installs what is missing on this platform. */
  installHint: string | null;
}

async function hasCommand(command: string, args: string[] = ['--version']): Promise<boolean> {
  const result = await runCommand(command, args, { timeoutMs: 10_000 });
  return result.error === null && result.code === 0;
}

/** The apt-get (or brew) line that installs the named build tools. */
export function buildToolsInstallHint(missing: string[], platform: NodeJS.Platform = process.platform): string | null {
  if (missing.length === 0) return null;
  if (platform === 'darwin') {
    const brew = missing.filter((tool) => tool === 'cmake');
    const parts = [];
    if (missing.some((tool) => tool !== 'cmake')) parts.push('xcode-select --install');
    if (brew.length > 0) parts.push(`brew install ${brew.join(' ')}`);
    return parts.join(' && ');
  }
  const apt = missing.map((tool) => (tool === 'c++ compiler' ? 'g++' : tool));
  return `sudo apt-get install -y ${[...new Set(apt)].join(' ')}`;
}

/** Checks for git, cmake, a C++ compiler and make (or ninja). */
export async function checkBuildTools(): Promise<BuildToolsCheck> {
  const [git, cmake, gxx, cxx, clangxx, make, ninja] = await Promise.all([
    hasCommand('git'),
    hasCommand('cmake'),
    hasCommand('g++'),
    hasCommand('c++'),
    hasCommand('clang++'),
    hasCommand('make'),
    hasCommand('ninja'),
  ]);
  const missing: string[] = [];
  if (!git) missing.push('git');
  if (!cmake) missing.push('cmake');
  if (!gxx && !cxx && !clangxx) missing.push('c++ compiler');
  if (!make && !ninja) missing.push('make');
  return { ok: missing.length === 0, missing, installHint: buildToolsInstallHint(missing) };
}

// ---------------------------------------------------------------------------------------------
// The compute to build for

/** What `doctor --fix` looks at to pick the engines' compute (detectComputeFacts; injected in tests). */
export interface ComputeFacts {
  platform: NodeJS.Platform;
  /** An NVIDIA GPU: `/dev/nvidia0`. */
  nvidiaGpu: boolean;
  /** A DRM render node (`/dev/dri/renderD*`): a GPU Vulkan may drive. */
  renderNode: boolean;
  /** The CUDA compiler: `nvcc` on PATH, else `/usr/local/cuda/bin/nvcc`; null when neither. */
  nvccPath: string | null;
  /** `glslc`, which the Vulkan build compiles its shaders with. */
  glslc: boolean;
  /** The Vulkan headers (`vulkan/vulkan.h` under /usr/include or $VULKAN_SDK/include). */
  vulkanHeaders: boolean;
}

export interface ComputeChoice {
  compute: EngineCompute;
  /** Why this compute, for the fix line. */
  reason: string;
  /** A GPU this build will not use, or a forced compute that cannot build: what is missing and its install line. */
  missing: { compute: EngineCompute; tools: string[]; installHint: string } | null;
}

function cudaMissing(facts: ComputeFacts): string[] {
  return facts.nvccPath === null ? ['nvcc (the CUDA toolkit)'] : [];
}

function vulkanMissing(facts: ComputeFacts): string[] {
  return [...(facts.glslc ? [] : ['glslc']), ...(facts.vulkanHeaders ? [] : ['the Vulkan headers'])];
}

const TOOLKIT_INSTALL: Record<'cuda' | 'vulkan', string> = {
  cuda: 'sudo apt-get install -y nvidia-cuda-toolkit',
  vulkan: 'sudo apt-get install -y glslc libvulkan-dev',
};

function missingFor(compute: EngineCompute, facts: ComputeFacts): ComputeChoice['missing'] {
  if (compute === 'cuda' || compute === 'vulkan') {
    const tools = compute === 'cuda' ? cudaMissing(facts) : vulkanMissing(facts);
    return tools.length > 0 ? { compute, tools, installHint: TOOLKIT_INSTALL[compute] } : null;
  }
  if (compute === 'metal' && facts.platform !== 'darwin') return { compute, tools: ['macOS'], installHint: 'build for metal on a Mac; here use --compute cpu, cuda or vulkan' };
  return null;
}

/**
 * The compute `doctor --fix` builds the engines for: `forced` (`--compute`) as given; else Metal on macOS,
 * CUDA for an NVIDIA GPU with its toolkit, Vulkan for a GPU with glslc and the Vulkan headers, else the
 * CPU. A GPU whose toolkit is missing gets a CPU build and a `missing` note naming the toolkit and the
 * command that installs it; a forced compute that cannot build gets `missing` too (the build is refused).
 */
export function chooseEngineCompute(facts: ComputeFacts, forced?: EngineCompute): ComputeChoice {
  if (forced !== undefined) return { compute: forced, reason: 'asked for with --compute', missing: missingFor(forced, facts) };
  if (facts.platform === 'darwin') return { compute: 'metal', reason: 'macOS: Metal', missing: null };
  if (facts.nvidiaGpu && facts.nvccPath !== null) return { compute: 'cuda', reason: `an NVIDIA GPU and the CUDA toolkit (${facts.nvccPath})`, missing: null };
  if ((facts.nvidiaGpu || facts.renderNode) && vulkanMissing(facts).length === 0) {
    return { compute: 'vulkan', reason: 'a GPU and the Vulkan SDK (glslc, headers)', missing: facts.nvidiaGpu ? missingFor('cuda', facts) : null };
  }
  if (facts.nvidiaGpu) return { compute: 'cpu', reason: 'an NVIDIA GPU without the CUDA toolkit', missing: missingFor('cuda', facts) };
  if (facts.renderNode) return { compute: 'cpu', reason: 'a GPU without the Vulkan SDK', missing: missingFor('vulkan', facts) };
  return { compute: 'cpu', reason: 'no GPU detected', missing: null };
}

/** Reads ComputeFacts from this machine: device nodes, PATH and the usual toolkit locations. */
export async function detectComputeFacts(env: NodeJS.ProcessEnv = process.env): Promise<ComputeFacts> {
  const [nvccOnPath, glslc] = await Promise.all([hasCommand('nvcc'), hasCommand('glslc')]);
  const localNvcc = '/usr/local/cuda/bin/nvcc';
  let renderNode: boolean;
  try {
    renderNode = readdirSync('/dev/dri').some((name) => name.startsWith('renderD'));
  } catch {
    renderNode = false; // no /dev/dri: no GPU a render node would show
  }
  const headerDirs = ['/usr/include', ...(env.VULKAN_SDK ? [join(env.VULKAN_SDK, 'include')] : [])];
  return {
    platform: process.platform,
    nvidiaGpu: existsSync('/dev/nvidia0'),
    renderNode,
    nvccPath: nvccOnPath ? 'nvcc' : existsSync(localNvcc) ? localNvcc : null,
    glslc,
    vulkanHeaders: headerDirs.some((dir) => existsSync(join(dir, 'vulkan', 'vulkan.h'))),
  };
}

// ---------------------------------------------------------------------------------------------
// The build

export interface BuildEnginesOptions {
  cacheRoot?: string;
  source?: EngineSource;
  compute?: EngineCompute;
  /** The CUDA compiler when it is not on PATH (`-DCMAKE_CUDA_COMPILER`; ComputeFacts.nvccPath). */
  cudaCompiler?: string;
  /** Compiler jobs (default defaultBuildJobs()). */
  jobs?: number;
  /** Rebuild even when the cache holds a build for this commit. */
  force?: boolean;
  signal?: AbortSignal;
  onProgress?: (progress: BuildProgress) => void;
  /** Run the build's commands at the lowest CPU priority, so a node building in the background keeps serving. */
  lowPriority?: boolean;
}

export interface BuildEnginesResult {
  dir: string;
  commit: string;
  compute: EngineCompute;
  /** True when the cache already held the build and nothing ran. */
  cached: boolean;
  /** Seconds the build took (this run's, or the cached build's). */
  buildSeconds: number;
  binaries: Record<EngineName, string>;
}

function binariesOf(dir: string): Record<EngineName, string> {
  return Object.fromEntries(ENGINE_NAMES.map((name) => [name, engineBinaryPath(dir, name)])) as Record<EngineName, string>;
}

/**
 * Builds `llama-server` and `ggml-rpc-server` from the bundled llama.cpp source into the cache, or
 * returns the cached build for the pinned commit. Throws CAPABILITY_MISSING (with the install line)
 * when build tools are missing, CANCELLED when `signal` aborts, INTERNAL with the tail of the build
 * log when the build fails.
 */
export async function buildEngines(options: BuildEnginesOptions = {}): Promise<BuildEnginesResult> {
  const source = options.source ?? bundledSource();
  if (!source) {
    throw new ShoalError('CAPABILITY_MISSING', 'the llama.cpp source bundle of node-llama-cpp was not found: reinstall dependencies with `npm ci`');
  }
  const compute = options.compute ?? 'cpu';
  const root = options.cacheRoot ?? engineCacheRoot();
  const dir = engineCacheDir(root, source.commit, compute);

  if (!options.force) {
    const existing = await readEngineManifest(dir);
    if (existing && existing.commit === source.commit && existing.compute === compute && ENGINE_NAMES.every((name) => existing.engines.includes(name))) {
      const binaries = binariesOf(dir);
      const present = await Promise.all(Object.values(binaries).map((path) => access(path, constants.X_OK).then(() => true, () => false)));
      if (present.every(Boolean)) return { dir, commit: source.commit, compute, cached: true, buildSeconds: existing.buildSeconds, binaries };
    }
  }

  throwIfAborted(options.signal);
  const tools = await checkBuildTools();
  if (!tools.ok) {
    throw new ShoalError(
      'CAPABILITY_MISSING',
      `building llama-server needs ${tools.missing.join(', ')}, not found on PATH. Install: ${tools.installHint}`,
    );
  }
  throwIfAborted(options.signal);

  await mkdir(root, { recursive: true });
  const tmp = await mkdtemp(join(root, `.build-${source.commit.slice(0, 12)}-`));
  const logPath = join(tmp, 'build.log');
  const log = createWriteStream(logPath);
  const tail: string[] = [];
  const started = Date.now();
  let percent = 0;
  const report = (phase: BuildPhase, phasePercent: number, message: string): void => {
    percent = Math.max(percent, overallPercent(phase, phasePercent));
    options.onProgress?.({ phase, percent, message });
  };
  const onLine = (phase: BuildPhase) => (line: string): void => {
    log.write(`${line}\n`);
    tail.push(line);
    if (tail.length > BUILD_ERROR_TAIL_LINES) tail.shift();
    if (phase === 'build') {
      const value = parseCmakeProgress(line);
      if (value !== null) report('build', value, describeBuildLine(line));
    }
  };
  const step = async (phase: BuildPhase, command: string, args: string[], cwd: string): Promise<void> => {
    log.write(`$ ${command} ${args.join(' ')}\n`);
    const result = await runCommand(command, args, { cwd, signal: options.signal, onLine: onLine(phase), lowPriority: options.lowPriority === true });
    if (options.signal?.aborted) throw cancelled(options.signal);
    if (result.error !== null || result.code !== 0) {
      const why = result.error ?? `exit code ${result.code}`;
      throw new ShoalError('INTERNAL', `engine build failed at ${phase} (${command}: ${why}). Last output:\n${tail.join('\n')}\nFull log: ${join(root, 'last-build.log')}`);
    }
  };

  try {
    const src = join(tmp, 'src');
    const build = join(tmp, 'build');
    const out = join(tmp, 'out');
    report('clone', 0, `unpacking llama.cpp ${source.commit.slice(0, 8)}${source.tag ? ` (${source.tag})` : ''}`);
    await step('clone', 'git', ['clone', '--quiet', source.bundlePath, src], tmp);
    await step('clone', 'git', ['-C', src, 'checkout', '--quiet', '--detach', source.commit], tmp);
    report('configure', 0, 'configuring (cmake)');
    const flags = [...cmakeFlags(compute), ...(compute === 'cuda' && options.cudaCompiler !== undefined && options.cudaCompiler !== 'nvcc' ? [`-DCMAKE_CUDA_COMPILER=${options.cudaCompiler}`] : [])];
    await step('configure', 'cmake', ['-S', src, '-B', build, ...flags], tmp);
    report('build', 0, 'compiling');
    const jobs = options.jobs ?? defaultBuildJobs();
    await step('build', 'cmake', ['--build', build, '--config', 'Release', '--target', ...ENGINE_NAMES, '-j', String(jobs)], tmp);

    report('install', 0, 'installing into the cache');
    await mkdir(join(out, 'bin'), { recursive: true });
    for (const name of ENGINE_NAMES) {
      const built = [join(build, 'bin', name), join(build, 'bin', 'Release', name)]
        .map((path) => (process.platform === 'win32' ? `${path}.exe` : path))
        .find((path) => existsSync(path));
      if (!built) throw new ShoalError('INTERNAL', `the build finished but ${name} is not in ${join(build, 'bin')}`);
      const target = engineBinaryPath(out, name);
      await copyFile(built, target);
      await chmod(target, 0o755);
    }
    const buildSeconds = Math.round((Date.now() - started) / 100) / 10;
    const manifest: EngineManifest = {
      commit: source.commit,
      compute,
      engines: [...ENGINE_NAMES],
      cmakeFlags: flags,
      builtAt: new Date().toISOString(),
      buildSeconds,
      source: 'build',
    };
    await writeFile(manifestPath(out), `${JSON.stringify(manifest, null, 2)}\n`);
    await closeStream(log);

    const theirs = await installCacheEntry(out, dir, tmp, source.commit);
    if (theirs) {
      report('install', 100, 'another process finished the same build');
      return { dir, commit: source.commit, compute: theirs.compute, cached: true, buildSeconds: theirs.buildSeconds, binaries: binariesOf(dir) };
    }
    report('install', 100, `built in ${buildSeconds} s`);
    return { dir, commit: source.commit, compute, cached: false, buildSeconds, binaries: binariesOf(dir) };
  } catch (error) {
    await closeStream(log);
    await copyFile(logPath, join(root, 'last-build.log')).catch(() => undefined);
    throw error;
  } finally {
    await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
  }
}

/**
 * Moves a complete entry assembled in `out` (inside the temporary directory `tmp`) into place at `dir`:
 * an older or partial entry is moved aside into `tmp` first (and removed with it). When another process
 * finished an entry for the same commit meanwhile, its entry wins and its manifest comes back; null
 * when `out` was installed.
 */
export async function installCacheEntry(out: string, dir: string, tmp: string, commit: string): Promise<EngineManifest | null> {
  if (existsSync(dir)) await rename(dir, join(tmp, 'old')).catch(() => undefined);
  try {
    await rename(out, dir);
    return null;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const theirs = code === 'ENOTEMPTY' || code === 'EEXIST' ? await readEngineManifest(dir) : null;
    if (!theirs || theirs.commit !== commit) throw error;
    return theirs;
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

function cancelled(signal: AbortSignal): ShoalError {
  return new ShoalError('CANCELLED', 'engine build cancelled', { cause: signal.reason });
}

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw cancelled(signal);
}

function closeStream(stream: NodeJS.WritableStream): Promise<void> {
  return new Promise((done) => {
    stream.end(() => done());
  });
}

function lastLines(text: string, n: number): string {
  return text.trim().split('\n').slice(-n).join(' | ');
}

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Set when the command could not run at all (not found, timed out, aborted). */
  error: string | null;
}

/**
 * Runs a command in its own process group (so an abort ends the compilers make started, too),
 * feeding each output line to `onLine`. Never rejects.
 */
function runCommand(
  command: string,
  args: string[],
  options: { cwd?: string; timeoutMs?: number; signal?: AbortSignal | undefined; onLine?: (line: string) => void; lowPriority?: boolean },
): Promise<RunResult> {
  return new Promise((done) => {
    if (options.signal?.aborted) {
      done({ code: null, stdout: '', stderr: '', error: 'aborted' });
      return;
    }
    let child;
    try {
      child = spawn(command, args, {
        cwd: options.cwd,
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: process.platform !== 'win32',
        env: { ...process.env, LC_ALL: 'C' },
      });
    } catch (error) {
      done({ code: null, stdout: '', stderr: '', error: (error as Error).message });
      return;
    }
    // Set before the command forks its compilers, which inherit it (a race lost only costs priority).
    if (options.lowPriority && child.pid !== undefined) {
      try {
        setPriority(child.pid, LOW_PRIORITY);
      } catch {
        // not permitted here: the build runs at normal priority
      }
    }
    let stdout = '';
    let stderr = '';
    let error: string | null = null;
    const kill = (why: string): void => {
      error ??= why;
      try {
        if (child.pid !== undefined && process.platform !== 'win32') process.kill(-child.pid, 'SIGKILL');
        else child.kill('SIGKILL');
      } catch {
        // already gone
      }
    };
    const onAbort = (): void => kill('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
    const timer = options.timeoutMs === undefined ? null : setTimeout(() => kill(`timed out after ${options.timeoutMs} ms`), options.timeoutMs);
    const lines = (append: (text: string) => void) => {
      let pending = '';
      return (chunk: Buffer): void => {
        const text = chunk.toString('utf8');
        append(text);
        if (!options.onLine) return;
        pending += text;
        const parts = pending.split(/\r?\n|\r/);
        pending = parts.pop() ?? '';
        for (const line of parts) options.onLine(line);
      };
    };
    const keep = (text: string, current: string): string => (current.length > 65_536 ? current.slice(-32_768) + text : current + text);
    child.stdout.on('data', lines((text) => (stdout = keep(text, stdout))));
    child.stderr.on('data', lines((text) => (stderr = keep(text, stderr))));
    child.on('error', (err: NodeJS.ErrnoException) => {
      error ??= err.code === 'ENOENT' ? `${command}: command not found` : err.message;
    });
    child.on('close', (code) => {
      if (timer) clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      done({ code, stdout, stderr, error });
    });
  });
}
