import { mkdir, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import { writeFileAtomic } from '../common/durable-fs.js';

/**
 * What a running node leaves in its data dir for the CLI: where its API listens and a copy of its
 * admin token (admin-token.ts keeps the token itself across starts). Both files are mode 0600,
 * rewritten at every start and at a rotation, and removed at a clean stop.
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

/**
 * This start's run files. `remove` removes them only once this start wrote them: a start that fails
 * before then leaves alone the files of whatever node (or crash) wrote the ones there.
 */
export class RunFiles {
  private written = false;

  constructor(private readonly dataDir: string) {}

  /** Writes the run info and the admin token the node checks. */
  async write(info: RunInfo, token: string): Promise<void> {
    await mkdir(runDir(this.dataDir), { recursive: true, mode: 0o700 });
    await writeFileAtomic(tokenPath(this.dataDir), `${token}\n`, { mode: 0o600 });
    await writeFileAtomic(infoPath(this.dataDir), `${JSON.stringify(info)}\n`, { mode: 0o600 });
    this.written = true;
  }

  async remove(): Promise<void> {
    if (!this.written) return;
    await rm(infoPath(this.dataDir), { force: true });
    await rm(tokenPath(this.dataDir), { force: true });
  }
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
