// The capture bundle (`shoal diagnose`, `GET /diagnostics/bundle`): one `.tar.gz` with what an operator
// needs to understand a node after the fact. Safe to take during a hang: every source is read with its
// own time limit and a source that fails or runs out of time leaves a file that says so instead of
// holding up the rest, and the sources the node gives read only its own memory and files (never a
// runner, never a child's event loop). Every file is redacted (redact.ts) before it is written.

import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from 'tar';
import { redactor } from './redact.js';

/** How long one source may take; past it, its file says it timed out. */
export const BUNDLE_SOURCE_TIMEOUT_MS = 5_000;
/** Longest file in the bundle (after redaction); a longer one is cut, and says so at its end. */
export const BUNDLE_FILE_MAX_BYTES = 2 * 1024 * 1024;
/** Most files: with BUNDLE_FILE_MAX_BYTES, at most 24 MiB of content before compression. */
export const BUNDLE_FILES_MAX = 12;

/** One file of the bundle: text as is, anything else as indented JSON. */
export interface BundleSource {
  file: string;
  read: () => unknown;
}

export interface BundleOptions {
  sources: readonly BundleSource[];
  /** Values that must not appear in any file (redact.ts adds its patterns). */
  secrets: Iterable<string>;
  timeoutMs?: number;
}

function timeout(ms: number): { promise: Promise<never>; cancel: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

async function readSource(source: BundleSource, timeoutMs: number): Promise<string> {
  const limit = timeout(timeoutMs);
  try {
    const value = await Promise.race([Promise.resolve().then(source.read), limit.promise]);
    const text = typeof value === 'string' ? value : `${JSON.stringify(value, null, 2)}\n`;
    return text === '' ? `(${source.file}: empty)\n` : text;
  } catch (error) {
    return `could not read ${source.file}: ${(error as Error).message}\n`;
  } finally {
    limit.cancel();
  }
}

/** Cuts `text` to BUNDLE_FILE_MAX_BYTES (at a character boundary) with a note of how much was left out. */
export function capText(text: string, maxBytes = BUNDLE_FILE_MAX_BYTES): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  const note = `\n... cut: ${bytes.length - maxBytes} more bytes were left out (limit ${maxBytes} bytes per file)\n`;
  // A cut inside a multi-byte character decodes to U+FFFD; drop it.
  return `${bytes.subarray(0, maxBytes - Buffer.byteLength(note)).toString('utf8').replace(/\uFFFD$/, '')}${note}`;
}

/** The bundle's files, redacted and cut, in the order of `sources`. */
export async function bundleFiles(options: BundleOptions): Promise<{ file: string; text: string }[]> {
  if (options.sources.length > BUNDLE_FILES_MAX) throw new RangeError(`a bundle holds at most ${BUNDLE_FILES_MAX} files`);
  const redact = redactor(options.secrets);
  const timeoutMs = options.timeoutMs ?? BUNDLE_SOURCE_TIMEOUT_MS;
  return Promise.all(options.sources.map(async (source) => ({ file: source.file, text: capText(redact(await readSource(source, timeoutMs))) })));
}

/** The gzipped tar of the bundle's files, under a top folder `folder`. */
export async function captureBundle(folder: string, options: BundleOptions): Promise<Buffer> {
  const files = await bundleFiles(options);
  const dir = await mkdtemp(join(tmpdir(), 'shoal-diagnose-'));
  try {
    const root = join(dir, folder);
    await mkdir(root, { mode: 0o700 });
    await Promise.all(files.map((f) => writeFile(join(root, f.file), f.text, { mode: 0o600 })));
    const chunks: Buffer[] = [];
    for await (const chunk of create({ gzip: true, cwd: dir, portable: true }, files.map((f) => `${folder}/${f.file}`))) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
