import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { shoalVersion } from '../common/version.js';

/** How long `shoal --version` waits for git before printing the version without a commit. */
const GIT_TIMEOUT_MS = 2000;

/**
 * The commit of the checkout this code runs from, or null: no git, not a checkout (an npm install),
 * or a checkout of something else that holds Shoal (a project with Shoal in its node_modules).
 */
export function shoalCommit(): string | null {
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

/** `shoal 0.1.0 (commit 0123456789ab)`, the commit left out where it is not known. */
export function versionText(): string {
  const commit = shoalCommit();
  return `shoal ${shoalVersion()}${commit === null ? '' : ` (commit ${commit})`}`;
}
