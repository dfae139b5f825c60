import { createReadStream, readdirSync, realpathSync, statSync, type Stats } from 'node:fs';
import { extname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ShoalError } from '../common/errors.js';
import { sendOpenAIError } from '../api/openai/routes.js';

/**
 * The dashboard's built files (`npm run build` puts Vite's output in `<repo>/dashboard/dist`), served
 * without a static-file plugin: `/` is `index.html`, `/assets/*` the content-hashed bundles, and the
 * few other files at the top of the build (icons) by exact name. The app routes with `#`, so no other
 * path is ever needed, and every API 404 stays what it was.
 */

/**
 * Everything the page loads comes from this node: scripts, styles, fonts, images (`data:` too, for
 * inline icons), and every fetch, EventSource and WebSocket. No inline script or style element, no
 * eval, no framing. (React's `style` props set CSSOM properties, which style-src does not govern.)
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** Top-level files of the build served besides index.html (favicons and the like); more are ignored. */
export const MAX_ROOT_FILES = 64;
const MAX_SEGMENTS = 16;
const MAX_SEGMENT_CHARS = 255;

export const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.webmanifest': 'application/manifest+json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.wasm': 'application/wasm',
};

export function contentTypeOf(path: string): string {
  return CONTENT_TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream';
}

/** `SHOAL_DASHBOARD_DIR`, else `<repo>/dashboard/dist` next to this code (src or dist). */
export function defaultDashboardDir(): string {
  const fromEnv = process.env.SHOAL_DASHBOARD_DIR;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  // dist/src/dashboard/static.js -> <repo>/dashboard/dist
  return fileURLToPath(new URL('../../../dashboard/dist/', import.meta.url));
}

export function isDashboardBuilt(dir: string): boolean {
  try {
    return statSync(join(dir, 'index.html')).isFile();
  } catch {
    return false;
  }
}

/**
 * The path segments of a URL path under a static root, or null when it could leave the root or name
 * something never served: empty, `.` or `..` segments, dot files, backslashes, NUL, anything but
 * plain file-name characters. Pure: the filesystem check (symlinks) is `resolveInside`.
 */
export function safeSegments(urlPath: string): string[] | null {
  if (urlPath === '' || urlPath.length > MAX_SEGMENTS * (MAX_SEGMENT_CHARS + 1)) return null;
  const segments = urlPath.split('/');
  if (segments.length > MAX_SEGMENTS) return null;
  for (const segment of segments) {
    if (segment.length === 0 || segment.length > MAX_SEGMENT_CHARS) return null;
    if (!/^[A-Za-z0-9_][A-Za-z0-9._@+~-]*$/.test(segment)) return null;
  }
  return segments;
}

/** The real path of `segments` under `root` when it is a regular file that really lies inside root (no symlink out). */
export function resolveInside(root: string, segments: readonly string[]): { path: string; stats: Stats } | null {
  let realRoot: string;
  let real: string;
  try {
    realRoot = realpathSync(root);
    real = realpathSync(join(realRoot, ...segments));
  } catch {
    return null;
  }
  if (!real.startsWith(realRoot + sep)) return null;
  try {
    const stats = statSync(real);
    return stats.isFile() ? { path: real, stats } : null;
  } catch {
    return null;
  }
}

type CacheRule = 'immutable' | 'revalidate';

function serveFile(request: FastifyRequest, reply: FastifyReply, file: { path: string; stats: Stats }, cache: CacheRule, extraHeaders: Record<string, string> = {}): FastifyReply {
  const etag = `W/"${file.stats.size.toString(16)}-${Math.floor(file.stats.mtimeMs).toString(16)}"`;
  void reply
    .header('cache-control', cache === 'immutable' ? 'public, max-age=31536000, immutable' : 'no-cache')
    .header('etag', etag)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .headers(extraHeaders);
  if (request.headers['if-none-match'] === etag) return reply.code(304).send();
  return reply
    .header('content-type', contentTypeOf(file.path))
    .header('content-length', String(file.stats.size))
    .send(createReadStream(file.path));
}

function notFound(reply: FastifyReply, what: string): FastifyReply {
  return sendOpenAIError(reply, new ShoalError('NOT_FOUND', `unknown endpoint GET ${what}: see docs/API.md`));
}

/** Serves the build in `dir` (which must hold index.html: check with isDashboardBuilt). */
export function dashboardRoutes(app: FastifyInstance, dir: string): void {
  app.get('/', async (request, reply) => {
    const index = resolveInside(dir, ['index.html']);
    if (index === null) return notFound(reply, '/');
    return serveFile(request, reply, index, 'revalidate', { 'content-security-policy': DASHBOARD_CSP, 'x-frame-options': 'DENY' });
  });

  app.get('/assets/*', async (request, reply) => {
    const rest = (request.params as Record<string, string | undefined>)['*'] ?? '';
    const segments = safeSegments(rest);
    const file = segments === null ? null : resolveInside(join(dir, 'assets'), segments);
    if (file === null) return notFound(reply, `/assets/${rest}`);
    return serveFile(request, reply, file, 'immutable');
  });

  // Top-level files other than index.html, each by its exact name: a wildcard at `/` would swallow every API 404.
  let names: string[];
  try {
    names = readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isFile() && e.name !== 'index.html' && safeSegments(e.name) !== null)
      .map((e) => e.name)
      .sort()
      .slice(0, MAX_ROOT_FILES);
  } catch {
    names = [];
  }
  for (const name of names) {
    app.get(`/${name}`, async (request, reply) => {
      const file = resolveInside(dir, [name]);
      if (file === null) return notFound(reply, `/${name}`);
      return serveFile(request, reply, file, 'revalidate');
    });
  }
}

/** `GET /` when the dashboard is not built: the usual 404, saying how to build it. */
export function dashboardMissingRoute(app: FastifyInstance, dir: string): void {
  app.get('/', async (_request, reply) =>
    sendOpenAIError(
      reply,
      new ShoalError('NOT_FOUND', `the dashboard is not built (no ${join(dir, 'index.html')}): run 'npm run build' in the Shoal checkout and restart the node, or use the API (docs/API.md)`),
    ),
  );
}
