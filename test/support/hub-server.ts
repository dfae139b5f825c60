// A local Hugging Face hub for tests: the routes @huggingface/hub@2.17.5 uses to find and download
// model files, for the repos it is given, on loopback only. Knobs make transfers slow, cut them,
// corrupt them, and count what was served, so tests can prove resumes and verification.
//
// Routes: GET /api/models?search=&author=&filter=&sort=&limit=, GET /api/models/{repo}[/revision/{rev}],
// GET /api/models/{repo}/tree/{rev}[/{path}]?recursive=, POST /api/models/{repo}/paths-info/{rev},
// GET|HEAD /{repo}/resolve/{rev}/{path} (Range, ETag = SHA-256 for LFS files, X-Repo-Commit).

import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel } from '../../src/models/generate/random-model.js';

export interface HubServerFile {
  /** Path inside the repo (`/`-separated). */
  path: string;
  /** Content, or... */
  bytes?: Uint8Array;
  /** ...a file on disk to serve. */
  filePath?: string;
  /** Stored with Git LFS (default true): listings carry `lfs: { oid: sha256, size }`, ETag is the SHA-256. */
  lfs?: boolean;
}

export interface HubServerRepo {
  repo: string;
  /** The commit (40 hex); default: random. */
  revision?: string;
  files: HubServerFile[];
  /** Branch pointed at this commit (default `main`). */
  branch?: string;
  downloads?: number;
  likes?: number;
  /** Extra tags; `gguf` is added when the repo has a .gguf file. */
  tags?: string[];
}

export interface ServedFile {
  path: string;
  size: number;
  sha256: string;
  /** Git blob id: of the LFS pointer for LFS files, of the content otherwise. */
  gitOid: string;
  lfs: boolean;
  bytes?: Uint8Array;
  filePath?: string;
}

export interface HubRequestRecord {
  method: string;
  url: string;
  route: 'list' | 'info' | 'tree' | 'paths-info' | 'resolve' | 'unknown';
  repo?: string;
  revision?: string;
  path?: string;
  range?: string;
  status: number;
  /** Body bytes written to the socket. */
  bodyBytes: number;
  /** The response ended early (client gone, or cut by failAfter). */
  cut: boolean;
}

interface RepoState {
  repo: string;
  commits: Map<string, Map<string, ServedFile>>;
  branches: Map<string, string>;
  downloads: number;
  likes: number;
  tags: string[];
  lastModified: Date;
  createdAt: Date;
  id: string;
}

const SHA1_RE = /^[0-9a-f]{40}$/;

function gitBlobOid(content: Uint8Array | string, size: number): string {
  return createHash('sha1').update(`blob ${size}\0`).update(content).digest('hex');
}

async function hashSource(file: HubServerFile): Promise<{ size: number; sha256: string; contentOid: string }> {
  if (file.bytes) {
    return {
      size: file.bytes.length,
      sha256: createHash('sha256').update(file.bytes).digest('hex'),
      contentOid: gitBlobOid(file.bytes, file.bytes.length),
    };
  }
  if (!file.filePath) throw new Error(`hub-server: file ${file.path} has neither bytes nor filePath`);
  const size = (await stat(file.filePath)).size;
  const sha = createHash('sha256');
  const sha1 = createHash('sha1').update(`blob ${size}\0`);
  for await (const chunk of createReadStream(file.filePath)) {
    sha.update(chunk as Buffer);
    sha1.update(chunk as Buffer);
  }
  return { size, sha256: sha.digest('hex'), contentOid: sha1.digest('hex') };
}

function lfsPointer(sha256: string, size: number): string {
  return `version https://git-lfs.github.com/spec/v1\noid sha256:${sha256}\nsize ${size}\n`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export class HubServer {
  /** Every request answered, in order. */
  readonly requests: HubRequestRecord[] = [];
  private readonly repos = new Map<string, RepoState>();
  private throttleBytesPerSec: number | null = null;
  private readonly failures = new Map<string, { afterBytes: number; times: number }>();
  private readonly corrupted = new Set<string>();
  private readonly servedBytes = new Map<string, number>();
  private activeTransfers = 0;
  /** Most resolve GETs with a body in flight at once since the last resetCounters(). */
  peakConcurrentTransfers = 0;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(repos: HubServerRepo[] = []): Promise<HubServer> {
    const box: { self?: HubServer } = {};
    const server = createServer((req, res) => {
      (box.self as HubServer).handle(req, res).catch((error: unknown) => {
        if (!res.headersSent) {
          res.writeHead(500, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify({ error: String(error) }));
        } else {
          res.destroy();
        }
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    const self = new HubServer(server, `http://127.0.0.1:${port}`);
    box.self = self;
    for (const repo of repos) await self.addRepo(repo);
    return self;
  }

  /** Adds a commit to a repo (creating the repo) and points its branch at it; returns the commit. */
  async addRepo(spec: HubServerRepo): Promise<string> {
    const revision = spec.revision ?? randomBytes(20).toString('hex');
    if (!SHA1_RE.test(revision)) throw new Error(`hub-server: revision must be 40 lowercase hex, got ${revision}`);
    const files = new Map<string, ServedFile>();
    for (const f of spec.files) {
      const { size, sha256, contentOid } = await hashSource(f);
      const lfs = f.lfs ?? true;
      const pointer = lfsPointer(sha256, size);
      files.set(f.path, {
        path: f.path,
        size,
        sha256,
        gitOid: lfs ? gitBlobOid(pointer, Buffer.byteLength(pointer)) : contentOid,
        lfs,
        ...(f.bytes ? { bytes: f.bytes } : {}),
        ...(f.filePath ? { filePath: f.filePath } : {}),
      });
    }
    let state = this.repos.get(spec.repo);
    const now = new Date();
    if (!state) {
      state = {
        repo: spec.repo,
        commits: new Map(),
        branches: new Map(),
        downloads: spec.downloads ?? 0,
        likes: spec.likes ?? 0,
        tags: [],
        lastModified: now,
        createdAt: now,
        id: randomBytes(12).toString('hex'),
      };
      this.repos.set(spec.repo, state);
    }
    if (spec.downloads !== undefined) state.downloads = spec.downloads;
    if (spec.likes !== undefined) state.likes = spec.likes;
    state.commits.set(revision, files);
    state.branches.set(spec.branch ?? 'main', revision);
    state.lastModified = now;
    const hasGguf = [...files.keys()].some((p) => p.toLowerCase().endsWith('.gguf'));
    state.tags = [...new Set([...(spec.tags ?? []), ...(hasGguf ? ['gguf'] : [])])];
    return revision;
  }

  /** The served metadata of a file at a revision (default: the branch `main`). */
  file(repo: string, path: string, revision = 'main'): ServedFile {
    const state = this.repos.get(repo);
    const sha = state ? this.resolveRev(state, revision) : undefined;
    const file = sha ? state?.commits.get(sha)?.get(path) : undefined;
    if (!file) throw new Error(`hub-server: no ${repo}@${revision}:${path}`);
    return file;
  }

  /** The commit a branch points at. */
  head(repo: string, branch = 'main'): string {
    const sha = this.repos.get(repo)?.branches.get(branch);
    if (!sha) throw new Error(`hub-server: no ${repo}@${branch}`);
    return sha;
  }

  /** Paces every file body to this rate (null: as fast as possible). */
  throttle(bytesPerSecond: number | null): void {
    this.throttleBytesPerSec = bytesPerSecond;
  }

  /** The next `times` GETs of `path` (any repo) cut the connection after `afterBytes` body bytes. */
  failAfter(path: string, afterBytes: number, times = 1): void {
    this.failures.set(path, { afterBytes, times });
  }

  /** Serves `path` (any repo) with one byte flipped in the middle, same size, same advertised hash. */
  corrupt(path: string, on = true): void {
    if (on) this.corrupted.add(path);
    else this.corrupted.delete(path);
  }

  /** Body bytes served for `path` (all repos) by resolve GETs since the last resetCounters(). */
  served(path: string): number {
    return this.servedBytes.get(path) ?? 0;
  }

  /** Resolve GETs of `path` since the last reset, excluding the client's 1-byte `bytes=0-0` probes. */
  transfers(path: string): HubRequestRecord[] {
    return this.requests.filter((r) => r.route === 'resolve' && r.method === 'GET' && r.path === path && r.range !== 'bytes=0-0');
  }

  resetCounters(): void {
    this.requests.length = 0;
    this.servedBytes.clear();
    this.peakConcurrentTransfers = 0;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private resolveRev(state: RepoState, rev: string): string | undefined {
    if (rev === 'HEAD') return state.branches.get('main');
    if (state.branches.has(rev)) return state.branches.get(rev);
    if (SHA1_RE.test(rev) && state.commits.has(rev)) return rev;
    return undefined;
  }

  private record(rec: Omit<HubRequestRecord, 'bodyBytes' | 'cut'> & Partial<HubRequestRecord>): HubRequestRecord {
    const full: HubRequestRecord = { bodyBytes: 0, cut: false, ...rec };
    this.requests.push(full);
    return full;
  }

  private sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(text), ...headers });
    res.end(text);
  }

  private notFound(res: ServerResponse, code: 'RepoNotFound' | 'RevisionNotFound' | 'EntryNotFound', message: string): void {
    this.sendJson(res, 404, { error: message }, { 'X-Error-Code': code });
  }

  private modelJson(state: RepoState, sha: string): Record<string, unknown> {
    const files = state.commits.get(sha) as Map<string, ServedFile>;
    return {
      _id: state.id,
      id: state.repo,
      modelId: state.repo,
      author: state.repo.split('/')[0],
      sha,
      private: false,
      gated: false,
      disabled: false,
      downloads: state.downloads,
      likes: state.likes,
      lastModified: state.lastModified.toISOString(),
      createdAt: state.createdAt.toISOString(),
      tags: state.tags,
      pipeline_tag: 'text-generation',
      library_name: state.tags.includes('gguf') ? 'gguf' : undefined,
      siblings: [...files.keys()].sort().map((rfilename) => ({ rfilename })),
    };
  }

  private treeEntry(file: ServedFile): Record<string, unknown> {
    return {
      type: 'file',
      oid: file.gitOid,
      size: file.size,
      path: file.path,
      ...(file.lfs ? { lfs: { oid: file.sha256, size: file.size, pointerSize: Buffer.byteLength(lfsPointer(file.sha256, file.size)) } } : {}),
    };
  }

  private dirEntry(path: string): Record<string, unknown> {
    return { type: 'directory', oid: createHash('sha1').update(`tree:${path}`).digest('hex'), size: 0, path };
  }

  private async readBody(req: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const url = new URL(req.url ?? '/', this.url);
    const raw = url.pathname.split('/').filter((s) => s !== '');
    const seg = raw.map((s) => decodeURIComponent(s));
    const base = { method, url: url.pathname + url.search };

    if (seg[0] === 'api' && seg[1] === 'models') {
      if (seg.length === 2 && method === 'GET') return this.list(url, res, base);
      const repo = `${seg[2]}/${seg[3]}`;
      const state = this.repos.get(repo);
      const sub = seg[4];
      if (seg.length >= 4 && (sub === undefined || sub === 'revision') && method === 'GET') {
        const rev = sub === 'revision' ? (seg[5] ?? 'main') : 'main';
        const rec = this.record({ ...base, route: 'info', repo, revision: rev, status: 200 });
        if (!state) return void ((rec.status = 404), this.notFound(res, 'RepoNotFound', 'Repository not found'));
        const sha = this.resolveRev(state, rev);
        if (!sha) return void ((rec.status = 404), this.notFound(res, 'RevisionNotFound', 'Invalid rev id: ' + rev));
        return this.sendJson(res, 200, this.modelJson(state, sha));
      }
      if (sub === 'tree' && method === 'GET' && seg[5] !== undefined) {
        const rev = seg[5];
        const prefix = seg.slice(6).join('/');
        const rec = this.record({ ...base, route: 'tree', repo, revision: rev, path: prefix, status: 200 });
        if (!state) return void ((rec.status = 404), this.notFound(res, 'RepoNotFound', 'Repository not found'));
        const sha = this.resolveRev(state, rev);
        if (!sha) return void ((rec.status = 404), this.notFound(res, 'RevisionNotFound', 'Invalid rev id: ' + rev));
        const recursive = url.searchParams.get('recursive') === 'true';
        const entries = this.listTree(state.commits.get(sha) as Map<string, ServedFile>, prefix, recursive);
        if (entries === null) return void ((rec.status = 404), this.notFound(res, 'EntryNotFound', `${prefix} does not exist on "${rev}"`));
        return this.sendJson(res, 200, entries);
      }
      if (sub === 'paths-info' && method === 'POST' && seg[5] !== undefined) {
        const rev = seg[5];
        const rec = this.record({ ...base, route: 'paths-info', repo, revision: rev, status: 200 });
        const text = await this.readBody(req);
        if (!state) return void ((rec.status = 404), this.notFound(res, 'RepoNotFound', 'Repository not found'));
        const sha = this.resolveRev(state, rev);
        if (!sha) return void ((rec.status = 404), this.notFound(res, 'RevisionNotFound', 'Invalid rev id: ' + rev));
        let paths: unknown;
        try {
          const type = req.headers['content-type'] ?? '';
          paths = type.includes('json') ? (JSON.parse(text) as { paths?: unknown }).paths : new URLSearchParams(text).getAll('paths');
        } catch {
          rec.status = 400;
          return this.sendJson(res, 400, { error: 'invalid body' });
        }
        if (!Array.isArray(paths)) return void ((rec.status = 400), this.sendJson(res, 400, { error: 'paths must be an array' }));
        const files = state.commits.get(sha) as Map<string, ServedFile>;
        const out: Record<string, unknown>[] = [];
        for (const p of paths) {
          if (typeof p !== 'string') continue;
          const file = files.get(p);
          if (file) out.push(this.treeEntry(file));
          else if ([...files.keys()].some((k) => k.startsWith(`${p}/`))) out.push(this.dirEntry(p));
        }
        return this.sendJson(res, 200, out);
      }
      this.record({ ...base, route: 'unknown', status: 404 });
      return this.sendJson(res, 404, { error: 'Not Found' });
    }

    if (seg.length >= 5 && seg[2] === 'resolve' && (method === 'GET' || method === 'HEAD')) {
      return this.resolve(req, res, base, `${seg[0]}/${seg[1]}`, seg[3] as string, seg.slice(4).join('/'));
    }
    this.record({ ...base, route: 'unknown', status: 404 });
    this.sendJson(res, 404, { error: 'Not Found' });
  }

  private list(url: URL, res: ServerResponse, base: { method: string; url: string }): void {
    this.record({ ...base, route: 'list', status: 200 });
    const q = (url.searchParams.get('search') ?? '').toLowerCase();
    const author = url.searchParams.get('author');
    const filters = url.searchParams.getAll('filter');
    const limit = Number(url.searchParams.get('limit') ?? '1000');
    let states = [...this.repos.values()].filter(
      (s) =>
        s.repo.toLowerCase().includes(q) &&
        (author === null || s.repo.split('/')[0] === author) &&
        filters.every((f) => s.tags.includes(f)),
    );
    if (url.searchParams.get('sort') === 'downloads') states = states.sort((a, b) => b.downloads - a.downloads);
    const items = states.slice(0, Number.isFinite(limit) && limit > 0 ? limit : 1000).map((s) => this.modelJson(s, s.branches.get('main') ?? [...s.commits.keys()].pop() as string));
    this.sendJson(res, 200, items);
  }

  private listTree(files: Map<string, ServedFile>, prefix: string, recursive: boolean): Record<string, unknown>[] | null {
    const under = prefix === '' ? '' : `${prefix}/`;
    if (prefix !== '' && !files.has(prefix) && ![...files.keys()].some((k) => k.startsWith(under))) return null;
    if (files.has(prefix)) return [this.treeEntry(files.get(prefix) as ServedFile)];
    const dirs = new Set<string>();
    const out: Record<string, unknown>[] = [];
    for (const [path, file] of [...files].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (!path.startsWith(under)) continue;
      const rest = path.slice(under.length).split('/');
      for (let i = 1; i < rest.length; i += 1) {
        if (!recursive && i > 1) break;
        dirs.add(under + rest.slice(0, i).join('/'));
      }
      if (recursive || rest.length === 1) out.push(this.treeEntry(file));
    }
    return [...[...dirs].sort().map((d) => this.dirEntry(d)), ...out];
  }

  private async resolve(req: IncomingMessage, res: ServerResponse, base: { method: string; url: string }, repo: string, rev: string, path: string): Promise<void> {
    const range = typeof req.headers.range === 'string' ? req.headers.range : undefined;
    const rec = this.record({ ...base, route: 'resolve', repo, revision: rev, path, status: 200, ...(range ? { range } : {}) });
    const state = this.repos.get(repo);
    if (!state) return void ((rec.status = 404), this.notFound(res, 'RepoNotFound', 'Repository not found'));
    const sha = this.resolveRev(state, rev);
    if (!sha) return void ((rec.status = 404), this.notFound(res, 'RevisionNotFound', 'Invalid rev id: ' + rev));
    const file = state.commits.get(sha)?.get(path);
    if (!file) return void ((rec.status = 404), this.notFound(res, 'EntryNotFound', `${path} does not exist on "${rev}"`));

    let start = 0;
    let end = file.size - 1;
    let partial = false;
    if (range) {
      const m = /^bytes=(\d*)-(\d*)$/.exec(range.split(',')[0]?.trim() ?? '');
      if (m && (m[1] !== '' || m[2] !== '')) {
        if (m[1] === '') {
          start = Math.max(0, file.size - Number(m[2]));
        } else {
          start = Number(m[1]);
          if (m[2] !== '') end = Math.min(end, Number(m[2]));
        }
        if (start >= file.size || start > end) {
          rec.status = 416;
          res.writeHead(416, { 'Content-Range': `bytes */${file.size}` });
          return void res.end();
        }
        partial = true;
      }
    }
    const length = file.size === 0 ? 0 : end - start + 1;
    const headers: Record<string, string | number> = {
      'Content-Type': 'application/octet-stream',
      'Content-Length': length,
      'Accept-Ranges': 'bytes',
      ETag: `"${file.lfs ? file.sha256 : file.gitOid}"`,
      'X-Repo-Commit': sha,
      'Content-Disposition': `inline; filename="${path.slice(path.lastIndexOf('/') + 1)}"`,
    };
    if (partial) headers['Content-Range'] = `bytes ${start}-${end}/${file.size}`;
    rec.status = partial ? 206 : 200;
    res.writeHead(rec.status, headers);
    if (req.method === 'HEAD' || length === 0) return void res.end();

    const failure = this.failures.get(path);
    let cutAt: number | null = null;
    if (failure && !(partial && start === 0 && end === 0)) {
      cutAt = failure.afterBytes;
      failure.times -= 1;
      if (failure.times <= 0) this.failures.delete(path);
    }
    const corruptAt = this.corrupted.has(path) ? Math.floor(file.size / 2) : -1;
    let transferring = !(partial && start === 0 && end === 0);
    if (transferring) {
      this.activeTransfers += 1;
      this.peakConcurrentTransfers = Math.max(this.peakConcurrentTransfers, this.activeTransfers);
    }
    // Ends the transfer's count in the same tick as its last write: the client cannot start its next
    // request before it has read that byte, so the peak never counts a finished transfer.
    const endTransfer = (): void => {
      if (transferring) this.activeTransfers -= 1;
      transferring = false;
    };
    let closed = false;
    res.on('close', () => (closed = true));
    try {
      let offset = start;
      for await (const chunk of this.chunks(file, start, end)) {
        if (closed) break;
        let piece = chunk;
        if (corruptAt >= offset && corruptAt < offset + piece.length) {
          piece = Buffer.from(piece);
          piece[corruptAt - offset] = (piece[corruptAt - offset] as number) ^ 0xff;
        }
        if (cutAt !== null && rec.bodyBytes + piece.length >= cutAt) piece = piece.subarray(0, cutAt - rec.bodyBytes);
        const last = offset + chunk.length > end;
        if (piece.length > 0) {
          const ok = res.write(piece);
          rec.bodyBytes += piece.length;
          this.servedBytes.set(path, (this.servedBytes.get(path) ?? 0) + piece.length);
          if (last) endTransfer();
          if (!ok && !closed) {
            // Both listeners go once either fires, so a long body does not pile up close listeners.
            await new Promise<void>((r) => {
              const done = (): void => {
                res.off('drain', done);
                res.off('close', done);
                r();
              };
              res.once('drain', done);
              res.once('close', done);
            });
          }
        }
        offset += chunk.length;
        if (cutAt !== null && rec.bodyBytes >= cutAt) {
          rec.cut = true;
          // Let the bytes already written reach the client, then drop the connection mid-body.
          await new Promise<void>((r) => setTimeout(r, 20));
          res.destroy();
          return;
        }
        if (this.throttleBytesPerSec && !last) await sleep((piece.length / this.throttleBytesPerSec) * 1000);
      }
      if (closed) rec.cut = true;
      res.end();
    } finally {
      endTransfer();
    }
  }

  private async *chunks(file: ServedFile, start: number, end: number): AsyncGenerator<Buffer> {
    const size = this.throttleBytesPerSec ? Math.max(1024, Math.min(64 * 1024, Math.floor(this.throttleBytesPerSec / 20))) : 64 * 1024;
    if (file.bytes) {
      for (let at = start; at <= end; at += size) yield Buffer.from(file.bytes.buffer, file.bytes.byteOffset + at, Math.min(size, end + 1 - at));
      return;
    }
    for await (const chunk of createReadStream(file.filePath as string, { start, end, highWaterMark: size })) yield chunk as Buffer;
  }
}

/**
 * Writes a small real GGUF (the tiny built-in model's shape, random weights) for a hub repo: `seed`
 * makes its bytes differ, `vocabSize` its size (1024: ~0.8 MB, 3072: ~1.8 MB). Returns `path`.
 */
export async function ggufFixture(path: string, opts: { seed: number; vocabSize?: number; name?: string }): Promise<string> {
  await generateRandomModel({ ...TINY_MODEL_SPEC, name: opts.name ?? `fixture-${opts.seed}`, seed: opts.seed, vocabSize: opts.vocabSize ?? TINY_MODEL_SPEC.vocabSize }, path);
  return path;
}
