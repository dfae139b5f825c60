// `shoal doctor`: gathers the facts (hardware, engines, storage), derives the backends, turns it all
// into checks, and with `fix` repairs what it can (directories, engine builds) before checking again.

import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { deriveBackends } from './backends.js';
import {
  buildEngines,
  bundledSource,
  checkBuildTools,
  chooseEngineCompute,
  detectComputeFacts,
  engineBinaryPath,
  engineCacheDir,
  engineCacheRoot,
  ENGINE_NAMES,
  findEngineBuild,
  probeEngine,
  readEngineManifest,
  type BuildProgress,
  type EngineCompute,
} from './engines.js';
import { engineReleases } from './releases.js';
import { detectHardware, type GpuRequest } from './hardware.js';
import { assembleReport, backendChecks, engineChecks, hardwareChecks, type Check, type DoctorReport, type EnginesStatus, type Fix } from './report.js';
import { fixStorage, inspectStorage, storageChecks } from './storage.js';

export interface DoctorOptions {
  dataDir: string;
  /** `--gpu` (default auto). */
  gpu?: GpuRequest;
  /** A configured list of backend tags that replaces detection (`--backends`, SHOAL_BACKENDS). */
  backends?: string[] | null;
  /** Repair what can be repaired, then check again. */
  fix?: boolean;
  /** Engine cache root (default engineCacheRoot()). */
  engineCacheRoot?: string;
  /** Compute the engines are built for by --fix (`--compute`; default: the one detected, chooseEngineCompute). */
  engineCompute?: EngineCompute;
  /** Compiler jobs for an engine build. */
  buildJobs?: number;
  /** node-llama-cpp threads while probing (default physical cores). */
  threads?: number;
  signal?: AbortSignal;
  /** Engine build progress. */
  onProgress?: (progress: BuildProgress) => void;
  /** One line per repair started (`building llama-server ...`). */
  onFix?: (message: string) => void;
}

/** Where the managed engines stand: built, running, and what a build would need. */
export async function inspectEngines(options: { cacheRoot?: string; signal?: AbortSignal } = {}): Promise<EnginesStatus> {
  const cacheRoot = options.cacheRoot ?? engineCacheRoot();
  const source = bundledSource();
  if (!source) {
    return { source: null, cacheRoot, cacheDir: null, compute: null, builtAt: null, buildSeconds: null, binaries: ENGINE_NAMES.map((name) => ({ name, path: null, built: false, runs: false, version: null, error: null })), buildTools: null };
  }
  // The build a node would run (a GPU one first), else where a CPU build goes.
  const cacheDir = (await findEngineBuild({ cacheRoot, commit: source.commit }))?.dir ?? engineCacheDir(cacheRoot, source.commit);
  const manifest = await readEngineManifest(cacheDir);
  const current = manifest && manifest.commit === source.commit ? manifest : null;
  const binaries = await Promise.all(
    ENGINE_NAMES.map(async (name) => {
      const path = engineBinaryPath(cacheDir, name);
      const built = current !== null && current.engines.includes(name) && (await access(path, constants.X_OK).then(() => true, () => false));
      if (!built) return { name, path, built: false, runs: false, version: null, error: null };
      const probe = await probeEngine(path, options.signal);
      return { name, path, built: true, runs: probe.ok, version: probe.version, error: probe.error };
    }),
  );
  const complete = binaries.every((binary) => binary.built && binary.runs);
  return {
    source: { commit: source.commit, tag: source.tag, bundlePath: source.bundlePath },
    cacheRoot,
    cacheDir,
    compute: current?.compute ?? null,
    builtAt: current?.builtAt ?? null,
    buildSeconds: current?.buildSeconds ?? null,
    origin: current?.source ?? null,
    releaseAvailable: (await engineReleases().catch(() => [])).some((r) => r.commit === source.commit && r.platform === process.platform && r.arch === process.arch),
    binaries,
    buildTools: complete ? null : await checkBuildTools(),
  };
}

async function applyFixes(options: DoctorOptions, cacheRoot: string): Promise<{ fixes: Fix[]; failures: Check[] }> {
  const fixes: Fix[] = [];
  const failures: Check[] = [];

  try {
    const created = await fixStorage(options.dataDir);
    for (const path of created) {
      options.onFix?.(`created ${path}`);
      fixes.push({ id: 'storage', action: 'created', summary: `created ${path}` });
    }
  } catch (error) {
    const message = (error as Error).message;
    fixes.push({ id: 'storage', action: 'failed', summary: message });
    failures.push({ id: 'fix.storage', level: 'error', summary: `could not create the data directories: ${message}`, remediation: 'pick a --data-dir you can write to' });
  }

  const engines = await inspectEngines({ cacheRoot, ...(options.signal ? { signal: options.signal } : {}) });
  if (engines.source) {
    const broken = engines.binaries.some((binary) => binary.built && !binary.runs);
    const facts = await detectComputeFacts();
    const choice = chooseEngineCompute(facts, options.engineCompute);
    const wantCompute = choice.compute;
    const refused = options.engineCompute !== undefined && choice.missing !== null;
    if (choice.missing) {
      const { compute, tools, installHint } = choice.missing;
      failures.push({
        id: 'fix.engines.compute',
        level: refused ? 'error' : 'warn',
        summary: refused ? `cannot build the engines for ${compute}: ${tools.join(', ')} missing` : `this GPU needs ${tools.join(', ')} for ${compute} engines: building for ${wantCompute}`,
        remediation: `${installHint}, then run shoal doctor --fix again`,
      });
    }
    const complete = engines.binaries.every((binary) => binary.built && binary.runs) && engines.compute === wantCompute;
    if (refused) {
      fixes.push({ id: 'engines', action: 'failed', summary: `not built for ${wantCompute}: the toolkit is missing` });
    } else if (complete) {
      fixes.push({ id: 'engines', action: 'cached', summary: `llama-server and ggml-rpc-server are cached in ${engines.cacheDir}` });
    } else {
      options.onFix?.(`building llama-server and ggml-rpc-server for ${wantCompute} (${choice.reason}) from llama.cpp ${engines.source.commit.slice(0, 8)} into ${engineCacheDir(cacheRoot, engines.source.commit, wantCompute)}`);
      try {
        const result = await buildEngines({
          cacheRoot,
          compute: wantCompute,
          ...(wantCompute === 'cuda' && facts.nvccPath !== null ? { cudaCompiler: facts.nvccPath } : {}),
          force: broken,
          ...(options.buildJobs !== undefined ? { jobs: options.buildJobs } : {}),
          ...(options.signal ? { signal: options.signal } : {}),
          ...(options.onProgress ? { onProgress: options.onProgress } : {}),
        });
        fixes.push(
          result.cached
            ? { id: 'engines', action: 'cached', summary: `llama-server and ggml-rpc-server are cached in ${result.dir}` }
            : { id: 'engines', action: 'built', summary: `built llama-server and ggml-rpc-server in ${result.buildSeconds} s into ${result.dir}` },
        );
      } catch (error) {
        if (options.signal?.aborted) throw error;
        const message = (error as Error).message;
        fixes.push({ id: 'engines', action: 'failed', summary: message.split('\n')[0] ?? message });
        failures.push({ id: 'fix.engines', level: 'error', summary: 'building the engines failed', detail: message, remediation: 'see the build output above; install what it names and run shoal doctor --fix again' });
      }
    }
  }
  return { fixes, failures };
}

/** Runs every check (after repairs, with `fix`) and returns the report. */
export async function runDoctor(options: DoctorOptions): Promise<DoctorReport> {
  const cacheRoot = options.engineCacheRoot ?? engineCacheRoot();
  const gpuRequest = options.gpu ?? 'auto';
  const repaired = options.fix ? await applyFixes(options, cacheRoot) : null;

  const [storage, engines] = await Promise.all([
    inspectStorage(options.dataDir),
    inspectEngines({ cacheRoot, ...(options.signal ? { signal: options.signal } : {}) }),
  ]);
  // Alone, after the rest: the bandwidth figure is only honest on a quiet machine.
  const hardware = await detectHardware({ dataDir: options.dataDir, gpu: gpuRequest, ...(options.threads !== undefined ? { maxThreads: options.threads } : {}) });
  const engineState = (name: (typeof ENGINE_NAMES)[number]) => {
    const binary = engines.binaries.find((b) => b.name === name);
    return { built: binary?.built ?? false, runs: binary?.runs ?? false, compute: engines.compute };
  };
  const derivation = deriveBackends({
    llamaCpp: { loaded: hardware.llamaCpp.loaded, error: hardware.llamaCpp.error, supportedGpuTypes: hardware.gpu.supportedTypes, activeGpu: hardware.gpu.active },
    engines: { 'llama-server': engineState('llama-server'), 'ggml-rpc-server': engineState('ggml-rpc-server') },
    gpuRequest,
    override: options.backends ?? null,
    nvidiaDevicePresent: hardware.gpu.nvidiaDevicePresent,
  });
  const backends = { tags: derivation.tags, detected: derivation.detected, source: derivation.source, gpuRequest };

  const checks: Check[] = [
    ...hardwareChecks(hardware),
    ...derivation.conflicts,
    ...backendChecks(backends),
    ...engineChecks(engines, hardware.cpu.physicalCores),
    ...storageChecks(storage),
    ...(repaired?.failures ?? []),
  ];
  return assembleReport({ checks, hardware, backends, engines, storage, ...(repaired ? { fixes: repaired.fixes } : {}) });
}
