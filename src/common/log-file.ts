import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The node's log on disk, `<dataDir>/logs/shoal.log`, so `shoal logs` and the dashboard have the
 * lines of a stopped node and more than the in-memory ring holds. A logger destination (see
 * createLogger's `file`): lines are queued and appended by one asynchronous writer, so logging never
 * waits on the disk; a full file is renamed to `shoal.log.1` (the older ones shift up, the oldest is
 * deleted), bounding the whole log at maxBytes x maxFiles.
 */

export const LOG_FILE_NAME = 'shoal.log';
/** A file is rotated before it would grow past this. */
export const LOG_FILE_MAX_BYTES = 10 * 1024 * 1024;
/** Files kept, the current one included. */
export const LOG_FILE_MAX_FILES = 5;
/** Lines waiting for the disk; beyond this new lines are dropped (and counted) until it catches up. */
export const LOG_FILE_MAX_PENDING_BYTES = 4 * 1024 * 1024;
/** Only the node's own user may read its log (it names models, peers and errors), as the event log. */
export const LOG_FILE_MODE = 0o600;
const LOG_DIR_MODE = 0o700;

export interface LogFileLimits {
  maxBytes: number;
  maxFiles: number;
  maxPendingBytes: number;
}

export const DEFAULT_LOG_FILE_LIMITS: LogFileLimits = { maxBytes: LOG_FILE_MAX_BYTES, maxFiles: LOG_FILE_MAX_FILES, maxPendingBytes: LOG_FILE_MAX_PENDING_BYTES };

export function logsDir(dataDir: string): string {
  return join(dataDir, 'logs');
}

/** The files of a log, newest first: `shoal.log`, `shoal.log.1`, ... */
export function logFilePaths(dir: string, maxFiles = LOG_FILE_MAX_FILES): string[] {
  return Array.from({ length: maxFiles }, (_, i) => join(dir, i === 0 ? LOG_FILE_NAME : `${LOG_FILE_NAME}.${i}`));
}

export class RotatingLogFile {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private droppedLines = 0;
  private writing: Promise<void> | null = null;
  private failing = false;
  private closed = false;

  private constructor(
    readonly dir: string,
    private handle: FileHandle,
    private size: number,
    readonly limits: LogFileLimits,
  ) {}

  /** Opens (or creates) the log in `dir` for appending. */
  static async open(dir: string, limits: LogFileLimits = DEFAULT_LOG_FILE_LIMITS): Promise<RotatingLogFile> {
    await mkdir(dir, { recursive: true, mode: LOG_DIR_MODE });
    const path = join(dir, LOG_FILE_NAME);
    const handle = await open(path, 'a', LOG_FILE_MODE);
    // An older file may have been made with a wider mode: the log is private either way.
    await handle.chmod(LOG_FILE_MODE);
    const { size } = await handle.stat();
    return new RotatingLogFile(dir, handle, size, limits);
  }

  get path(): string {
    return join(this.dir, LOG_FILE_NAME);
  }

  /** The logger's write: whole JSON lines. Returns at once; the disk write happens later. */
  write(chunk: string | Uint8Array): void {
    if (this.closed) return;
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk);
    if (this.pendingBytes + bytes.length > this.limits.maxPendingBytes) {
      this.droppedLines += 1;
      return;
    }
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    this.writing ??= this.drain();
  }

  /** Resolves once every line written so far is in the file. */
  async flush(): Promise<void> {
    while (this.writing !== null) await this.writing;
  }

  /**
   * Flushes, then calls `capture` at the instant everything logged so far is in the file and nothing
   * more is: `endBytes` bounds a tail read (readLogTail) to exactly the lines logged before `capture`.
   */
  async flushed<T>(capture: () => T): Promise<{ endBytes: number; value: T }> {
    while (this.writing !== null) await this.writing;
    return { endBytes: this.size, value: capture() };
  }

  /**
   * For `process.on('exit')`, where nothing asynchronous runs any more: appends what is still queued.
   * A batch already handed to the disk is not written again (it has almost surely landed).
   */
  flushSync(): void {
    if (this.closed) return;
    const batch = Buffer.concat(this.takeAll());
    try {
      if (batch.length > 0) writeSync(this.handle.fd, batch);
    } catch {
      // Exiting: there is nowhere left to report a failed write.
    }
  }

  async close(): Promise<void> {
    await this.flush();
    if (this.closed) return;
    this.closed = true;
    await this.handle.close();
  }

  private takeAll(): Buffer[] {
    const taken = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    if (this.droppedLines > 0) {
      taken.push(Buffer.from(`${JSON.stringify({ level: 40, time: Date.now(), msg: `${this.droppedLines} log lines were not written to this file: the disk did not keep up` })}\n`));
      this.droppedLines = 0;
    }
    return taken;
  }

  private async drain(): Promise<void> {
    try {
      // Lines logged in the same turn of the event loop go out in one write.
      await new Promise((resolve) => setImmediate(resolve));
      while (this.pending.length > 0 || this.droppedLines > 0) {
        const queue = this.takeAll();
        while (queue.length > 0) {
          // Rotate between lines, before a line would take the file past the limit (a single line
          // longer than the limit gets a file to itself).
          if (this.size > 0 && this.size + queue[0]!.length > this.limits.maxBytes) await this.rotate();
          const batch: Buffer[] = [];
          let bytes = 0;
          while (queue.length > 0 && (bytes === 0 || this.size + bytes + queue[0]!.length <= this.limits.maxBytes)) {
            bytes += queue[0]!.length;
            batch.push(queue.shift()!);
          }
          await this.append(Buffer.concat(batch, bytes));
        }
      }
    } finally {
      this.writing = null;
    }
  }

  private async append(bytes: Buffer): Promise<void> {
    try {
      let written = 0;
      while (written < bytes.length) written += (await this.handle.write(bytes, written, bytes.length - written)).bytesWritten;
      this.size += bytes.length;
      this.failing = false;
    } catch (error) {
      // Never through the logger (that would queue more lines for the failing disk): once per streak of failures.
      if (!this.failing) process.stderr.write(`shoal: cannot write the log file ${this.path} (${(error as Error).message}); its lines are lost until it can\n`);
      this.failing = true;
    }
  }

  private async rotate(): Promise<void> {
    try {
      const paths = logFilePaths(this.dir, this.limits.maxFiles);
      await this.handle.close();
      await rm(paths.at(-1)!, { force: true });
      for (let i = paths.length - 2; i >= 0; i -= 1) await rename(paths[i]!, paths[i + 1]!).catch(ignoreMissing);
      // With one file kept, rotating deletes the only one: the limit still holds.
      this.handle = await open(this.path, 'a', LOG_FILE_MODE);
      this.size = (await this.handle.stat()).size;
    } catch (error) {
      // The next line tries again; until then writes fail and are reported once.
      if (!this.failing) process.stderr.write(`shoal: cannot rotate the log file ${this.path} (${(error as Error).message})\n`);
      this.failing = true;
    }
  }
}

function ignoreMissing(error: unknown): void {
  if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
}

const READ_CHUNK_BYTES = 64 * 1024;

/**
 * The newest lines of the log in `dir`, oldest first: at most `maxLines`, and no more than `maxBytes`
 * of them (at least one line). `endBytes` stops the read of the current file at that size (a
 * snapshot taken after a flush), so lines written while reading are not included.
 */
export async function readLogTail(dir: string, options: { maxLines: number; maxBytes: number; maxFiles?: number; endBytes?: number }): Promise<string[]> {
  const lines: string[] = [];
  let bytes = 0;
  /** False once the budget is spent. */
  const take = (raw: Buffer): boolean => {
    const line = raw.toString('utf8');
    if (line.trim() === '') return true;
    const size = raw.length;
    if (lines.length >= options.maxLines || (bytes + size > options.maxBytes && lines.length > 0)) return false;
    lines.push(line);
    bytes += size;
    return true;
  };
  for (const [index, path] of logFilePaths(dir, options.maxFiles ?? LOG_FILE_MAX_FILES).entries()) {
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw error;
    }
    try {
      const size = (await handle.stat()).size;
      let position = index === 0 && options.endBytes !== undefined ? Math.min(options.endBytes, size) : size;
      // The start of a line whose beginning lies in an earlier chunk.
      let carry = Buffer.alloc(0);
      while (position > 0) {
        const length = Math.min(READ_CHUNK_BYTES, position);
        position -= length;
        const chunk = Buffer.alloc(length);
        await handle.read(chunk, 0, length, position);
        const text = Buffer.concat([chunk, carry]);
        let end = text.length;
        for (let nl = text.lastIndexOf(10, end - 1); nl !== -1; nl = end > 0 ? text.lastIndexOf(10, end - 1) : -1) {
          if (!take(text.subarray(nl + 1, end))) return lines.reverse();
          end = nl;
        }
        carry = text.subarray(0, end);
      }
      if (!take(carry)) return lines.reverse();
    } finally {
      await handle.close();
    }
  }
  return lines.reverse();
}
