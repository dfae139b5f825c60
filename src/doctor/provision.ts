// Engine provisioning in the background of a serving node: the managed engines (`llama-server`,
// `ggml-rpc-server`) for the pinned llama.cpp commit, from the cache when they are there, else from a
// prebuilt release recorded in releases.ts (SHA-256 verified before anything is unpacked), else built
// from the bundled source at the lowest CPU priority, as `shoal doctor --fix` builds them. The node
// serves on node-llama-cpp meanwhile; a machine that can do neither keeps doing so and is told what to
// install. Every step is visible through `state()` / `onChange()` and throttled log lines.

import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { access, chmod, constants, copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extract } from 'tar';
import { isShoalError, ShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
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
  installCacheEntry,
  manifestPath,
  probeEngine,
  type BuildEnginesOptions,
  type BuildEnginesResult,
  type BuildToolsCheck,
  type EngineCompute,
  type EngineManifest,
  type EngineName,
  type EngineSource,
} from './engines.js';
import { engineReleaseBaseUrl, engineReleases, findEngineRelease, releaseUrl, type EngineRelease } from './releases.js';

/** The largest release archive accepted: a CUDA build is a few hundred MB; a host sending more is refused before the disk fills. */
export const MAX_RELEASE_ARCHIVE_BYTES = 2 * 1024 ** 3;
/** A release download that delivers no byte for this long is given up (and the engines built instead) rather than waited on forever. */
export const RELEASE_DOWNLOAD_IDLE_MS = 60_000;
/** Progress lines in the log at most this often (phase changes are always logged). */
export const PROVISION_LOG_INTERVAL_MS = 15_000;

export const PROVISION_PHASES = ['cached', 'checking', 'downloading', 'verifying', 'building', 'ready', 'failed', 'unavailable'] as const;
export type ProvisionPhase = (typeof PROVISION_PHASES)[number];

export interface ProvisionState {
  phase: ProvisionPhase;
  /** 0..100 while downloading or building (null for a download of unknown size and the other phases). */
  percent: number | null;
  /** What is happening, for a progress line. */
  message: string;
  /** What an operator can run or install when the node cannot get the engines itself; null otherwise. */
  remediation: string | null;
  /** Where the engines came from, once there are some. */
  source: 'cache' | 'release' | 'build' | null;
  /** The compute they are (or are being) provisioned for; null before it is chosen. */
  compute: EngineCompute | null;
}

export interface ProvisionedEngines {
  dir: string;
  commit: string;
  compute: EngineCompute;
  source: 'cache' | 'release' | 'build';
  binaries: Record<EngineName, string>;
}

/** Why a release archive was not installed; the provisioner then builds from source. */
export class EngineReleaseRefused extends ShoalError {
  constructor(
    readonly reason: 'download' | 'too-large' | 'checksum' | 'archive' | 'probe',
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super('INTERNAL', message, options);
    this.name = 'EngineReleaseRefused';
  }
}

export interface EngineProvisionerOptions {
  log: Logger;
  /** Default engineCacheRoot(). */
  cacheRoot?: string;
  /** Default bundledSource(); null: not installed (the provisioner is then unavailable). */
  source?: EngineSource | null;
  /** Default: what `shoal doctor --fix` picks here (chooseEngineCompute over detectComputeFacts). */
  compute?: EngineCompute;
  /** Default engineReleases() (the pinned table, or SHOAL_ENGINE_RELEASE_MANIFEST's). */
  releases?: readonly EngineRelease[];
  /** Default engineReleaseBaseUrl() (SHOAL_ENGINE_RELEASE_URL). */
  releaseBaseUrl?: string;
  platform?: NodeJS.Platform;
  arch?: NodeJS.Architecture;
  /** Default buildEngines (injected in tests, where a real build would take many minutes). */
  build?: (options: BuildEnginesOptions) => Promise<BuildEnginesResult>;
  /** Default checkBuildTools. */
  buildTools?: () => Promise<BuildToolsCheck>;
  /** Default RELEASE_DOWNLOAD_IDLE_MS: a release download silent this long falls back to building. */
  releaseIdleMs?: number;
  signal?: AbortSignal;
}

const IDLE: ProvisionState = { phase: 'checking', percent: null, message: 'looking for llama-server and ggml-rpc-server', remediation: null, source: null, compute: null };

export class EngineProvisioner implements AsyncDisposable {
  private current: ProvisionState = IDLE;
  private readonly listeners = new Set<(state: ProvisionState) => void>();
  private readonly abort = new AbortController();
  private running: Promise<ProvisionedEngines | null> | null = null;
  private lastProgressLogMs = 0;
  private readonly releaseIdleMs: number;

  constructor(private readonly options: EngineProvisionerOptions) {
    this.releaseIdleMs = options.releaseIdleMs ?? RELEASE_DOWNLOAD_IDLE_MS;
    if (options.signal) {
      if (options.signal.aborted) this.abort.abort(options.signal.reason);
      else options.signal.addEventListener('abort', () => this.abort.abort(options.signal?.reason), { once: true });
    }
  }

  /** Starts provisioning in the background (once); `whenReady` says how it ended. */
  start(): this {
    this.running ??= this.run().catch((error: unknown) => {
      if (this.abort.signal.aborted) {
        this.set({ phase: 'failed', percent: null, message: 'engine provisioning cancelled', remediation: 'run `shoal doctor --fix`' });
      } else {
        // A setting that does not parse (SHOAL_ENGINE_RELEASE_MANIFEST) is the operator's to correct; anything else a build's to retry.
        const configuration = isShoalError(error) && error.code === 'BAD_REQUEST';
        this.set({
          phase: 'failed',
          percent: null,
          message: `engine provisioning failed: ${(error as Error).message}`,
          remediation: configuration ? 'correct the setting the message names, then restart the node' : 'run `shoal doctor --fix` to see the full build output',
        });
      }
      return null;
    });
    return this;
  }

  state(): ProvisionState {
    return this.current;
  }

  onChange(listener: (state: ProvisionState) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The engines once provisioned (from the cache, a release or a build; started here when `start` was not called); null when this machine cannot have them now. */
  whenReady(): Promise<ProvisionedEngines | null> {
    return this.start().running as Promise<ProvisionedEngines | null>;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.abort.abort(new ShoalError('CANCELLED', 'the node is stopping'));
    await this.running;
  }

  private set(next: Partial<ProvisionState> & Pick<ProvisionState, 'phase' | 'message'>): void {
    const previous = this.current;
    this.current = { ...previous, percent: null, remediation: null, ...next };
    const log = this.options.log;
    if (next.phase !== previous.phase) {
      const fields = { phase: next.phase, ...(this.current.compute ? { compute: this.current.compute } : {}) };
      if (next.phase === 'failed' || next.phase === 'unavailable') log.warn(fields, `${next.message}${this.current.remediation ? ` (${this.current.remediation})` : ''}`);
      else log.info(fields, next.message);
      this.lastProgressLogMs = Date.now();
    } else if (next.percent !== undefined && Date.now() - this.lastProgressLogMs >= PROVISION_LOG_INTERVAL_MS) {
      this.lastProgressLogMs = Date.now();
      log.info({ phase: next.phase, percent: next.percent }, `engines ${next.phase} ${next.percent ?? '?'}%: ${next.message}`);
    }
    for (const listener of this.listeners) listener(this.current);
  }

  private async run(): Promise<ProvisionedEngines | null> {
    const signal = this.abort.signal;
    const source = this.options.source === undefined ? bundledSource() : this.options.source;
    if (source === null) {
      this.set({ phase: 'unavailable', message: 'the llama.cpp source bundle of node-llama-cpp was not found: this node serves on node-llama-cpp only', remediation: 'reinstall dependencies with `npm ci`' });
      return null;
    }
    const cacheRoot = this.options.cacheRoot ?? engineCacheRoot();
    this.set({ phase: 'checking', message: `looking for llama-server and ggml-rpc-server (llama.cpp ${source.commit.slice(0, 8)}) in ${cacheRoot}` });
    // Any complete build serves (the node's lookup takes a GPU one first); building for another compute
    // beside it is `shoal doctor --fix --compute`'s to do, not a serving node's.
    const cached = await cachedEngines(cacheRoot, source.commit);
    if (cached) {
      this.current = { ...this.current, compute: cached.compute, source: 'cache' };
      this.set({ phase: 'cached', message: `llama-server and ggml-rpc-server (${cached.compute}) are in the cache` });
      return cached;
    }

    let compute = this.options.compute;
    let cudaCompiler: string | undefined;
    if (compute === undefined) {
      const facts = await detectComputeFacts();
      const choice = chooseEngineCompute(facts);
      compute = choice.compute;
      if (facts.nvccPath !== null) cudaCompiler = facts.nvccPath;
    }
    this.current = { ...this.current, compute };
    throwIfAborted(signal);

    const release = findEngineRelease(this.options.releases ?? (await engineReleases()), {
      commit: source.commit,
      compute,
      ...(this.options.platform ? { platform: this.options.platform } : {}),
      ...(this.options.arch ? { arch: this.options.arch } : {}),
    });
    if (release) {
      try {
        const installed = await this.installRelease(release, cacheRoot, signal);
        this.current = { ...this.current, source: 'release' };
        this.set({ phase: 'ready', message: `llama-server and ggml-rpc-server (${compute}) installed from the prebuilt release` });
        return installed;
      } catch (error) {
        if (signal.aborted || !(error instanceof EngineReleaseRefused)) throw error;
        this.options.log.warn({ reason: error.reason }, `${error.message}: building from source instead`);
      }
    }

    const tools = await (this.options.buildTools ?? checkBuildTools)();
    throwIfAborted(signal);
    if (!tools.ok) {
      this.set({
        phase: 'unavailable',
        message: `no prebuilt llama-server for ${this.options.platform ?? process.platform}-${this.options.arch ?? process.arch} (${compute}) and building one needs ${tools.missing.join(', ')}: this node keeps serving on node-llama-cpp`,
        remediation: `${tools.installHint ?? 'install the build tools'}, then run \`shoal doctor --fix\` or restart the node`,
      });
      return null;
    }
    this.set({ phase: 'building', percent: 0, message: `building llama-server and ggml-rpc-server (${compute}) from the bundled source at low priority; this node serves meanwhile` });
    const built = await (this.options.build ?? buildEngines)({
      cacheRoot,
      source,
      compute,
      ...(cudaCompiler !== undefined ? { cudaCompiler } : {}),
      signal,
      lowPriority: true,
      onProgress: (progress) => this.set({ phase: 'building', percent: progress.percent, message: progress.message }),
    });
    this.current = { ...this.current, source: 'build' };
    this.set({ phase: 'ready', message: `llama-server and ggml-rpc-server (${compute}) built in ${built.buildSeconds} s` });
    return { dir: built.dir, commit: built.commit, compute: built.compute, source: 'build', binaries: built.binaries };
  }

  /** Downloads, verifies, unpacks, probes and installs a release archive; EngineReleaseRefused when any step fails. */
  private async installRelease(release: EngineRelease, cacheRoot: string, signal: AbortSignal): Promise<ProvisionedEngines> {
    const url = releaseUrl(this.options.releaseBaseUrl ?? engineReleaseBaseUrl(), release);
    await mkdir(cacheRoot, { recursive: true });
    const tmp = await mkdtemp(join(cacheRoot, `.release-${release.commit.slice(0, 12)}-`));
    try {
      const archive = join(tmp, 'release.tar.gz');
      this.set({ phase: 'downloading', percent: 0, message: `downloading ${url}` });
      const sha256 = await this.download(url, archive, signal);
      this.set({ phase: 'verifying', message: `verifying the SHA-256 of ${basename(release.path)}` });
      if (sha256 !== release.sha256.toLowerCase()) {
        throw new EngineReleaseRefused('checksum', `the release archive ${url} has SHA-256 ${sha256}, not the ${release.sha256} recorded for it: refused`);
      }
      const unpacked = join(tmp, 'unpacked');
      await mkdir(unpacked);
      try {
        await extract({ file: archive, cwd: unpacked, strict: true });
      } catch (error) {
        throw new EngineReleaseRefused('archive', `the release archive ${url} did not unpack: ${(error as Error).message}`, { cause: error });
      }
      const out = join(tmp, 'out');
      await mkdir(join(out, 'bin'), { recursive: true });
      for (const lib of release.libs) await this.copyFromArchive(unpacked, lib, join(out, 'bin', basename(lib)), url);
      for (const name of ENGINE_NAMES) {
        const target = engineBinaryPath(out, name);
        await this.copyFromArchive(unpacked, release.files[name], target, url);
        await chmod(target, 0o755);
        const probe = await probeEngine(target, signal);
        if (!probe.ok) throw new EngineReleaseRefused('probe', `${name} from the release archive ${url} does not run here: ${probe.error}`);
      }
      const manifest: EngineManifest = {
        commit: release.commit,
        compute: release.compute,
        engines: [...ENGINE_NAMES],
        cmakeFlags: [],
        builtAt: new Date().toISOString(),
        buildSeconds: 0,
        source: 'release',
        sha256,
      };
      await writeFile(manifestPath(out), `${JSON.stringify(manifest, null, 2)}\n`);
      const dir = engineCacheDir(cacheRoot, release.commit, release.compute);
      const theirs = await installCacheEntry(out, dir, tmp, release.commit);
      return { dir, commit: release.commit, compute: theirs?.compute ?? release.compute, source: 'release', binaries: binariesOf(dir) };
    } finally {
      await rm(tmp, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  /** Streams `url` into `path`, hashing as it goes; the archive's SHA-256 (hex). */
  private async download(url: string, path: string, signal: AbortSignal): Promise<string> {
    const idle = new AbortController();
    let idleTimer: NodeJS.Timeout | undefined;
    const stillMoving = (): void => {
      clearTimeout(idleTimer);
      idleTimer = setTimeout(() => idle.abort(), this.releaseIdleMs);
    };
    stillMoving();
    try {
      return await this.downloadWithin(url, path, signal, AbortSignal.any([signal, idle.signal]), stillMoving);
    } catch (error) {
      if (idle.signal.aborted && !signal.aborted) {
        throw new EngineReleaseRefused('download', `the release host sent nothing for ${this.releaseIdleMs / 1000} s while downloading ${url}`, { cause: error });
      }
      throw error;
    } finally {
      clearTimeout(idleTimer);
    }
  }

  private async downloadWithin(url: string, path: string, signal: AbortSignal, within: AbortSignal, stillMoving: () => void): Promise<string> {
    let response: Response;
    try {
      response = await fetch(url, { signal: within, redirect: 'follow' });
    } catch (error) {
      if (within.aborted) throw error;
      throw new EngineReleaseRefused('download', `downloading the release archive ${url} failed: ${(error as Error).message}`, { cause: error });
    }
    if (!response.ok || response.body === null) {
      await response.body?.cancel().catch(() => undefined);
      throw new EngineReleaseRefused('download', `the release host answered ${response.status} for ${url}`);
    }
    const length = Number(response.headers.get('content-length'));
    const total = Number.isFinite(length) && length > 0 ? length : null;
    if (total !== null && total > MAX_RELEASE_ARCHIVE_BYTES) {
      await response.body.cancel().catch(() => undefined);
      throw new EngineReleaseRefused('too-large', `the release archive ${url} is ${total} bytes, over the ${MAX_RELEASE_ARCHIVE_BYTES} accepted`);
    }
    const hash = createHash('sha256');
    let done = 0;
    const meter = new Transform({
      transform: (chunk: Buffer, _encoding, callback) => {
        done += chunk.length;
        if (done > MAX_RELEASE_ARCHIVE_BYTES) {
          callback(new EngineReleaseRefused('too-large', `the release archive ${url} is over the ${MAX_RELEASE_ARCHIVE_BYTES} bytes accepted`));
          return;
        }
        hash.update(chunk);
        stillMoving();
        this.set({ phase: 'downloading', percent: total === null ? null : Math.min(100, Math.floor((done / total) * 100)), message: `downloading ${url} (${done} bytes)` });
        callback(null, chunk);
      },
    });
    try {
      await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream<Uint8Array>), meter, createWriteStream(path), { signal: within });
    } catch (error) {
      if (within.aborted || error instanceof EngineReleaseRefused) throw error;
      throw new EngineReleaseRefused('download', `downloading the release archive ${url} failed: ${(error as Error).message}`, { cause: error });
    }
    return hash.digest('hex');
  }

  private async copyFromArchive(unpacked: string, entry: string, target: string, url: string): Promise<void> {
    const from = join(unpacked, entry);
    if (!from.startsWith(`${unpacked}/`)) throw new EngineReleaseRefused('archive', `the release entry "${entry}" is outside the archive`);
    try {
      await copyFile(from, target);
    } catch (error) {
      throw new EngineReleaseRefused('archive', `the release archive ${url} has no ${entry}`, { cause: error });
    }
  }
}

/** The state of a node that runs no provisioner: the engines it found in the cache at its start, or, with provisioning off (`--no-provision`), what to run. */
export function enginesAtStartState(engines: { compute: EngineCompute } | null): ProvisionState {
  if (engines) return { phase: 'cached', percent: null, message: `llama-server and ggml-rpc-server (${engines.compute}) are in the cache`, remediation: null, source: 'cache', compute: engines.compute };
  return {
    phase: 'unavailable',
    percent: null,
    message: 'llama-server and ggml-rpc-server are not built and background provisioning is off (--no-provision, SHOAL_PROVISION=0): this node serves on node-llama-cpp',
    remediation: 'run `shoal doctor --fix`, then restart the node',
    source: null,
    compute: null,
  };
}

async function cachedEngines(cacheRoot: string, commit: string): Promise<ProvisionedEngines | null> {
  const build = await findEngineBuild({ cacheRoot, commit });
  if (!build || !ENGINE_NAMES.every((name) => build.manifest.engines.includes(name))) return null;
  const binaries = binariesOf(build.dir);
  const present = await Promise.all(Object.values(binaries).map((path) => access(path, constants.X_OK).then(() => true, () => false)));
  if (!present.every(Boolean)) return null;
  return { dir: build.dir, commit, compute: build.manifest.compute, source: 'cache', binaries };
}

function binariesOf(dir: string): Record<EngineName, string> {
  return Object.fromEntries(ENGINE_NAMES.map((name) => [name, engineBinaryPath(dir, name)])) as Record<EngineName, string>;
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new ShoalError('CANCELLED', 'engine provisioning cancelled', { cause: signal.reason });
}
