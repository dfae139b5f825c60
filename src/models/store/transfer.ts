// One file into place from a byte source (the hub, or a member that holds a copy): resumes its
// `.part` file where it ends, hashes as it writes, and renames into place only when the hash matches
// what the hub lists.

import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, stat, unlink, type FileHandle } from 'node:fs/promises';
import { dirname } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileDownloadInfo, HubApiError } from '@huggingface/hub';
import { errorMessage, type ShoalError } from '../../common/errors.js';
import { formatBytes } from '../../common/format-bytes.js';
import { cancelledError, ModelsError, type ModelsErrorReason } from '../hub/errors.js';
import { hubError, isNetworkError, mergeSignals, type ResolvedHubOptions } from '../hub/endpoint.js';
import type { HubFile } from '../hub/gguf-files.js';
import { httpGet } from './http-body.js';


/** A transfer that ended early in a way a later attempt may not (a cut connection, a short body): retried from the part file's end. */
export class RetryableError extends Error {
  override name = 'RetryableError';
}

/**
 * Appends one file's bytes to its part file, hashing them; a source writes into it. The bytes are
 * copied into the writer's own blocks (TRANSFER_WRITE_BLOCK_BYTES), whose writes overlap the source:
 * the source may reuse a chunk's memory as soon as `write` or `push` returns.
 */
export interface PartWriter {
  /** Bytes accepted so far (on disk or queued to be): where the source continues. */
  readonly position: number;
  /** Takes `chunk`, then waits while the disk is behind; throws when it would run past the file's size, or when an earlier write failed. */
  write(chunk: Uint8Array): Promise<void>;
  /**
   * Takes `chunk` as `write` does, without a promise (for a source that reads in callbacks): false
   * when the disk is behind, and the source should hold its next chunk until `ready()` resolves.
   */
  push(chunk: Uint8Array): boolean;
  /** Resolves once the writer takes chunks without waiting again; rejects with a write's failure. */
  ready(): Promise<void>;
  /**
   * For a source that can read straight into memory (a socket's `onread`), skipping the copy:
   * the free part of the block being filled, at most `max` bytes, or null while the disk is behind.
   * The writer leaves it alone until `commit`; a region never committed is simply not used.
   */
  region(max: number): Uint8Array | null;
  /** `n` bytes landed at the start of the last region: hashes and takes them, then answers as `push` does. */
  commit(n: number): boolean;
  /** Empties the part file: the source sends the whole file again (a server that ignored Range). */
  restart(): Promise<void>;
}

/** Where a file's bytes come from. */
export interface ByteSource {
  /** Named in messages: the hub's URL, or `member <name or id>`. */
  readonly name: string;
  /** `downloading` (the hub) or `copying` (a peer), for messages. */
  readonly verb: 'downloading' | 'copying';
  /** The reason a wrong answer from this source carries (HUB_BAD_RESPONSE, PEER_COPY_FAILED). */
  readonly badAnswer: ModelsErrorReason;
  /** Attempts after the first when a failure is retryable; default the store's. */
  readonly retries?: number;
  /**
   * Writes `file` from `writer.position` to its end into `writer`. Throws a ModelsError for an answer
   * that another attempt would not change, a RetryableError (or a failure `retryable` accepts) otherwise.
   */
  fetch(file: HubFile, writer: PartWriter, signal: AbortSignal): Promise<void>;
  retryable(error: unknown): boolean;
  /** A failure that is not retryable and not a ModelsError, as the error to throw. */
  failure(error: unknown, what: string, signal: AbortSignal): ShoalError;
}

export interface TransferArgs {
  source: ByteSource;
  repo: string;
  revision: string;
  file: HubFile;
  finalPath: string;
  partPath: string;
  signal: AbortSignal;
  /** Extra attempts after a retryable failure (unless the source says otherwise); each resumes where the part file ends. */
  retries: number;
  retryDelayMs: number;
  /** The transfer (re)starts with `bytesOnDisk` already in the part file. */
  onStart?: (bytesOnDisk: number) => void;
  /** `delta` bytes were appended; the part file now holds `bytesOnDisk`. */
  onBytes?: (delta: number, bytesOnDisk: number) => void;
  onVerify?: () => void;
  onRetry?: (attempt: number, error: unknown) => void;
}

/** A hash of the file as the hub identifies it: SHA-256 (LFS), else the git blob SHA-1. */
class FileDigest {
  readonly algorithm: 'sha256' | 'git-sha1';
  readonly expected: string;
  private hash: Hash;
  bytes = 0;

  constructor(private readonly file: HubFile) {
    if (file.sha256) {
      this.algorithm = 'sha256';
      this.expected = file.sha256;
    } else if (file.gitOid) {
      this.algorithm = 'git-sha1';
      this.expected = file.gitOid;
    } else {
      throw new ModelsError('HUB_BAD_RESPONSE', `the hub lists no hash for ${file.path}: refusing to download what cannot be verified`);
    }
    this.hash = this.fresh();
  }

  private fresh(): Hash {
    return this.algorithm === 'sha256' ? createHash('sha256') : createHash('sha1').update(`blob ${this.file.size}\0`);
  }

  reset(): void {
    this.hash = this.fresh();
    this.bytes = 0;
  }

  update(chunk: Uint8Array): void {
    this.hash.update(chunk);
    this.bytes += chunk.length;
  }

  digest(): string {
    return this.hash.digest('hex');
  }
}

/**
 * Bytes collected before one disk write. Writing each network chunk (16-64 KiB) and waiting for it
 * kept the network, the hash and the disk taking turns; blocks this size, written while the next one
 * is collected and hashed, overlap them. Memory per file transfer: three blocks at most (one being
 * written, one full and waiting, one being filled), reused for the whole transfer.
 */
export const TRANSFER_WRITE_BLOCK_BYTES = 4 * 1024 * 1024;
/**
 * A smaller block is written once its first byte has waited this long and no write is in flight, so
 * a slow transfer still reaches the disk (and its progress shows) every fraction of a second.
 */
export const TRANSFER_WRITE_DELAY_MS = 100;
/**
 * Written bytes after which the writer starts an fdatasync, without waiting for it (one at a time):
 * the disk writes back while the download goes on, instead of all of it in the final fsync.
 */
export const TRANSFER_SYNC_EVERY_BYTES = 32 * 1024 * 1024;

/**
 * The part file's writer. Bytes are hashed as they arrive and appended in order, one block write in
 * flight at a time, so the part file always holds a prefix of the file: a crash leaves a part file
 * whose size is where the next attempt resumes. After a failed write nothing more is written (a later
 * block must never land after a gap); the next attempt starts from the part file's real size.
 */
class PartFileWriter implements PartWriter {
  /** Bytes accepted: hashed, and written or queued. */
  position: number;
  /** Bytes whose write has completed. */
  private onDisk: number;
  /** The block being filled, and how much of it is. */
  private block: Buffer | null = null;
  private fill = 0;
  /** When the block's first byte arrived (performance.now()). */
  private blockSinceMs = 0;
  /** Full blocks waiting for the write in flight (one, unless a source ignored `push`'s false). */
  private queue: { buffer: Buffer; bytes: number }[] = [];
  /** Blocks written and free to fill again. */
  private spare: Buffer[] = [];
  /** The write in flight; it never rejects (its failure is kept in `failure`). */
  private writing: Promise<void> | null = null;
  /** The fdatasync in flight; like `writing`, it never rejects. */
  private syncing: Promise<void> | null = null;
  private unsynced = 0;
  private failure: { error: unknown } | null = null;

  constructor(
    private readonly handle: FileHandle,
    position: number,
    private readonly file: HubFile,
    private readonly digest: FileDigest,
    private readonly source: ByteSource,
    private readonly what: string,
    private readonly onBytes: ((delta: number, bytesOnDisk: number) => void) | undefined,
  ) {
    this.position = position;
    this.onDisk = position;
  }

  push(chunk: Uint8Array): boolean {
    this.throwIfFailed();
    if (this.position + chunk.length > this.file.size) {
      throw new ModelsError(this.source.badAnswer, `${this.source.name} sent more than the ${this.file.size} bytes of ${this.what}`);
    }
    this.digest.update(chunk);
    for (let at = 0; at < chunk.length; ) {
      if (!this.block) {
        this.block = this.spare.pop() ?? Buffer.allocUnsafeSlow(TRANSFER_WRITE_BLOCK_BYTES);
        this.fill = 0;
        this.blockSinceMs = performance.now();
      }
      const n = Math.min(chunk.length - at, TRANSFER_WRITE_BLOCK_BYTES - this.fill);
      this.block.set(n === chunk.length ? chunk : chunk.subarray(at, at + n), this.fill);
      this.fill += n;
      at += n;
      this.position += n;
      if (this.fill === TRANSFER_WRITE_BLOCK_BYTES) this.seal();
    }
    if (this.fill > 0 && !this.writing && this.queue.length === 0 && performance.now() - this.blockSinceMs >= TRANSFER_WRITE_DELAY_MS) this.seal();
    this.writeNext();
    return this.queue.length === 0;
  }

  region(max: number): Uint8Array | null {
    if (this.failure || this.queue.length > 0) return null;
    if (!this.block) {
      this.block = this.spare.pop() ?? Buffer.allocUnsafeSlow(TRANSFER_WRITE_BLOCK_BYTES);
      this.fill = 0;
      this.blockSinceMs = performance.now();
    }
    return this.block.subarray(this.fill, this.fill + Math.min(max, TRANSFER_WRITE_BLOCK_BYTES - this.fill));
  }

  commit(n: number): boolean {
    this.throwIfFailed();
    const block = this.block as Buffer;
    if (this.position + n > this.file.size) {
      throw new ModelsError(this.source.badAnswer, `${this.source.name} sent more than the ${this.file.size} bytes of ${this.what}`);
    }
    this.digest.update(block.subarray(this.fill, this.fill + n));
    this.fill += n;
    this.position += n;
    if (this.fill === TRANSFER_WRITE_BLOCK_BYTES) this.seal();
    else if (!this.writing && this.queue.length === 0 && performance.now() - this.blockSinceMs >= TRANSFER_WRITE_DELAY_MS) this.seal();
    this.writeNext();
    return this.queue.length === 0;
  }

  async ready(): Promise<void> {
    // A full block waits only for the write in flight: its completion starts the block's write.
    for (;;) {
      this.throwIfFailed();
      if (this.queue.length === 0) return;
      await this.writing;
    }
  }

  async write(chunk: Uint8Array): Promise<void> {
    if (!this.push(chunk)) await this.ready();
  }

  /** Queues the block being filled for writing. */
  private seal(): void {
    if (!this.block || this.fill === 0) return;
    this.queue.push({ buffer: this.block, bytes: this.fill });
    this.block = null;
    this.fill = 0;
  }

  /** Starts writing the first queued block, unless a write is in flight, without waiting for it. */
  private writeNext(): void {
    if (this.writing || this.failure) return;
    const next = this.queue.shift();
    if (!next) return;
    const { buffer, bytes } = next;
    this.writing = writeAll(this.handle, [buffer.subarray(0, bytes)], bytes).then(
      () => {
        this.onDisk += bytes;
        this.writing = null;
        this.spare.push(buffer);
        this.unsynced += bytes;
        if (this.unsynced >= TRANSFER_SYNC_EVERY_BYTES && !this.syncing) this.startSync();
        this.writeNext();
        this.onBytes?.(bytes, this.onDisk);
      },
      (error: unknown) => {
        this.failure = { error };
        this.writing = null;
      },
    );
  }

  private startSync(): void {
    this.unsynced = 0;
    this.syncing = this.handle.datasync().then(
      () => {
        this.syncing = null;
      },
      (error: unknown) => {
        this.failure ??= { error };
        this.syncing = null;
      },
    );
  }

  /** A method rather than inline checks: TypeScript would keep `failure` narrowed across awaits. */
  private throwIfFailed(): void {
    if (this.failure) throw this.failure.error;
  }

  /** Waits until nothing runs on the handle (`writing` and `syncing` never reject). */
  private async idle(): Promise<void> {
    while (this.writing || this.syncing) {
      await this.writing;
      await this.syncing;
    }
  }

  /** Writes what is collected and waits until it is written (not synced); throws a write's failure. */
  async flush(): Promise<void> {
    this.seal();
    for (;;) {
      this.throwIfFailed();
      if (!this.writing && this.queue.length === 0) break;
      this.writeNext();
      await this.writing;
    }
    await this.idle();
    this.throwIfFailed();
  }

  /**
   * After the source failed: writes what already arrived (so a retry does not fetch it again), or,
   * when that fails too, leaves the part file as it is. Never throws; the caller's error stands.
   */
  async settle(): Promise<void> {
    try {
      await this.flush();
    } catch {
      // The part file still holds a prefix; the next attempt hashes it again from its real size.
    }
    // Nothing may still be running on the handle when it closes.
    await this.idle();
  }

  async restart(): Promise<void> {
    for (const { buffer } of this.queue) this.spare.push(buffer);
    this.queue = [];
    this.fill = 0;
    await this.idle();
    this.throwIfFailed();
    await this.handle.truncate(0);
    this.digest.reset();
    this.position = 0;
    this.onDisk = 0;
    this.unsynced = 0;
  }
}

/** Appends `buffers` (`bytes` in all), continuing after a short write. */
async function writeAll(handle: FileHandle, buffers: Uint8Array[], bytes: number): Promise<void> {
  let rest = buffers;
  let left = bytes;
  while (left > 0) {
    const { bytesWritten } = await handle.writev(rest);
    if (bytesWritten === left) return;
    if (bytesWritten <= 0) throw new Error(`a write to the part file made no progress with ${left} bytes left`);
    left -= bytesWritten;
    let skip = bytesWritten;
    const next: Uint8Array[] = [];
    for (const b of rest) {
      if (skip >= b.length) {
        skip -= b.length;
        continue;
      }
      next.push(skip > 0 ? b.subarray(skip) : b);
      skip = 0;
    }
    rest = next;
  }
}

async function sizeOf(path: string): Promise<number | null> {
  try {
    return (await stat(path)).size;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
}

async function hashPrefix(path: string, bytes: number, digest: FileDigest): Promise<void> {
  digest.reset();
  if (bytes === 0) return;
  for await (const chunk of createReadStream(path, { start: 0, end: bytes - 1 })) digest.update(chunk as Buffer);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

function isDiskFull(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}

function stripEtag(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"|"$/g, '');
}

/** Moves `file` from `source` to `finalPath` (via `partPath`), resuming and retrying; throws ModelsError or CANCELLED. */
export async function transferFile(a: TransferArgs): Promise<void> {
  const { source } = a;
  const what = `${a.file.path} of ${a.repo}@${a.revision}`;
  const retries = source.retries ?? a.retries;
  await mkdir(dirname(a.partPath), { recursive: true });
  const digest = new FileDigest(a.file);
  for (let attempt = 0; ; attempt += 1) {
    if (a.signal.aborted) throw cancelledError(`the download of ${what}`, a.signal.reason);
    try {
      let onDisk = (await sizeOf(a.partPath)) ?? 0;
      if (onDisk > a.file.size) {
        await unlink(a.partPath);
        onDisk = 0;
      }
      if (digest.bytes !== onDisk) await hashPrefix(a.partPath, onDisk, digest);
      a.onStart?.(onDisk);
      if (onDisk < a.file.size) await writeRest(a, onDisk, digest, what);
      else if (onDisk === 0) await (await open(a.partPath, 'a')).close();
      break;
    } catch (error) {
      if (a.signal.aborted) throw cancelledError(`the download of ${what}`, error);
      if (error instanceof ModelsError) throw error;
      if (isDiskFull(error)) {
        throw new ModelsError('INSUFFICIENT_DISK', `the disk filled up while ${source.verb} ${what}; the part file ${a.partPath} is kept: free some space and pull again to resume`, { cause: error });
      }
      const retryable = error instanceof RetryableError || source.retryable(error);
      if (retryable && attempt < retries) {
        a.onRetry?.(attempt + 1, error);
        try {
          await sleep(a.retryDelayMs * 2 ** attempt, a.signal);
        } catch {
          throw cancelledError(`the download of ${what}`, a.signal.reason);
        }
        continue;
      }
      if (retryable) {
        const message = errorMessage(error);
        throw new ModelsError('DOWNLOAD_FAILED', `${source.verb} ${what} from ${source.name} failed after ${attempt + 1} attempts (${message}); the part file is kept and the next pull resumes it`, { cause: error, details: { partPath: a.partPath, source: source.name } });
      }
      throw source.failure(error, what, a.signal);
    }
  }

  a.onVerify?.();
  const actual = digest.digest();
  if (digest.bytes !== a.file.size || actual !== digest.expected) {
    await unlink(a.partPath).catch(() => undefined);
    throw new ModelsError(
      'CHECKSUM_MISMATCH',
      `${what} from ${source.name} does not match the hub's ${digest.algorithm} (expected ${digest.expected}, got ${actual} over ${digest.bytes} bytes): the transfer was corrupted or the source serves different bytes; the part file was deleted, pull again`,
      { details: { path: a.file.path, expected: digest.expected, actual, algorithm: digest.algorithm, bytes: digest.bytes, source: source.name } },
    );
  }
  await rename(a.partPath, a.finalPath);
}

async function writeRest(a: TransferArgs, offset: number, digest: FileDigest, what: string): Promise<void> {
  const handle = await open(a.partPath, 'a');
  try {
    const writer = new PartFileWriter(handle, offset, a.file, digest, a.source, what, a.onBytes);
    try {
      await a.source.fetch(a.file, writer, a.signal);
      await writer.flush();
    } catch (error) {
      await writer.settle();
      throw error;
    }
    if (writer.position !== a.file.size) {
      throw new RetryableError(`the transfer ended at ${formatBytes(writer.position)} of ${formatBytes(a.file.size)}`);
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The hub's `resolve` route for files of `repo` at `revision`, resumed with Range requests. */
export function hubSource(hub: ResolvedHubOptions, repo: string, revision: string): ByteSource {
  return {
    name: hub.endpoint,
    verb: 'downloading',
    badAnswer: 'HUB_BAD_RESPONSE',
    fetch: (file, writer, signal) => fetchFromHub(hub, repo, revision, file, writer, signal),
    retryable: (error) => isNetworkError(error),
    failure: (error, what, signal) => hubError(error, { ...hub, signal }, what, 'FILE_NOT_FOUND'),
  };
}

async function fetchFromHub(hub: ResolvedHubOptions, repo: string, revision: string, file: HubFile, writer: PartWriter, signal: AbortSignal): Promise<void> {
  const what = `${file.path} of ${repo}@${revision}`;
  const offset = writer.position;
  let last: Response | null = null;
  const fetchWithSignal: typeof fetch = async (input, init) => {
    const res = await hub.fetch(input, { ...init, signal: mergeSignals(signal, init?.signal ?? undefined) });
    last = res;
    return res;
  };
  const common = { repo, path: file.path, revision, hubUrl: hub.endpoint, fetch: fetchWithSignal, accessToken: hub.accessToken };
  const info = await fileDownloadInfo(common);
  if (!info) throw new ModelsError('FILE_NOT_FOUND', `${what} is not on ${hub.endpoint}`);
  const probe = last as Response | null;
  if (info.size !== file.size) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${hub.endpoint} serves ${what} with ${info.size} bytes but listed ${file.size}`);
  }
  const etag = stripEtag(info.etag);
  if (file.sha256 && /^[0-9a-f]{64}$/.test(etag) && etag !== file.sha256) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${hub.endpoint} serves ${what} with SHA-256 ${etag} but listed ${file.sha256}`);
  }
  const commit = probe?.headers.get('x-repo-commit');
  if (commit && commit !== revision) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${hub.endpoint} served commit ${commit} when asked for ${what}`);
  }
  // fileDownloadInfo reads only the probe's headers: release its 1-byte body (or xet JSON) and its socket.
  await probe?.body?.cancel().catch(() => undefined);
  const headers: Record<string, string> = {};
  if (hub.accessToken) headers.Authorization = `Bearer ${hub.accessToken}`;
  if (offset > 0) headers.Range = `bytes=${offset}-${file.size - 1}`;
  const answer = { hub, what, offset, writer };
  // With the global fetch, Shoal's own GET reads the body (http-body.ts says why); a fetch given in
  // the hub options (a test's, a proxy's) carries the body too.
  if (hub.fetch === globalThis.fetch && /^https?:/i.test(info.url)) {
    const res = await httpGet(info.url, { headers, signal });
    try {
      await checkBodyAnswer(answer, res.status, res.url, (name) => res.header(name));
    } catch (error) {
      res.discard();
      throw error;
    }
    await res.pump(writer);
    return;
  }
  // The body is read straight from a GET of the client's resolve URL (what downloadFile's WebBlob
  // would fetch): WebBlob.stream() pipes it through a TransformStream, an extra hop per chunk that
  // cost about a quarter of the throughput on loopback, and turns errors into their message text.
  const res = await hub.fetch(info.url, { headers, signal });
  try {
    await checkBodyAnswer(answer, res.status, res.url || info.url, (name) => res.headers.get(name));
  } catch (error) {
    await res.body?.cancel().catch(() => undefined);
    throw error;
  }
  if (!res.body) return;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      await writer.write(value);
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/**
 * Checks the status of the body's GET before its bytes are read: an error answer throws as the hub
 * client's own calls do (HubApiError); a server that ignored Range empties the part file first.
 */
async function checkBodyAnswer(a: { hub: ResolvedHubOptions; what: string; offset: number; writer: PartWriter }, status: number, url: string, header: (name: string) => string | null): Promise<void> {
  if (status < 200 || status > 299) {
    throw new HubApiError(url, status, header('x-request-id') ?? undefined, `Api error with status ${status}. URL: ${url}`);
  }
  if (a.offset === 0) return;
  if (status === 200) {
    // The server ignored Range and sends the whole file: start the part file over.
    await a.writer.restart();
    return;
  }
  const contentRange = header('content-range');
  const start = Number(/^bytes (\d+)-/.exec(contentRange ?? '')?.[1]);
  if (status !== 206 || start !== a.offset) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${a.hub.endpoint} answered a resume of ${a.what} from byte ${a.offset} with HTTP ${status} (${contentRange ?? 'no Content-Range'})`);
  }
}

/** A file on this machine's disk, read from where the part file ends (`shoal models add ./x.gguf` across filesystems). */
export function localFileSource(path: string | Readonly<Record<string, string>>): ByteSource {
  // One path for every file, or each plan file's own (an imported model and its projector).
  const pathOf = (file: { path: string }): string => (typeof path === 'string' ? path : (path[file.path] as string));
  const name = typeof path === 'string' ? path : Object.values(path).join(', ');
  return {
    name,
    verb: 'copying',
    badAnswer: 'DOWNLOAD_FAILED',
    // A local read that failed once fails again: say so at once rather than back off.
    retries: 0,
    fetch: async (file, writer, signal) => {
      for await (const chunk of createReadStream(pathOf(file), { start: writer.position, signal })) await writer.write(chunk as Buffer);
    },
    retryable: () => false,
    failure: (error, what) => new ModelsError('FILE_NOT_FOUND', `cannot read ${name} for ${what}: ${errorMessage(error)}`, { cause: error }),
  };
}
