import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/**
 * Where a node keeps its state. `--data-dir` wins, then SHOAL_HOME, then the XDG data dir
 * ($XDG_DATA_HOME/shoal, default ~/.local/share/shoal).
 */
export function resolveDataDir(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag) return resolve(flag);
  if (env.SHOAL_HOME) return resolve(env.SHOAL_HOME);
  const xdg = env.XDG_DATA_HOME && env.XDG_DATA_HOME !== '' ? env.XDG_DATA_HOME : join(homedir(), '.local', 'share');
  return join(xdg, 'shoal');
}

export function modelsDir(dataDir: string): string {
  return join(dataDir, 'models');
}
