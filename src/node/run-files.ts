import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ShoalError } from '../common/errors.js';

/**
 * What a running node leaves in its data dir for the CLI: where its API listens and the admin token
 * of this start. Both files are mode 0600, rewritten at every start and removed at a clean stop.
 */

export const RunInfo = z.strictObject({
  pid: z.number().int().positive(),
  apiPort: z.number().int().positive(),
  startedAtMs: z.number().int().nonnegative(),
});
export type RunInfo = z.infer<typeof RunInfo>;

const runDir = (dataDir: string): string => join(dataDir, 'run');
const infoPath = (dataDir: string): string => join(runDir(dataDir), 'node.json');
const tokenPath = (dataDir: string): string => join(runDir(dataDir), 'admin.token');

async function writePrivate(path: string, text: string): Promise<void> {
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, text, { mode: 0o600 });
  await rename(tmp, path);
}

/** Writes this start's run info and admin token (a fresh one unless `token` is given) and returns the token. */
export async function writeRunFiles(dataDir: string, info: RunInfo, token: string = randomBytes(32).toString('hex')): Promise<string> {
  await mkdir(runDir(dataDir), { recursive: true, mode: 0o700 });
  await writePrivate(tokenPath(dataDir), `${token}\n`);
  await writePrivate(infoPath(dataDir), `${JSON.stringify(info)}\n`);
  return token;
}

export async function removeRunFiles(dataDir: string): Promise<void> {
  await rm(infoPath(dataDir), { force: true });
  await rm(tokenPath(dataDir), { force: true });
}

/** For the CLI: finds the node that runs from `dataDir`, or says how to start one. */
export async function readRunFiles(dataDir: string): Promise<{ info: RunInfo; token: string }> {
  let infoText: string;
  let token: string;
  try {
    infoText = await readFile(infoPath(dataDir), 'utf8');
    token = (await readFile(tokenPath(dataDir), 'utf8')).trim();
  } catch (error) {
    throw new ShoalError('NOT_FOUND', `no node is running from ${dataDir}: start one with 'shoal run --data-dir ${dataDir}' (or pass the --data-dir of the running node)`, {
      cause: error,
    });
  }
  const info = RunInfo.safeParse(JSON.parse(infoText));
  if (!info.success) throw new ShoalError('NOT_FOUND', `${infoPath(dataDir)} is damaged: restart the node`);
  return { info: info.data, token };
}
