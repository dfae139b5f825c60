import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { contentTypeOf, DASHBOARD_CSP, dashboardMissingRoute, dashboardRoutes, isDashboardBuilt, resolveInside, safeSegments } from './static.js';

let root: string;
let dist: string;
let app: FastifyInstance;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'shoal-static-'));
  dist = join(root, 'dist');
  await mkdir(join(dist, 'assets', 'nested'), { recursive: true });
  await writeFile(join(dist, 'index.html'), '<!doctype html><script type="module" src="./assets/app-abc123.js"></script>');
  await writeFile(join(dist, 'assets', 'app-abc123.js'), 'console.log(1)');
  await writeFile(join(dist, 'assets', 'nested', 'font-x.woff2'), 'woff');
  await writeFile(join(dist, 'assets', '.hidden'), 'secret');
  await writeFile(join(dist, 'favicon.svg'), '<svg/>');
  await writeFile(join(root, 'secret.txt'), 'outside the build');
  await symlink(join(root, 'secret.txt'), join(dist, 'assets', 'link.js'));
  app = Fastify();
  app.setNotFoundHandler((request, reply) => reply.code(404).send({ notFound: request.url }));
  dashboardRoutes(app, dist);
  await app.ready();
});

after(async () => {
  await app.close();
  await rm(root, { recursive: true, force: true });
});

test('safeSegments accepts plain relative file paths only', () => {
  assert.deepEqual(safeSegments('app-abc.js'), ['app-abc.js']);
  assert.deepEqual(safeSegments('nested/font_x@2.woff2'), ['nested', 'font_x@2.woff2']);
  for (const bad of ['', '..', '../x', 'a/../b', './a', 'a//b', '/a', 'a/', '.env', 'a/.git', 'a\\b', 'a\u0000b', 'a b', 'a:b', 'a*b', '%2e%2e', 'x'.repeat(256), Array(20).fill('a').join('/')]) {
    assert.equal(safeSegments(bad), null, JSON.stringify(bad));
  }
});

test('resolveInside finds regular files under the root and nothing through a symlink out of it', () => {
  assert.ok(resolveInside(dist, ['index.html']));
  assert.equal(resolveInside(dist, ['assets']), null, 'a directory');
  assert.equal(resolveInside(dist, ['missing.js']), null);
  assert.equal(resolveInside(join(dist, 'assets'), ['link.js']), null, 'a symlink leaving the root');
  assert.equal(resolveInside(join(root, 'nope'), ['x']), null);
  assert.equal(isDashboardBuilt(dist), true);
  assert.equal(isDashboardBuilt(root), false);
});

test('content types by extension', () => {
  assert.equal(contentTypeOf('a.js'), 'text/javascript; charset=utf-8');
  assert.equal(contentTypeOf('A.CSS'), 'text/css; charset=utf-8');
  assert.equal(contentTypeOf('x.woff2'), 'font/woff2');
  assert.equal(contentTypeOf('x.unknown'), 'application/octet-stream');
});

test('index.html at / with the strict policy, revalidated; 304 when unchanged', async () => {
  const res = await app.inject({ method: 'GET', url: '/' });
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.equal(res.headers['content-security-policy'], DASHBOARD_CSP);
  assert.match(DASHBOARD_CSP, /default-src 'self'/);
  assert.doesNotMatch(DASHBOARD_CSP, /unsafe|\*|http/);
  assert.equal(res.headers['x-content-type-options'], 'nosniff');
  assert.match(res.body, /app-abc123\.js/);
  const again = await app.inject({ method: 'GET', url: '/', headers: { 'if-none-match': String(res.headers.etag) } });
  assert.equal(again.statusCode, 304);
  assert.equal(again.body, '');
  const head = await app.inject({ method: 'HEAD', url: '/' });
  assert.equal(head.statusCode, 200);
});

test('hashed assets are immutable; top-level files are served by name', async () => {
  const js = await app.inject({ method: 'GET', url: '/assets/app-abc123.js' });
  assert.equal(js.statusCode, 200);
  assert.equal(js.body, 'console.log(1)');
  assert.equal(js.headers['content-type'], 'text/javascript; charset=utf-8');
  assert.equal(js.headers['cache-control'], 'public, max-age=31536000, immutable');
  assert.equal(js.headers['content-security-policy'], undefined);
  const font = await app.inject({ method: 'GET', url: '/assets/nested/font-x.woff2' });
  assert.equal(font.statusCode, 200);
  assert.equal(font.headers['content-type'], 'font/woff2');
  const icon = await app.inject({ method: 'GET', url: '/favicon.svg' });
  assert.equal(icon.statusCode, 200);
  assert.equal(icon.headers['content-type'], 'image/svg+xml');
  assert.equal(icon.headers['cache-control'], 'no-cache');
});

test('no path leaves the build: traversal, encoded traversal, dot files, symlinks', async () => {
  for (const url of ['/assets/../../secret.txt', '/assets/%2e%2e/%2e%2e/secret.txt', '/assets/..%2f..%2fsecret.txt', '/assets/.hidden', '/assets/link.js', '/assets/nested', '/assets/', '/assets/%00', '/secret.txt']) {
    const res = await app.inject({ method: 'GET', url });
    assert.equal(res.statusCode, 404, url);
    assert.doesNotMatch(res.body, /outside the build|secret$/, url);
  }
});

test('other paths keep their 404s: the build adds no catch-all', async () => {
  const res = await app.inject({ method: 'GET', url: '/v1/whatever' });
  assert.deepEqual(JSON.parse(res.body), { notFound: '/v1/whatever' });
});

test('without a build, / says how to build it', async () => {
  const bare = Fastify();
  dashboardMissingRoute(bare, join(root, 'nope'));
  const res = await bare.inject({ method: 'GET', url: '/' });
  assert.equal(res.statusCode, 404);
  assert.match(JSON.parse(res.body).error.message, /dashboard is not built.*npm run build/);
  await bare.close();
});
