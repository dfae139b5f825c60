import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import Fastify from 'fastify';
import { ShoalError } from '../common/errors.js';
import { toAnthropicError } from './anthropic/errors.js';
import { controlStatus } from './control/errors.js';
import { registerCors, isLoopbackOrigin, parseCorsOrigins } from './cors.js';
import { toOllamaError } from './ollama/errors.js';
import { toOpenAIError } from './openai/errors.js';

function app(origins: string[], cluster: string[] = []) {
  const server = Fastify();
  registerCors(server, { origins, clusterOrigins: () => cluster, refuse: (_request, reply, error) => reply.code(403).send({ error: { message: error.message } }) });
  server.post('/v1/chat/completions', async () => ({ ok: true }));
  server.post('/api/pull', async () => ({ ok: true }));
  server.delete('/api/delete', async () => ({ ok: true }));
  server.get('/state', async () => ({ ok: true }));
  return server;
}

const preflight = (origin: string, url = '/v1/chat/completions') => ({
  method: 'OPTIONS' as const,
  url,
  headers: { origin, host: '127.0.0.1:52600', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
});

describe('CORS on inference routes', () => {
  test('a preflight from an allowed origin is answered with the origin, methods and the asked headers', async () => {
    const res = await app(['https://app.example']).inject(preflight('https://app.example'));
    assert.equal(res.statusCode, 204);
    assert.equal(res.headers['access-control-allow-origin'], 'https://app.example');
    assert.match(String(res.headers['access-control-allow-methods']), /POST/);
    assert.equal(res.headers['access-control-allow-headers'], 'authorization, content-type');
    assert.equal(res.headers['access-control-allow-private-network'], undefined);
    const pna = preflight('https://app.example');
    const privateNet = await app(['https://app.example']).inject({ ...pna, headers: { ...pna.headers, 'access-control-request-private-network': 'true' } });
    assert.equal(privateNet.headers['access-control-allow-private-network'], 'true', "Chromium's private network preflight is granted too");
  });

  test('loopback origins are allowed by default, others are refused before the route runs', async () => {
    const server = app([]);
    assert.equal((await server.inject(preflight('http://localhost:5173'))).statusCode, 204);
    const refused = await server.inject({ method: 'POST', url: '/v1/chat/completions', headers: { origin: 'https://evil.example', host: '127.0.0.1:52600' }, payload: {} });
    assert.equal(refused.statusCode, 403);
    assert.equal(refused.headers['access-control-allow-origin'], undefined);
    assert.match(refused.json().error.message, /--cors-origin/);
  });

  test("the cluster's origins count, read per request; * allows any; the node's own origin needs nothing", async () => {
    const cluster: string[] = [];
    const server = app([], cluster);
    assert.equal((await server.inject(preflight('https://b.example'))).statusCode, 403);
    cluster.push('https://b.example');
    assert.equal((await server.inject(preflight('https://b.example'))).statusCode, 204);
    assert.equal((await app(['*']).inject(preflight('https://any.example'))).statusCode, 204);
    const own = await server.inject({ method: 'POST', url: '/v1/chat/completions', headers: { origin: 'http://192.168.1.5:52600', host: '192.168.1.5:52600' }, payload: {} });
    assert.equal(own.statusCode, 200);
  });

  test('control routes get no CORS headers, even for an allowed origin', async () => {
    const res = await app(['*']).inject({ method: 'GET', url: '/state', headers: { origin: 'https://app.example', host: '127.0.0.1:52600' } });
    assert.equal(res.headers['access-control-allow-origin'], undefined);
    const pre = await app(['*']).inject(preflight('https://app.example', '/state'));
    assert.notEqual(pre.statusCode, 204);
    assert.equal(pre.headers['access-control-allow-origin'], undefined);
  });

  test('Ollama pull and delete (they change the disk) never answer cross-origin, whatever is allowed', async () => {
    for (const [method, url] of [
      ['POST', '/api/pull'],
      ['DELETE', '/api/delete'],
    ] as const) {
      for (const origin of ['https://app.example', 'http://localhost:5173']) {
        const pre = await app(['*']).inject(preflight(origin, url));
        assert.equal(pre.statusCode, 403, `${url} preflight from ${origin}`);
        assert.equal(pre.headers['access-control-allow-origin'], undefined);
        assert.equal(pre.headers['access-control-allow-headers'], undefined, 'Authorization is not granted');
        const res = await app(['*']).inject({ method, url, headers: { origin, host: '127.0.0.1:52600' }, payload: {} });
        assert.equal(res.statusCode, 403, `${method} ${url} from ${origin}`);
        assert.match(res.json().error.message, /changes this node's disk.*shoal pull/);
      }
      // The node's own pages and clients that send no Origin (the CLI, Ollama clients) are unaffected.
      assert.equal((await app([]).inject({ method, url, headers: { host: '127.0.0.1:52600' }, payload: {} })).statusCode, 200);
      assert.equal((await app([]).inject({ method, url, headers: { origin: 'http://127.0.0.1:52600', host: '127.0.0.1:52600' }, payload: {} })).statusCode, 200);
    }
  });

  test('a refusal is FORBIDDEN, answered in each family as its permission error', async () => {
    const codes: string[] = [];
    const server = Fastify();
    registerCors(server, { origins: [], clusterOrigins: () => [], refuse: (_request, reply, error) => (codes.push(error.code), reply.code(toOpenAIError(error).status).send(toOpenAIError(error).body)) });
    server.post('/v1/chat/completions', async () => ({ ok: true }));
    const res = await server.inject({ method: 'POST', url: '/v1/chat/completions', headers: { origin: 'https://evil.example', host: '127.0.0.1:52600' }, payload: {} });
    assert.deepEqual(codes, ['FORBIDDEN']);
    assert.equal(res.statusCode, 403);
    assert.equal(res.json().error.type, 'invalid_request_error');
    assert.equal(res.json().error.code, 'forbidden');
    const error = new ShoalError('FORBIDDEN', 'no');
    assert.deepEqual([toAnthropicError(error).status, toAnthropicError(error).body.error.type], [403, 'permission_error']);
    assert.deepEqual([toOllamaError(error).status, toOllamaError(error).body], [403, { error: 'no' }]);
    assert.equal(controlStatus(error), 403);
  });

  test('origins given by an operator are normalized; a path is refused', () => {
    assert.deepEqual(parseCorsOrigins(['HTTPS://App.Example/', 'http://a.example:80,*'], '--cors-origin'), ['https://app.example', 'http://a.example', '*']);
    assert.throws(() => parseCorsOrigins(['https://app.example/chat'], '--cors-origin'), /--cors-origin: 'https:\/\/app.example\/chat' is not an origin/);
    assert.equal(isLoopbackOrigin('http://127.0.0.1:8080'), true);
    assert.equal(isLoopbackOrigin('http://[::1]:3000'), true);
    assert.equal(isLoopbackOrigin('http://localhost.evil.example'), false);
    assert.equal(isLoopbackOrigin('null'), false);
  });
});
