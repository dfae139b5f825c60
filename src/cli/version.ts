import { shoalCommit, shoalVersion } from '../common/version.js';

/** `shoal 0.1.0 (commit 0123456789ab)`, the commit left out where it is not known. */
export function versionText(): string {
  const commit = shoalCommit();
  return `shoal ${shoalVersion()}${commit === null ? '' : ` (commit ${commit})`}`;
}
