// One file from the hub into place: resumes its `.part` file with a Range request, hashes as it
// writes, and renames into place only when the hash matches what the hub lists.

import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { downloadFile, fileDownloadInfo } from '@huggingface/hub';
import { cancelledError, ModelsError } from '../hub/errors.js';
import { hubError, isNetworkError, mergeSignals, type ResolvedHubOptions } from '../hub/endpoint.js';
import type { HubFile } from '../hub/gguf-files.js';
import { formatBytes } from './progress.js';

export interface TransferArgs {
  hub: ResolvedHubOptions;
  repo: string;
  revision: string;
  file: HubFile;
  finalPath: string;
  partPath: string;
  signal: AbortSignal;
  /** Extra attempts after a network failure; each resumes where the part file ends. */
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

class RetryableError extends Error {}

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

/** Downloads `file` to `finalPath` (via `partPath`), resuming and retrying; throws ModelsError or CANCELLED. */
export async function transferFile(a: TransferArgs): Promise<void> {
  const what = `${a.file.path} of ${a.repo}@${a.revision}`;
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
      if (onDisk < a.file.size) await fetchRest(a, onDisk, digest, what);
      else if (onDisk === 0) await (await open(a.partPath, 'a')).close();
      break;
    } catch (error) {
      if (a.signal.aborted) throw cancelledError(`the download of ${what}`, error);
      if (error instanceof ModelsError) throw error;
      if (isDiskFull(error)) {
        throw new ModelsError('INSUFFICIENT_DISK', `the disk filled up while downloading ${what}; the part file ${a.partPath} is kept: free some space and pull again to resume`, { cause: error });
      }
      const retryable = error instanceof RetryableError || isNetworkError(error);
      if (retryable && attempt < a.retries) {
        a.onRetry?.(attempt + 1, error);
        try {
          await sleep(a.retryDelayMs * 2 ** attempt, a.signal);
        } catch {
          throw cancelledError(`the download of ${what}`, a.signal.reason);
        }
        continue;
      }
      if (retryable) {
        const message = error instanceof Error ? error.message : String(error);
        throw new ModelsError('DOWNLOAD_FAILED', `downloading ${what} failed after ${attempt + 1} attempts (${message}); the part file is kept and the next pull resumes it`, { cause: error, details: { partPath: a.partPath } });
      }
      throw hubError(error, { ...a.hub, signal: a.signal }, what, 'FILE_NOT_FOUND');
    }
  }

  a.onVerify?.();
  const actual = digest.digest();
  if (digest.bytes !== a.file.size || actual !== digest.expected) {
    await unlink(a.partPath).catch(() => undefined);
    throw new ModelsError(
      'CHECKSUM_MISMATCH',
      `${what} does not match the hub's ${digest.algorithm} (expected ${digest.expected}, got ${actual} over ${digest.bytes} bytes): the download was corrupted or the mirror serves different bytes; the part file was deleted, pull again`,
      { details: { path: a.file.path, expected: digest.expected, actual, algorithm: digest.algorithm, bytes: digest.bytes } },
    );
  }
  await rename(a.partPath, a.finalPath);
}

async function fetchRest(a: TransferArgs, offset: number, digest: FileDigest, what: string): Promise<void> {
  let last: Response | null = null;
  const fetchWithSignal: typeof fetch = async (input, init) => {
    const res = await a.hub.fetch(input, { ...init, signal: mergeSignals(a.signal, init?.signal ?? undefined) });
    last = res;
    return res;
  };
  const common = { repo: a.repo, path: a.file.path, revision: a.revision, hubUrl: a.hub.endpoint, fetch: fetchWithSignal, accessToken: a.hub.accessToken };
  const info = await fileDownloadInfo(common);
  if (!info) throw new ModelsError('FILE_NOT_FOUND', `${what} is not on ${a.hub.endpoint}`);
  const probe = last as Response | null;
  if (info.size !== a.file.size) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${a.hub.endpoint} serves ${what} with ${info.size} bytes but listed ${a.file.size}`);
  }
  const etag = stripEtag(info.etag);
  if (a.file.sha256 && /^[0-9a-f]{64}$/.test(etag) && etag !== a.file.sha256) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${a.hub.endpoint} serves ${what} with SHA-256 ${etag} but listed ${a.file.sha256}`);
  }
  const commit = probe?.headers.get('x-repo-commit');
  if (commit && commit !== a.revision) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${a.hub.endpoint} served commit ${commit} when asked for ${what}`);
  }
  // fileDownloadInfo reads only the probe's headers: release its 1-byte body (or xet JSON) and its socket.
  await probe?.body?.cancel().catch(() => undefined);
  const blob = await downloadFile({ ...common, downloadInfo: info, xet: false });
  if (!blob) throw new ModelsError('FILE_NOT_FOUND', `${what} is not on ${a.hub.endpoint}`);
  last = null;
  const reader = (offset > 0 ? blob.slice(offset) : blob).stream().getReader();
  const handle = await open(a.partPath, 'a');
  let position = offset;
  let checked = false;
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (!checked) {
        checked = true;
        const res = last as Response | null;
        if (res && offset > 0) {
          if (res.status === 200) {
            // The server ignored Range and sends the whole file: start the part file over.
            await handle.truncate(0);
            digest.reset();
            position = 0;
          } else {
            const start = Number(/^bytes (\d+)-/.exec(res.headers.get('content-range') ?? '')?.[1]);
            if (res.status !== 206 || start !== offset) {
              throw new ModelsError('HUB_BAD_RESPONSE', `${a.hub.endpoint} answered a resume of ${what} from byte ${offset} with HTTP ${res.status} (${res.headers.get('content-range') ?? 'no Content-Range'})`);
            }
          }
        }
      }
      if (done) break;
      if (position + value.length > a.file.size) {
        throw new ModelsError('HUB_BAD_RESPONSE', `${a.hub.endpoint} sent more than the ${a.file.size} bytes of ${what}`);
      }
      await handle.write(value);
      digest.update(value);
      position += value.length;
      a.onBytes?.(value.length, position);
    }
    if (position !== a.file.size) {
      throw new RetryableError(`the connection ended at ${formatBytes(position)} of ${formatBytes(a.file.size)}`);
    }
    await handle.sync();
  } finally {
    await reader.cancel().catch(() => undefined);
    await handle.close();
  }
}
