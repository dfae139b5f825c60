import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ShoalError } from './errors.js';

let cached: string | null = null;

/** Shoal's version from its package.json, found by walking up from this module (src or dist). */
export function shoalVersion(): string {
  if (cached !== null) return cached;
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate)) {
      const pkg = JSON.parse(readFileSync(candidate, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'shoal' && typeof pkg.version === 'string') {
        cached = pkg.version;
        return cached;
      }
    }
    if (dirname(dir) === dir) throw new ShoalError('INTERNAL', "Shoal's package.json was not found above its code: reinstall Shoal");
  }
}

/** How long asking git for the commit may take before the commit counts as unknown. */
const GIT_TIMEOUT_MS = 2000;

/**
 * The commit of the checkout this code runs from, or null: no git, not a checkout (an npm install),
 * or a checkout of something else that holds Shoal (a project with Shoal in its node_modules).
 * Asked once per process (a node reports it in diagnostics and telemetry).
 */
export function shoalCommit(): string | null {
  if (cachedCommit !== undefined) return cachedCommit;
  cachedCommit = readCommit();
  return cachedCommit;
}

let cachedCommit: string | null | undefined;

function readCommit(): string | null {
  try {
    const [top, commit] = execFileSync('git', ['rev-parse', '--show-toplevel', '--short=12', 'HEAD'], {
      cwd: dirname(fileURLToPath(import.meta.url)),
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: GIT_TIMEOUT_MS,
    })
      .trim()
      .split('\n');
    const pkg = JSON.parse(readFileSync(join(top!, 'package.json'), 'utf8')) as { name?: string };
    return pkg.name === 'shoal' && commit !== undefined && /^[0-9a-f]+$/.test(commit) ? commit : null;
  } catch {
    return null;
  }
}
