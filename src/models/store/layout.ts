// Where hub models live on disk: <dataDir>/models/hub/<owner>/<name>/<revision>/<file path>, with
// `<file>.part` beside a file while it downloads and index.json at the top.

import { join } from 'node:path';
import { modelsDir } from '../../common/paths.js';
import { checkRepoId } from '../hub/endpoint.js';
import { ModelsError } from '../hub/errors.js';

export const PART_SUFFIX = '.part';
export const INDEX_FILE = 'index.json';

export function hubStoreRoot(dataDir: string): string {
  return join(modelsDir(dataDir), 'hub');
}

const REVISION_RE = /^[0-9a-f]{40}$/;

export function checkRevision(revision: string): string {
  if (!REVISION_RE.test(revision)) {
    throw new ModelsError('INVALID_NAME', `revision "${revision}" is not a commit id (40 hex digits): resolve the repo first to pin it`);
  }
  return revision;
}

/** Checks a repo file path from the hub before it becomes a path on disk (no `..`, no absolute, no odd characters). */
export function checkFilePath(path: string): string {
  const segments = path.split('/');
  const bad =
    path.length === 0 ||
    path.length > 1000 ||
    path.includes('\\') ||
    [...path].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f) ||
    segments.some((s) => s === '' || s === '.' || s === '..' || s.length > 255) ||
    path.endsWith(PART_SUFFIX);
  if (bad) throw new ModelsError('INVALID_NAME', `refusing the hub file path ${JSON.stringify(path)}: it is not a plain relative path`);
  return path;
}

export function revisionDir(root: string, repo: string, revision: string): string {
  const [owner, name] = checkRepoId(repo).split('/') as [string, string];
  return join(root, owner, name, checkRevision(revision));
}

export function repoDir(root: string, repo: string): string {
  const [owner, name] = checkRepoId(repo).split('/') as [string, string];
  return join(root, owner, name);
}

export function filePathFor(root: string, repo: string, revision: string, path: string): string {
  return join(revisionDir(root, repo, revision), ...checkFilePath(path).split('/'));
}

export function partPathFor(finalPath: string): string {
  return finalPath + PART_SUFFIX;
}
