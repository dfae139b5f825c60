// Finding GGUF models on a Hugging Face hub with the real @huggingface/hub client, pointed at a
// configurable endpoint (SHOAL_HF_ENDPOINT, then HF_ENDPOINT, default https://huggingface.co).

import { listFiles, listModels, modelInfo, pathsInfo } from '@huggingface/hub';
import { ModelsError } from './errors.js';
import { checkRepoId, hubError, resolveHubOptions, type HubOptions, type ResolvedHubOptions } from './endpoint.js';
import { chooseDefaultQuant, groupGgufFiles, isModelFile, parseGgufName, searchTermForFilename, type GgufGroup, type HubFile } from './gguf-files.js';

/** Results a search returns at most by default, and the most it may be asked for. */
export const DEFAULT_SEARCH_LIMIT = 20;
export const MAX_SEARCH_LIMIT = 100;
/** Hub requests a search runs at once to size the files of its results. */
export const SEARCH_DETAIL_CONCURRENCY = 4;

const SHA1_RE = /^[0-9a-f]{40}$/;
const SHA256_RE = /^[0-9a-f]{64}$/;

export interface ResolvedRepo {
  repo: string;
  /** What was asked for (`main` by default; a branch, tag or commit). */
  requestedRevision: string;
  /** The commit it pointed to: every download of this result is pinned to it. */
  revision: string;
  /** Every model file of the repo at that commit (GGUF, whisper.cpp ggml), with size and SHA-256. */
  files: HubFile[];
  groups: GgufGroup[];
  /** Name of the group chooseDefaultQuant picks; null when the repo has no usable GGUF. */
  defaultGroup: string | null;
}

export interface HubSearchResult {
  repo: string;
  /** The commit the listed files are at (null when the hub did not say; then they are at `main`). */
  revision: string | null;
  downloads: number;
  likes: number;
  updatedAt: string;
  files: HubFile[];
  groups: GgufGroup[];
  defaultGroup: string | null;
  /** When the query was a file name: the path of that file in this repo, if it has it. */
  matchedFile: string | null;
}

/** What a user may paste: `owner/name`, `owner/name:Q4_K_M`, `hf.co/owner/name`, a hub URL (with /blob/<rev>/<file>), `owner/name/file.gguf` (or `ggml-base.bin`). */
export interface HubReference {
  repo: string;
  revision?: string;
  file?: string;
  quant?: string;
}

/** Parses a repo reference; null when `text` is not one (a free-text query, a bare file name). */
export function parseHubReference(text: string): HubReference | null {
  let s = text.trim();
  if (s === '' || /\s/.test(s)) return null;
  s = s.replace(/^https?:\/\/[^/]+\//i, '').replace(/^(hf\.co|huggingface\.co)\//i, '').replace(/[?#].*$/, '');
  let quant: string | undefined;
  const colon = s.lastIndexOf(':');
  if (colon > 0) {
    quant = s.slice(colon + 1);
    s = s.slice(0, colon);
    if (quant === '' || quant === 'latest') quant = undefined;
  }
  const parts = s.split('/').filter((p) => p !== '');
  if (parts.length < 2) return null;
  const repo = `${parts[0]}/${parts[1]}`;
  try {
    checkRepoId(repo);
  } catch {
    return null;
  }
  const rest = parts.slice(2);
  const ref: HubReference = { repo };
  if (quant !== undefined) ref.quant = quant;
  if ((rest[0] === 'blob' || rest[0] === 'resolve' || rest[0] === 'tree') && rest.length >= 2) {
    ref.revision = decodeURIComponent(rest[1] as string);
    if (rest.length > 2) ref.file = rest.slice(2).map((p) => decodeURIComponent(p)).join('/');
  } else if (rest.length > 0) {
    ref.file = rest.map((p) => decodeURIComponent(p)).join('/');
  }
  if (ref.file !== undefined && !isModelFile(ref.file)) delete ref.file;
  return ref;
}

function toHubFile(entry: { path: string; size: number; oid?: string; lfs?: { oid: string; size: number } }): HubFile {
  const sha256 = entry.lfs && SHA256_RE.test(entry.lfs.oid) ? entry.lfs.oid : null;
  const gitOid = entry.oid !== undefined && SHA1_RE.test(entry.oid) ? entry.oid : null;
  return { path: entry.path, size: entry.lfs ? entry.lfs.size : entry.size, sha256, gitOid };
}

/**
 * Pins a repo to a commit and lists its model files (GGUF, whisper.cpp's `ggml-*.bin`) with sizes and SHA-256 (GET /api/models/{repo}/revision/{rev},
 * then GET /api/models/{repo}/tree/{commit}?recursive=true).
 */
export async function resolveRepo(repo: string, opts: HubOptions & { revision?: string } = {}): Promise<ResolvedRepo> {
  checkRepoId(repo);
  const hub = resolveHubOptions(opts);
  const requestedRevision = opts.revision ?? 'main';
  const sha = await pinRevision(hub, repo, requestedRevision);
  const files: HubFile[] = [];
  try {
    for await (const entry of listFiles({ repo, revision: sha, recursive: true, hubUrl: hub.endpoint, fetch: hub.fetch, accessToken: hub.accessToken })) {
      if (entry.type === 'file' && isModelFile(entry.path)) files.push(toHubFile(entry));
    }
  } catch (error) {
    throw hubError(error, hub, `the files of ${repo}@${sha}`, 'REVISION_NOT_FOUND');
  }
  files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const groups = groupGgufFiles(files);
  return { repo, requestedRevision, revision: sha, files, groups, defaultGroup: chooseDefaultQuant(groups)?.name ?? null };
}

async function pinRevision(hub: ResolvedHubOptions, repo: string, revision: string): Promise<string> {
  let info: { sha?: string };
  try {
    info = await modelInfo({ name: repo, revision, additionalFields: ['sha'], hubUrl: hub.endpoint, fetch: hub.fetch, accessToken: hub.accessToken });
  } catch (error) {
    throw hubError(error, hub, revision === 'main' ? `repo ${repo}` : `revision ${revision} of ${repo}`, revision === 'main' ? 'REPO_NOT_FOUND' : 'REVISION_NOT_FOUND');
  }
  const sha = info.sha;
  if (typeof sha !== 'string' || !SHA1_RE.test(sha)) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${hub.endpoint} did not give the commit of ${repo}@${revision} (sha: ${JSON.stringify(sha)})`);
  }
  if (SHA1_RE.test(revision) && sha !== revision) {
    throw new ModelsError('HUB_BAD_RESPONSE', `${hub.endpoint} answered commit ${sha} when asked for ${repo}@${revision}`);
  }
  return sha;
}

/** Size and hash of named files at a revision (POST /api/models/{repo}/paths-info/{rev}); paths that do not exist are left out. */
export async function resolveFiles(repo: string, paths: readonly string[], opts: HubOptions & { revision?: string } = {}): Promise<HubFile[]> {
  checkRepoId(repo);
  const hub = resolveHubOptions(opts);
  if (paths.length === 0) return [];
  const revision = opts.revision ?? 'main';
  try {
    const infos = await pathsInfo({ repo, paths: [...paths], revision, hubUrl: hub.endpoint, fetch: hub.fetch, accessToken: hub.accessToken });
    return infos.filter((i) => i.type === 'file').map((i) => toHubFile(i));
  } catch (error) {
    throw hubError(error, hub, `files of ${repo}@${revision}`, 'REVISION_NOT_FOUND');
  }
}

async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/**
 * Searches the hub for repos with GGUF files (GET /api/models?search=<term>&filter=gguf), then sizes
 * each hit's GGUF files (paths-info). The query may be free text, a repo reference, or a pasted GGUF
 * file name: a file name is searched by its stem without quant and shard suffix, retrying with fewer
 * words when that finds nothing, and repos holding that exact file come first.
 */
export async function search(query: string, opts: HubOptions & { limit?: number } = {}): Promise<HubSearchResult[]> {
  const text = query.trim();
  if (text === '') throw new ModelsError('INVALID_NAME', 'search for what? give a model name, a repo (owner/name) or a GGUF file name');
  if (text.length > 500) throw new ModelsError('INVALID_NAME', 'the search query is longer than 500 characters');
  const limit = Math.min(Math.max(1, Math.floor(opts.limit ?? DEFAULT_SEARCH_LIMIT)), MAX_SEARCH_LIMIT);
  const hub = resolveHubOptions(opts);
  const ref = parseHubReference(text);
  const fileName = ref?.file ?? (parseGgufName(text) && !text.includes('/') ? text : undefined);
  const results: HubSearchResult[] = [];
  const seen = new Set<string>();

  if (ref) {
    try {
      const resolved = await resolveRepo(ref.repo, { ...opts, revision: ref.revision });
      if (resolved.files.length > 0) {
        seen.add(resolved.repo);
        results.push({
          repo: resolved.repo,
          revision: resolved.revision,
          downloads: 0,
          likes: 0,
          updatedAt: '',
          files: resolved.files,
          groups: resolved.groups,
          defaultGroup: resolved.defaultGroup,
          matchedFile: fileName ? matchFile(resolved.files, fileName) : null,
        });
      }
    } catch (error) {
      if (!(error instanceof ModelsError) || error.code !== 'NOT_FOUND') throw error;
    }
  }

  const base = fileName ? searchTermForFilename(fileName) : ref ? (ref.repo.split('/')[1] as string) : text;
  const terms = [base];
  if (fileName) {
    const words = base.split(/[-_.]/).filter((w) => w !== '');
    for (let n = words.length - 1; n >= 2 && terms.length < 3; n -= 1) terms.push(words.slice(0, n).join('-'));
  }
  type Entry = { name: string; sha?: string; filePaths?: string[]; downloads: number; likes: number; updatedAt: Date };
  let entries: Entry[] = [];
  for (const term of terms) {
    try {
      entries = [];
      for await (const model of listModels({
        search: { query: term, tags: ['gguf'] },
        additionalFields: ['filePaths', 'sha'],
        sort: 'downloads',
        limit,
        hubUrl: hub.endpoint,
        fetch: hub.fetch,
        accessToken: hub.accessToken,
      })) {
        entries.push(model as Entry);
      }
    } catch (error) {
      throw hubError(error, hub, `a search for "${term}"`);
    }
    if (entries.length > 0) break;
  }

  const fresh = entries.filter((e) => !seen.has(e.name) && (e.filePaths ?? []).some((p) => parseGgufName(p)));
  const detailed = await mapBounded(fresh, SEARCH_DETAIL_CONCURRENCY, async (entry): Promise<HubSearchResult | null> => {
    const ggufPaths = (entry.filePaths ?? []).filter((p) => parseGgufName(p));
    const revision = typeof entry.sha === 'string' && SHA1_RE.test(entry.sha) ? entry.sha : null;
    let files: HubFile[];
    try {
      files = await resolveFiles(entry.name, ggufPaths, { ...opts, revision: revision ?? 'main' });
    } catch (error) {
      if (error instanceof ModelsError && (error.code === 'NOT_FOUND' || error.reason === 'HUB_AUTH_REQUIRED')) return null;
      throw error;
    }
    if (files.length === 0) return null;
    files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const groups = groupGgufFiles(files);
    return {
      repo: entry.name,
      revision,
      downloads: entry.downloads ?? 0,
      likes: entry.likes ?? 0,
      updatedAt: entry.updatedAt instanceof Date && !Number.isNaN(entry.updatedAt.getTime()) ? entry.updatedAt.toISOString() : '',
      files,
      groups,
      defaultGroup: chooseDefaultQuant(groups)?.name ?? null,
      matchedFile: fileName ? matchFile(files, fileName) : null,
    };
  });
  for (const r of detailed) if (r) results.push(r);
  // Repos holding the pasted file first; otherwise the hub's order (most downloaded first).
  const ranked = results.map((r, i) => ({ r, i })).sort((a, b) => Number(b.r.matchedFile !== null) - Number(a.r.matchedFile !== null) || a.i - b.i);
  return ranked.map((x) => x.r).slice(0, limit);
}

function matchFile(files: readonly HubFile[], fileName: string): string | null {
  const want = fileName.slice(fileName.lastIndexOf('/') + 1).toLowerCase();
  return files.find((f) => f.path.toLowerCase() === fileName.toLowerCase())?.path ?? files.find((f) => f.path.slice(f.path.lastIndexOf('/') + 1).toLowerCase() === want)?.path ?? null;
}
