// The on-disk store of hub models and its download manager: several files at once, resumable,
// verified, pinned to a revision, with disk admission and LRU eviction of idle copies.

import { copyFile, link, mkdir, readdir, rename, rmdir, stat, statfs, unlink } from 'node:fs/promises';
import { dirname, join, sep } from 'node:path';
import { ShoalError } from '../../common/errors.js';
import { formatBytes } from '../../common/format-bytes.js';
import { ModelId } from '../../common/ids.js';
import { resolveRepo } from '../hub/client.js';
import { checkRepoId, resolveHubOptions, type HubOptions, type ResolvedHubOptions } from '../hub/endpoint.js';
import { cancelledError, ModelsError } from '../hub/errors.js';
import { Mutex, Semaphore } from '../../common/semaphore.js';
import type { HubFile } from '../hub/gguf-files.js';
import { checkFilePath, checkRevision, filePathFor, hubStoreRoot, INDEX_FILE, partPathFor, PART_SUFFIX, repoDir, revisionDir } from './layout.js';
import { ProgressTracker, DEFAULT_PROGRESS_INTERVAL_MS, type DownloadProgress } from './progress.js';
import { loadIndex, saveIndex, type IndexedFile, type PendingRecord, type StoredModelRecord, type StoreIndex } from './store-index.js';
import { hubSource, localFileSource, transferFile, type ByteSource } from './transfer.js';
import { planDownload, type DownloadPlan } from './plan.js';
import type { EvictionReport, StoreUsage } from './usage.js';

/** Free disk a download never takes: it fails (or evicts) rather than go below this. */
export const DEFAULT_DISK_RESERVE_BYTES = 10 * 1024 ** 3;
/** Files transferred at once, over all downloads of one store. */
export const DEFAULT_MAX_CONCURRENT_FILES = 4;
/** Extra attempts per file after a network failure (each resumes with Range), backing off from DEFAULT_RETRY_DELAY_MS, doubling. */
export const DEFAULT_TRANSFER_RETRIES = 3;
export const DEFAULT_RETRY_DELAY_MS = 500;

export interface ModelStoreOptions {
  dataDir: string;
  /** Hub endpoint, token and fetch for downloads; defaults from the environment (SHOAL_HF_ENDPOINT...). */
  hub?: Omit<HubOptions, 'signal'>;
  /** Default DEFAULT_DISK_RESERVE_BYTES (10 GiB). */
  reserveBytes?: number;
  /** Default DEFAULT_MAX_CONCURRENT_FILES (4). */
  maxConcurrentFiles?: number;
  retries?: number;
  retryDelayMs?: number;
  /** Model ids loaded right now: never evicted, and remove() refuses them. */
  inUse?: () => Iterable<string>;
  now?: () => number;
  progressIntervalMs?: number;
}

/** What to download: one model (a GGUF file or the shards of a split one) of a repo at a commit. */
export interface DownloadOptions {
  signal?: AbortSignal;
  onProgress?: (progress: DownloadProgress) => void;
  /**
   * Where the bytes come from; default the hub. Whatever the source, every file is verified against
   * the plan's hashes, so a plan from the hub makes a copy from anywhere as good as a download.
   */
  source?: ByteSource;
}

export interface PullRequest {
  repo: string;
  /** Branch, tag or commit; default `main`. The download is pinned to the commit it points at now. */
  revision?: string;
  /** Tag, quant label (`Q4_K_M`), group name or file name; default chooseDefaultQuant. */
  quant?: string;
}

export interface StoredModel extends StoredModelRecord {
  /** Absolute path of the file to load (the first shard). */
  path: string;
  /** Absolute directory of the revision. */
  dir: string;
}

interface InFlight {
  revision: string;
  promise: Promise<StoredModel>;
  listeners: Set<(p: DownloadProgress) => void>;
  /** Bytes this download may still write: what admission reserved, less what has arrived. */
  remaining: number;
}

async function sizeOf(path: string): Promise<number | null> {
  try {
    return (await stat(path)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || (error as NodeJS.ErrnoException).code === 'ENOTDIR') return null;
    throw error;
  }
}

async function unlinkQuiet(path: string): Promise<void> {
  try {
    await unlink(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}

function toIndexed(file: HubFile): IndexedFile {
  return { path: file.path, size: file.size, sha256: file.sha256, gitOid: file.gitOid };
}

export class ModelStore {
  readonly root: string;
  readonly reserveBytes: number;
  private readonly indexPath: string;
  private resolvedHub: ResolvedHubOptions | null = null;
  private readonly hubOptions: Omit<HubOptions, 'signal'>;
  private readonly indexLock = new Mutex();
  private readonly admissionLock = new Mutex();
  private readonly slots: Semaphore;
  private readonly inflight = new Map<string, InFlight>();
  private readonly now: () => number;
  private readonly inUseFn: () => Iterable<string>;

  private constructor(
    private readonly opts: ModelStoreOptions,
    private index: StoreIndex,
    /** Where a damaged index was moved on open, if it was. */
    readonly damagedIndex: string | null,
  ) {
    this.root = hubStoreRoot(opts.dataDir);
    this.indexPath = join(this.root, INDEX_FILE);
    this.reserveBytes = opts.reserveBytes ?? DEFAULT_DISK_RESERVE_BYTES;
    this.hubOptions = opts.hub ?? {};
    this.slots = new Semaphore(Math.max(1, Math.floor(opts.maxConcurrentFiles ?? DEFAULT_MAX_CONCURRENT_FILES)));
    this.now = opts.now ?? Date.now;
    this.inUseFn = opts.inUse ?? (() => []);
  }

  /** Resolved on first use, so a bad token in the environment fails downloads, not opening the store. */
  private get hub(): ResolvedHubOptions {
    this.resolvedHub ??= resolveHubOptions(this.hubOptions);
    return this.resolvedHub;
  }

  static async open(opts: ModelStoreOptions): Promise<ModelStore> {
    if (opts.reserveBytes !== undefined && !(Number.isFinite(opts.reserveBytes) && opts.reserveBytes >= 0)) {
      throw new ShoalError('BAD_REQUEST', `the disk reserve must be a number of bytes >= 0, got ${opts.reserveBytes}`);
    }
    const root = hubStoreRoot(opts.dataDir);
    await mkdir(root, { recursive: true });
    const { index, damaged } = await loadIndex(join(root, INDEX_FILE), (opts.now ?? Date.now)());
    return new ModelStore(opts, index, damaged);
  }

  // ---- reading ----------------------------------------------------------------------------

  private view(record: StoredModelRecord): StoredModel {
    return { ...record, files: record.files.map((f) => ({ ...f })), path: filePathFor(this.root, record.repo, record.revision, record.primaryPath), dir: revisionDir(this.root, record.repo, record.revision) };
  }

  /** The complete copy of a model, or null. */
  get(modelId: string): StoredModel | null {
    const record = this.index.models[modelId];
    return record ? this.view(record) : null;
  }

  list(): StoredModel[] {
    return Object.values(this.index.models)
      .sort((a, b) => (a.modelId < b.modelId ? -1 : 1))
      .map((r) => this.view(r));
  }

  /** Model ids with a download running in this store now. */
  downloading(): string[] {
    return [...this.inflight.keys()];
  }

  private inUse(): Set<string> {
    return new Set(this.inUseFn());
  }

  /**
   * A file of a complete copy, for a member that wants it: only a path the index lists for a model
   * at `repo@revision`, so nothing else under (or outside) the store can be named. Null otherwise.
   */
  servable(repo: string, revision: string, path: string): { path: string; file: IndexedFile } | null {
    for (const record of Object.values(this.index.models)) {
      if (record.repo !== repo || record.revision !== revision) continue;
      const file = record.files.find((f) => f.path === path);
      if (file) return { path: filePathFor(this.root, record.repo, record.revision, file.path), file: { ...file } };
    }
    return null;
  }

  /** Records that a model was used (loaded, served), for LRU eviction. */
  async markUsed(modelId: string, atMs = this.now()): Promise<void> {
    await this.indexLock.run(async () => {
      const record = this.index.models[modelId];
      if (!record) return;
      record.lastUsedMs = Math.max(record.lastUsedMs, Math.floor(atMs));
      await saveIndex(this.indexPath, this.index);
    });
  }

  /** Free bytes on the store's filesystem (for unprivileged users: statfs bavail). */
  async freeBytes(): Promise<number> {
    const s = await statfs(this.root);
    return s.bavail * s.bsize;
  }

  // ---- downloading ------------------------------------------------------------------------

  /** Resolves `repo` at `revision`, picks the GGUF (`quant` or the default) and downloads it. */
  async pull(request: PullRequest, opts: DownloadOptions = {}): Promise<StoredModel> {
    const resolved = await resolveRepo(request.repo, { ...this.hubOptions, revision: request.revision, signal: opts.signal });
    return this.download(planDownload(resolved, request.quant), opts);
  }

  /**
   * Downloads a plan's files into `<root>/<owner>/<name>/<revision>/`. A copy already complete at
   * that revision returns at once (no network); a copy at another revision stays in place and in
   * the index until every file of the new one has arrived and been verified, then is deleted. A
   * second call for the same model and revision while one runs joins it (its signal is ignored:
   * the first caller's cancels both).
   */
  download(plan: DownloadPlan, opts: DownloadOptions = {}): Promise<StoredModel> {
    try {
      this.checkPlan(plan);
    } catch (error) {
      return Promise.reject(error);
    }
    const running = this.inflight.get(plan.modelId);
    if (running) {
      if (running.revision !== plan.revision) {
        return Promise.reject(new ModelsError('MODEL_IN_USE', `${plan.modelId} is already downloading at ${running.revision}: wait for it or cancel it before asking for ${plan.revision}`));
      }
      if (opts.onProgress) running.listeners.add(opts.onProgress);
      return running.promise;
    }
    const flight: InFlight = { revision: plan.revision, promise: Promise.resolve(null as unknown as StoredModel), listeners: new Set(), remaining: 0 };
    if (opts.onProgress) flight.listeners.add(opts.onProgress);
    flight.promise = this.run(plan, flight, opts.signal, opts.source).finally(() => {
      this.inflight.delete(plan.modelId);
    });
    this.inflight.set(plan.modelId, flight);
    return flight.promise;
  }

  private checkPlan(plan: DownloadPlan): void {
    checkRepoId(plan.repo);
    checkRevision(plan.revision);
    if (!ModelId.safeParse(plan.modelId).success) throw new ModelsError('INVALID_NAME', `"${plan.modelId}" is not a valid model id`);
    if (plan.files.length === 0) throw new ModelsError('NO_GGUF', `the plan for ${plan.modelId} has no files`);
    const seen = new Set<string>();
    for (const f of plan.files) {
      checkFilePath(f.path);
      if (seen.has(f.path)) throw new ModelsError('INVALID_NAME', `the plan for ${plan.modelId} lists ${f.path} twice`);
      seen.add(f.path);
      if (!Number.isSafeInteger(f.size) || f.size < 0) throw new ModelsError('HUB_BAD_RESPONSE', `${f.path} has an invalid size ${f.size}`);
      if (!f.sha256 && !f.gitOid) throw new ModelsError('HUB_BAD_RESPONSE', `the hub lists no hash for ${f.path}: refusing to download what cannot be verified`);
    }
    if (!seen.has(plan.primaryPath)) throw new ModelsError('INVALID_NAME', `the plan for ${plan.modelId} does not include its primary file ${plan.primaryPath}`);
  }

  private async isComplete(record: { repo: string; revision: string; files: IndexedFile[] }): Promise<boolean> {
    for (const f of record.files) {
      if ((await sizeOf(filePathFor(this.root, record.repo, record.revision, f.path))) !== f.size) return false;
    }
    return true;
  }

  /** A stored file with the same content (by SHA-256, or git oid for non-LFS files), to hard-link instead of downloading. */
  private async sameContent(file: HubFile, except: string): Promise<string | null> {
    for (const record of Object.values(this.index.models)) {
      for (const f of record.files) {
        const same = f.size === file.size && (file.sha256 ? f.sha256 === file.sha256 : f.sha256 === null && file.gitOid !== null && f.gitOid === file.gitOid);
        if (!same) continue;
        const path = filePathFor(this.root, record.repo, record.revision, f.path);
        if (path !== except && (await sizeOf(path)) === f.size) return path;
      }
    }
    return null;
  }

  private async run(plan: DownloadPlan, flight: InFlight, signal: AbortSignal | undefined, given: ByteSource | undefined): Promise<StoredModel> {
    const tracker = new ProgressTracker(plan, plan.files, flight.listeners, this.now, this.opts.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS);
    const existing = this.index.models[plan.modelId];
    // A copy that lacks a file of the plan (a projector named since the model was fetched) is completed instead.
    const covers = existing !== undefined && plan.files.every((f) => existing.files.some((e) => e.path === f.path));
    if (existing && existing.revision === plan.revision && covers && (await this.isComplete(existing))) {
      for (const f of plan.files) tracker.setState(f.path, 'present', f.size);
      tracker.finish();
      await this.markUsed(plan.modelId);
      return this.get(plan.modelId) as StoredModel;
    }
    if (signal?.aborted) throw cancelledError(`the download of ${plan.modelId}`, signal.reason);

    type Task = { file: HubFile; finalPath: string; partPath: string; mode: 'present' | 'link' | 'fetch'; from?: string; partBytes: number };
    const tasks: Task[] = [];
    for (const file of plan.files) {
      const finalPath = filePathFor(this.root, plan.repo, plan.revision, file.path);
      const partPath = partPathFor(finalPath);
      // Only verified bytes are ever renamed into place, so a final file of the right size is good.
      if ((await sizeOf(finalPath)) === file.size) {
        tasks.push({ file, finalPath, partPath, mode: 'present', partBytes: 0 });
        continue;
      }
      const from = await this.sameContent(file, finalPath);
      if (from) {
        tasks.push({ file, finalPath, partPath, mode: 'link', from, partBytes: 0 });
        continue;
      }
      const part = (await sizeOf(partPath)) ?? 0;
      tasks.push({ file, finalPath, partPath, mode: 'fetch', partBytes: part <= file.size ? part : 0 });
    }
    const needed = tasks.filter((t) => t.mode === 'fetch').reduce((sum, t) => sum + (t.file.size - t.partBytes), 0);

    await this.admit(plan.modelId, needed, flight);
    await this.recordPending(plan);
    const source = needed > 0 ? (given ?? hubSource(this.hub, plan.repo, plan.revision)) : null;

    const controller = new AbortController();
    const combined = signal ? AbortSignal.any([signal, controller.signal]) : controller.signal;
    let firstError: unknown = null;
    const results = await Promise.allSettled(
      tasks.map(async (t) => {
        const path = t.file.path;
        try {
          if (t.mode === 'present') {
            tracker.setState(path, 'present', t.file.size);
            return;
          }
          await mkdir(dirname(t.finalPath), { recursive: true });
          if (t.mode === 'link') {
            await this.linkInto(t.from as string, t.finalPath);
            tracker.setState(path, 'linked', t.file.size);
            return;
          }
          tracker.setState(path, 'queued', t.partBytes);
          const release = await this.slots.acquire(combined).catch((reason: unknown) => {
            throw cancelledError(`the download of ${plan.modelId}`, reason);
          });
          try {
            await transferFile({
              source: source as ByteSource,
              repo: plan.repo,
              revision: plan.revision,
              file: t.file,
              finalPath: t.finalPath,
              partPath: t.partPath,
              signal: combined,
              retries: this.opts.retries ?? DEFAULT_TRANSFER_RETRIES,
              retryDelayMs: this.opts.retryDelayMs ?? DEFAULT_RETRY_DELAY_MS,
              onStart: (onDisk) => tracker.setState(path, 'downloading', onDisk),
              onBytes: (delta, onDisk) => {
                flight.remaining = Math.max(0, flight.remaining - delta);
                tracker.fetchedBytes(path, delta, onDisk);
              },
              onVerify: () => tracker.setState(path, 'verifying'),
            });
          } finally {
            release();
          }
          tracker.setState(path, 'done', t.file.size);
        } catch (error) {
          tracker.setState(path, 'failed');
          firstError ??= error;
          controller.abort(error);
          throw error;
        }
      }),
    );
    if (results.some((r) => r.status === 'rejected')) {
      // The first failure is the cause; the other files were cancelled because of it (or by the caller).
      const error = firstError;
      if (signal?.aborted) throw error instanceof ShoalError && error.code === 'CANCELLED' ? error : cancelledError(`the download of ${plan.modelId}`, signal.reason);
      throw error;
    }

    await this.commit(plan);
    tracker.finish();
    return this.get(plan.modelId) as StoredModel;
  }

  /**
   * Takes files from elsewhere on this machine into the store as `plan`'s files (a GGUF, and a vision
   * model's projector beside it): `from` is the one file's path, or each plan file's path by its path
   * in the plan. Verified against the SHA-256s of the caller's plan. Hard links when the files are on
   * the store's filesystem: instant, no second copy of what may be many GB, and either name can be
   * deleted without losing the other's bytes (a tool that rewrites the user's file in place would
   * change the store's too, which the SHA-256 check of every member's copy catches). Across
   * filesystems, or where links are refused, the bytes are copied with the admission, progress and
   * verification of a download.
   */
  async importFile(plan: DownloadPlan, from: string | Readonly<Record<string, string>>, opts: DownloadOptions = {}): Promise<{ stored: StoredModel; how: 'present' | 'linked' | 'copied' }> {
    this.checkPlan(plan);
    const sources = typeof from === 'string' ? { [(plan.files[0] as HubFile).path]: from } : from;
    const unsourced = plan.files.find((f) => sources[f.path] === undefined);
    if (typeof from === 'string' && plan.files.length !== 1) throw new ModelsError('INVALID_NAME', `one file was given for the ${plan.files.length} files of ${plan.modelId}`);
    if (unsourced) throw new ModelsError('INVALID_NAME', `no file on this machine was given for ${unsourced.path} of ${plan.modelId}`);
    if (this.inflight.has(plan.modelId)) throw new ModelsError('MODEL_IN_USE', `${plan.modelId} is downloading: cancel the download before importing it again`);
    const existing = this.index.models[plan.modelId];
    const covers = existing !== undefined && plan.files.every((f) => existing.files.some((e) => e.path === f.path));
    if (existing && existing.revision === plan.revision && existing.repo === plan.repo && covers && (await this.isComplete(existing))) {
      await this.markUsed(plan.modelId);
      return { stored: this.get(plan.modelId) as StoredModel, how: 'present' };
    }
    let linked = false;
    for (const file of plan.files) {
      const finalPath = filePathFor(this.root, plan.repo, plan.revision, file.path);
      if ((await sizeOf(finalPath)) === file.size) continue;
      await mkdir(dirname(finalPath), { recursive: true });
      const tmp = `${finalPath}.link-${process.pid}`;
      await unlinkQuiet(tmp);
      try {
        await link(sources[file.path] as string, tmp);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code !== 'EXDEV' && code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EMLINK' && code !== 'EACCES') throw error;
        // The download keeps the files already linked (right size) and copies the rest.
        return { stored: await this.download(plan, { ...opts, source: localFileSource(sources) }), how: 'copied' };
      }
      await rename(tmp, finalPath);
      linked = true;
    }
    await this.commit(plan);
    return { stored: this.get(plan.modelId) as StoredModel, how: linked ? 'linked' : 'present' };
  }

  private async linkInto(from: string, to: string): Promise<void> {
    const tmp = `${to}.link-${process.pid}`;
    await unlinkQuiet(tmp);
    try {
      await link(from, tmp);
    } catch {
      await copyFile(from, tmp);
    }
    await rename(tmp, to);
  }

  private async recordPending(plan: DownloadPlan): Promise<void> {
    await this.indexLock.run(async () => {
      const previous = this.index.pending[plan.modelId];
      if (previous && previous.revision !== plan.revision) await this.deleteParts(previous);
      const record: PendingRecord = { modelId: plan.modelId, repo: plan.repo, revision: plan.revision, files: plan.files.map(toIndexed), startedAtMs: previous?.revision === plan.revision ? previous.startedAtMs : Math.floor(this.now()) };
      this.index.pending[plan.modelId] = record;
      await saveIndex(this.indexPath, this.index);
    });
  }

  private async deleteParts(pending: { repo: string; revision: string; files: IndexedFile[] }): Promise<void> {
    for (const f of pending.files) {
      const part = partPathFor(filePathFor(this.root, pending.repo, pending.revision, f.path));
      await unlinkQuiet(part);
      await this.pruneDirs(dirname(part));
    }
  }

  /** Makes the new copy the model's copy in the index, then deletes the old revision's files. */
  private async commit(plan: DownloadPlan): Promise<void> {
    await this.indexLock.run(async () => {
      const previous = this.index.models[plan.modelId];
      const t = Math.floor(this.now());
      this.index.models[plan.modelId] = {
        modelId: plan.modelId,
        repo: plan.repo,
        revision: plan.revision,
        group: plan.group,
        primaryPath: plan.primaryPath,
        files: plan.files.map(toIndexed),
        bytes: plan.files.reduce((s, f) => s + f.size, 0),
        addedAtMs: t,
        lastUsedMs: Math.max(t, previous?.lastUsedMs ?? 0),
      };
      delete this.index.pending[plan.modelId];
      await saveIndex(this.indexPath, this.index);
      if (previous && (previous.revision !== plan.revision || previous.repo !== plan.repo)) await this.deleteFiles(previous);
    });
  }

  /** Deletes a record's files (not the index entry), keeping any path another record still lists. */
  private async deleteFiles(record: { modelId: string; repo: string; revision: string; files: IndexedFile[] }): Promise<void> {
    const kept = new Set<string>();
    for (const other of Object.values(this.index.models)) {
      if (other.modelId === record.modelId && other.revision === record.revision) continue;
      for (const f of other.files) kept.add(filePathFor(this.root, other.repo, other.revision, f.path));
    }
    for (const f of record.files) {
      const path = filePathFor(this.root, record.repo, record.revision, f.path);
      if (kept.has(path)) continue;
      await unlinkQuiet(path);
      await this.pruneDirs(dirname(path));
    }
  }

  /** Removes empty directories from `dir` up to (not including) the store root. */
  private async pruneDirs(dir: string): Promise<void> {
    let d = dir;
    while (d.startsWith(this.root + sep) && d !== this.root) {
      try {
        await rmdir(d);
      } catch {
        return;
      }
      d = dirname(d);
    }
  }

  // ---- disk admission and eviction ----------------------------------------------------------

  /** Idle complete copies, least recently used first: not in use, not downloading, not `except`, not `protect`ed. */
  private evictionCandidates(except: string | null, protect: Iterable<string> = []): StoredModelRecord[] {
    const inUse = this.inUse();
    for (const id of protect) inUse.add(id);
    return Object.values(this.index.models)
      .filter((r) => r.modelId !== except && !inUse.has(r.modelId) && !this.inflight.has(r.modelId))
      .sort((a, b) => a.lastUsedMs - b.lastUsedMs || (a.modelId < b.modelId ? -1 : 1));
  }

  /**
   * Bytes that evicting `records` in order would free, after each one: a file hard-linked from a
   * model that stays frees nothing.
   */
  private async freedByEvicting(records: readonly StoredModelRecord[]): Promise<number[]> {
    const links = new Map<string, number>();
    const out: number[] = [];
    let freed = 0;
    for (const record of records) {
      for (const f of record.files) {
        const path = filePathFor(this.root, record.repo, record.revision, f.path);
        let s;
        try {
          s = await stat(path);
        } catch {
          continue;
        }
        const key = `${s.dev}:${s.ino}`;
        const left = (links.get(key) ?? s.nlink) - 1;
        links.set(key, left);
        if (left === 0) freed += s.size;
      }
      out.push(freed);
    }
    return out;
  }

  /**
   * Admits `needed` more bytes for `modelId` against free space minus the reserve and what other
   * running downloads still expect to write; evicts idle copies (LRU) if that makes it fit, and
   * fails before writing anything, with the numbers, if not even that would.
   */
  private async admit(modelId: string, needed: number, flight: InFlight): Promise<void> {
    await this.admissionLock.run(async () => {
      if (needed === 0) return;
      const othersBytes = (): number => [...this.inflight.entries()].filter(([id]) => id !== modelId).reduce((s, [, f]) => s + f.remaining, 0);
      const available = async (): Promise<{ free: number; others: number; left: number }> => {
        const free = await this.freeBytes();
        const others = othersBytes();
        return { free, others, left: free - this.reserveBytes - others };
      };
      let space = await available();
      if (needed > space.left) {
        const candidates = this.evictionCandidates(modelId);
        const freed = await this.freedByEvicting(candidates);
        const evictable = freed[freed.length - 1] ?? 0;
        const count = freed.findIndex((f) => needed <= space.left + f);
        if (count < 0) {
          throw new ModelsError(
            'INSUFFICIENT_DISK',
            `not enough disk space for ${modelId}: it needs ${formatBytes(needed)} more; ${this.root} has ${formatBytes(space.free)} free, ` +
              `less the ${formatBytes(this.reserveBytes)} reserve${space.others > 0 ? ` and ${formatBytes(space.others)} promised to other downloads` : ''} leaves ${formatBytes(Math.max(0, space.left))}, ` +
              `and evicting every idle model (${candidates.length}) would free ${formatBytes(evictable)}. Free some disk, remove models, or lower the disk reserve`,
            { details: { neededBytes: needed, freeBytes: space.free, reserveBytes: this.reserveBytes, reservedByOthersBytes: space.others, evictableBytes: evictable, idleModels: candidates.map((c) => c.modelId) } },
          );
        }
        for (const record of candidates.slice(0, count + 1)) {
          await this.evict(record.modelId);
          space = await available();
          if (needed <= space.left) break;
        }
        if (needed > space.left) {
          throw new ModelsError('INSUFFICIENT_DISK', `not enough disk space for ${modelId} even after evicting idle models: it needs ${formatBytes(needed)} more and ${formatBytes(Math.max(0, space.left))} is left above the ${formatBytes(this.reserveBytes)} reserve`, {
            details: { neededBytes: needed, freeBytes: space.free, reserveBytes: this.reserveBytes, reservedByOthersBytes: space.others },
          });
        }
      }
      flight.remaining = needed;
    });
  }

  private async evict(modelId: string): Promise<void> {
    await this.indexLock.run(async () => {
      const record = this.index.models[modelId];
      if (!record) return;
      delete this.index.models[modelId];
      await saveIndex(this.indexPath, this.index);
      await this.deleteFiles(record);
    });
  }

  /**
   * Evicts idle complete copies, least recently used first, until the models in the store take at
   * most `keepBudgetBytes`. Models in use, downloading or in `protect` (e.g. placed on this node and
   * not loaded yet) are never evicted, so the store may stay over.
   */
  async evictBeyond(keepBudgetBytes: number, protect: Iterable<string> = []): Promise<EvictionReport> {
    if (!(Number.isFinite(keepBudgetBytes) && keepBudgetBytes >= 0)) throw new ShoalError('BAD_REQUEST', `the model budget must be bytes >= 0, got ${keepBudgetBytes}`);
    return this.admissionLock.run(async () => {
      const all = Object.values(this.index.models);
      const total = (await this.freedByEvicting(all))[all.length - 1] ?? 0;
      const evicted: string[] = [];
      let kept = total;
      for (const record of this.evictionCandidates(null, protect)) {
        if (kept <= keepBudgetBytes) break;
        const rest = Object.values(this.index.models).filter((r) => r.modelId !== record.modelId);
        await this.evict(record.modelId);
        evicted.push(record.modelId);
        kept = (await this.freedByEvicting(rest))[rest.length - 1] ?? 0;
      }
      return { evicted, freedBytes: total - kept, keptBytes: kept, overBudgetBytes: Math.max(0, kept - keepBudgetBytes) };
    });
  }

  /**
   * Deletes a model's copy and any part files of an unfinished download of it. Refuses a model that
   * is downloading, or in use unless `force` (an open file stays readable to whoever has it open).
   * Returns false when the store has nothing of it.
   */
  async remove(modelId: string, opts: { force?: boolean } = {}): Promise<boolean> {
    if (this.inflight.has(modelId)) throw new ModelsError('MODEL_IN_USE', `${modelId} is downloading: cancel the download before removing it`);
    if (!opts.force && this.inUse().has(modelId)) throw new ModelsError('MODEL_IN_USE', `${modelId} is loaded: unload it before removing it`);
    return this.indexLock.run(async () => {
      const record = this.index.models[modelId];
      const pending = this.index.pending[modelId];
      if (!record && !pending) return false;
      delete this.index.models[modelId];
      delete this.index.pending[modelId];
      await saveIndex(this.indexPath, this.index);
      if (record) await this.deleteFiles(record);
      if (pending) await this.deleteParts(pending);
      return true;
    });
  }

  /** Bytes per model and in total, with the disk's free space. */
  async usage(): Promise<StoreUsage> {
    const inUse = this.inUse();
    const records = Object.values(this.index.models).sort((a, b) => (a.modelId < b.modelId ? -1 : 1));
    const modelBytes = (await this.freedByEvicting(records))[records.length - 1] ?? 0;
    const tracked = new Set<string>();
    for (const r of records) for (const f of r.files) tracked.add(filePathFor(this.root, r.repo, r.revision, f.path));
    let partialBytes = 0;
    let untrackedBytes = 0;
    const walk = async (dir: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const e of entries) {
        const path = join(dir, e.name);
        if (e.isDirectory()) {
          await walk(path);
        } else if (e.isFile()) {
          if (dir === this.root && e.name.startsWith(INDEX_FILE)) continue;
          const size = (await sizeOf(path)) ?? 0;
          if (e.name.endsWith(PART_SUFFIX)) partialBytes += size;
          else if (!tracked.has(path)) untrackedBytes += size;
        }
      }
    };
    await walk(this.root);
    return {
      models: records.map((r) => ({ modelId: r.modelId, repo: r.repo, revision: r.revision, bytes: r.bytes, lastUsedMs: r.lastUsedMs, inUse: inUse.has(r.modelId) })),
      modelBytes,
      partialBytes,
      untrackedBytes,
      totalBytes: modelBytes + partialBytes + untrackedBytes,
      disk: { freeBytes: await this.freeBytes(), reserveBytes: this.reserveBytes },
    };
  }

  /** The store directory of a repo (all its revisions), for display. */
  repoPath(repo: string): string {
    return repoDir(this.root, repo);
  }
}
