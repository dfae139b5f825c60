// Model storage: the models directory exists, is writable, and its disk keeps a reserve free.

import { constants } from 'node:fs';
import { access, mkdir, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { formatBytes } from '../common/format-bytes.js';
import { modelsDir } from '../common/paths.js';
import type { Check } from './report.js';

/** Free space model storage wants to keep: downloads never eat the last of the disk. */
export const MODEL_STORAGE_RESERVE_BYTES = 10 * 1024 ** 3;

export interface StorageFacts {
  dataDir: string;
  modelsDir: string;
  dataDirExists: boolean;
  modelsDirExists: boolean;
  /** The models path exists but is not a directory. */
  modelsDirNotDirectory: boolean;
  /** A file can be created in the models dir (or, when it is missing, in its nearest existing parent). */
  writable: boolean;
  writeError: string | null;
  /** Free bytes for an unprivileged writer on the disk that holds (or will hold) the models dir. */
  freeBytes: number | null;
  totalBytes: number | null;
  /** The existing directory the space and write checks ran on. */
  probedPath: string;
}

async function exists(path: string): Promise<{ exists: boolean; directory: boolean }> {
  try {
    const info = await stat(path);
    return { exists: true, directory: info.isDirectory() };
  } catch {
    return { exists: false, directory: false };
  }
}

async function nearestExisting(path: string): Promise<string> {
  let current = path;
  for (;;) {
    if ((await exists(current)).exists) return current;
    const parent = dirname(current);
    if (parent === current) return current;
    current = parent;
  }
}

/** Writes and removes a probe file: the only test that also catches read-only mounts as root. */
async function probeWrite(dir: string): Promise<string | null> {
  try {
    await access(dir, constants.W_OK);
    const probe = `${dir}/.shoal-doctor-${process.pid}`;
    await writeFile(probe, '');
    await rm(probe, { force: true });
    return null;
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    return e.code ? `${e.code}: ${e.message}` : String(error);
  }
}

export async function inspectStorage(dataDir: string): Promise<StorageFacts> {
  const models = modelsDir(dataDir);
  const [data, modelsInfo] = await Promise.all([exists(dataDir), exists(models)]);
  const probedPath = modelsInfo.directory ? models : await nearestExisting(dirname(models));
  const writeError = modelsInfo.exists && !modelsInfo.directory ? 'not a directory' : await probeWrite(probedPath);
  let freeBytes: number | null = null;
  let totalBytes: number | null = null;
  try {
    const fs = await statfs(probedPath);
    freeBytes = fs.bavail * fs.bsize;
    totalBytes = fs.blocks * fs.bsize;
  } catch {
    // unknown; reported as such
  }
  return {
    dataDir,
    modelsDir: models,
    dataDirExists: data.directory,
    modelsDirExists: modelsInfo.directory,
    modelsDirNotDirectory: modelsInfo.exists && !modelsInfo.directory,
    writable: writeError === null,
    writeError,
    freeBytes,
    totalBytes,
    probedPath,
  };
}

/** The storage checks for these facts (pure). */
export function storageChecks(facts: StorageFacts, reserveBytes: number = MODEL_STORAGE_RESERVE_BYTES): Check[] {
  const checks: Check[] = [];
  if (facts.modelsDirNotDirectory) {
    checks.push({
      id: 'storage.models_dir',
      level: 'error',
      summary: `${facts.modelsDir} exists but is not a directory`,
      remediation: `move the file away, then run shoal doctor --fix`,
    });
  } else if (!facts.modelsDirExists) {
    checks.push({
      id: 'storage.models_dir',
      level: 'warn',
      summary: `the models directory ${facts.modelsDir} does not exist yet`,
      remediation: facts.writable ? 'shoal doctor --fix creates it (shoal run also does)' : `make ${facts.probedPath} writable, or pick another --data-dir`,
    });
  } else {
    checks.push({ id: 'storage.models_dir', level: 'ok', summary: `models directory ${facts.modelsDir}` });
  }

  if (!facts.writable && !facts.modelsDirNotDirectory) {
    checks.push({
      id: 'storage.writable',
      level: 'error',
      summary: `${facts.probedPath} is not writable: models cannot be stored`,
      ...(facts.writeError ? { detail: facts.writeError } : {}),
      remediation: `fix its permissions (the node runs as uid ${typeof process.getuid === 'function' ? process.getuid() : '?'}), or pick another --data-dir`,
    });
  } else if (facts.writable) {
    checks.push({ id: 'storage.writable', level: 'ok', summary: `${facts.probedPath} is writable` });
  }

  if (facts.freeBytes === null) {
    checks.push({ id: 'storage.free_space', level: 'warn', summary: `free space on ${facts.probedPath} is unknown` });
  } else if (facts.freeBytes < reserveBytes) {
    checks.push({
      id: 'storage.free_space',
      level: 'warn',
      summary: `${formatBytes(facts.freeBytes)} free on the models disk, under the ${formatBytes(reserveBytes)} reserve: downloads will be refused`,
      remediation: `free space on ${facts.probedPath}, or pick a --data-dir on a larger disk`,
    });
  } else {
    checks.push({
      id: 'storage.free_space',
      level: 'ok',
      summary: `${formatBytes(facts.freeBytes)} free on the models disk (${formatBytes(facts.freeBytes - reserveBytes)} beyond the ${formatBytes(reserveBytes)} reserve)`,
    });
  }
  return checks;
}

/** Creates the data and models directories when missing; returns what it created. */
export async function fixStorage(dataDir: string): Promise<string[]> {
  const created: string[] = [];
  for (const [path, mode] of [
    [dataDir, 0o700],
    [modelsDir(dataDir), 0o755],
  ] as const) {
    if ((await exists(path)).exists) continue;
    await mkdir(path, { recursive: true, mode });
    created.push(path);
  }
  return created;
}
