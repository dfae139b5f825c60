import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import type { NodeDiagnostics, Timeline } from '../../wire/diagnostics.js';
import type { TimelineQuery } from '../../diagnostics/timeline.js';
import { TIMELINE_DEFAULT_LIMIT, TIMELINE_MAX_LIMIT } from '../../diagnostics/timeline.js';
import type { DiagnosticsControl } from './diagnostics-port.js';
import { diagnosticsRoutes } from './diagnostics-routes.js';

const NODE: NodeDiagnostics = { nodeId: 'n1', name: 'one', version: '0.1.0', commit: null, wireVersion: 3, pid: 1, nowMs: 5, uptimeMs: 1, runners: [], moments: [], telemetry: {}, dataPlane: {} };

async function serve(queries: TimelineQuery[] = []) {
  const diagnostics: DiagnosticsControl = {
    node: () => NODE,
    cluster: async () => ({ viewerNodeId: 'n1', members: [], versionMismatch: null }),
    timeline: async (query): Promise<Timeline> => {
      queries.push(query);
      return { viewerNodeId: 'n1', clocks: [], entries: [] };
    },
  };
  const app = Fastify();
  await app.register(diagnosticsRoutes, { diagnostics, adminToken: 'admin' });
  return app;
}

const remote = { remoteAddress: '10.0.0.7', headers: { host: '10.0.0.1:52600' } };

test('from another machine the diagnostics routes need the admin token, in the control error shape', async () => {
  const app = await serve();
  for (const url of ['/diagnostics/node', '/diagnostics/cluster', '/diagnostics/cluster/timeline']) {
    const refused = await app.inject({ method: 'GET', url, ...remote });
    assert.equal(refused.statusCode, 401, url);
    const body = refused.json<{ error: { code: string; message: string } }>();
    assert.equal(body.error.code, 'UNAUTHORIZED');
    assert.match(body.error.message, /admin token/);
    const wrong = await app.inject({ method: 'GET', url, ...remote, headers: { ...remote.headers, authorization: 'Bearer nope' } });
    assert.equal(wrong.statusCode, 401, url);
    const allowed = await app.inject({ method: 'GET', url, ...remote, headers: { ...remote.headers, authorization: 'Bearer admin' } });
    assert.equal(allowed.statusCode, 200, url);
  }
  const node = await app.inject({ method: 'GET', url: '/diagnostics/node', ...remote, headers: { ...remote.headers, authorization: 'Bearer admin' } });
  assert.deepEqual(node.json(), NODE);
  await app.close();
});

test('the timeline query: defaults, sinceMs and limit passed on, out-of-range values refused', async () => {
  const queries: TimelineQuery[] = [];
  const app = await serve(queries);
  const get = (query: string) => app.inject({ method: 'GET', url: `/diagnostics/cluster/timeline${query}`, ...remote, headers: { ...remote.headers, authorization: 'Bearer admin' } });
  assert.equal((await get('')).statusCode, 200);
  assert.equal((await get('?sinceMs=1700000000000.5&limit=10')).statusCode, 200);
  assert.deepEqual(queries, [
    { sinceMs: null, limit: TIMELINE_DEFAULT_LIMIT },
    { sinceMs: 1700000000000.5, limit: 10 },
  ]);
  for (const query of ['?limit=0', `?limit=${TIMELINE_MAX_LIMIT + 1}`, '?limit=2.5', '?sinceMs=soon', '?until=5']) {
    const bad = await get(query);
    assert.equal(bad.statusCode, 400, query);
    assert.equal(bad.json<{ error: { code: string } }>().error.code, 'BAD_REQUEST', query);
  }
  assert.equal(queries.length, 2);
  await app.close();
});
