import assert from 'node:assert/strict';
import { chmod, mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MAX_JSON_DEPTH } from '../../src/wire/json-depth.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * What a hostile or broken client can hold on a real node: JSON nested thousands of levels deep in
 * every family's schema fields, and a body trickled in byte by byte; while a long generation
 * streams on untouched.
 */

const MODEL = 'shoal/tiny';
const PARALLEL = 2;
/** Short, so the trickle test is quick (Node then checks it every 500 ms). */
const REQUEST_TIMEOUT_MS = 500;

let node: TestNode;

let dataDir: string;

before(async () => {
  // World-readable to start with, as a data dir made by hand or by an older Shoal would be.
  dataDir = await mkdtemp(join(tmpdir(), 'shoal-bounds-'));
  await chmod(dataDir, 0o755);
  node = await startTestNode({ dataDir, args: ['--parallel', String(PARALLEL)], env: { SHOAL_HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) } });
});

after(async () => {
  await node?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

/** A JSON schema nested `depth` levels deep, as text (JSON.stringify would overflow its stack on it). */
function deepSchema(depth: number): string {
  return '{"type":"array","items":'.repeat(depth - 1) + '{"type":"string"}' + '}'.repeat(depth - 1);
}

/** `body` as JSON with the string DEEP replaced by `schema`. */
function withSchema(body: unknown, schema: string): string {
  return JSON.stringify(body).replace('"DEEP"', schema);
}

async function post(path: string, body: string): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(30_000) });
  return { status: res.status, json: await res.json() };
}

const user = [{ role: 'user', content: 'hi' }];

describe('request bounds on a real node', { timeout: 180_000 }, () => {
  test('JSON nested past the limit is a 400 in each family, and the model keeps serving', async () => {
    const deep = 'DEEP';
    const openAIShape = (json: unknown): string => {
      const error = (json as { error: { type: string; param: unknown; message: string } }).error;
      assert.equal(error.type, 'invalid_request_error');
      assert.equal(error.param, null);
      return error.message;
    };
    const anthropicShape = (json: unknown): string => {
      const body = json as { type: string; error: { type: string; message: string } };
      assert.equal(body.type, 'error');
      assert.equal(body.error.type, 'invalid_request_error');
      return body.error.message;
    };
    const ollamaShape = (json: unknown): string => {
      const body = json as { error: string };
      assert.equal(typeof body.error, 'string');
      return body.error;
    };
    const cases: Array<{ path: string; body: unknown; shape: (json: unknown) => string }> = [
      { path: '/v1/chat/completions', body: { model: MODEL, messages: user, tools: [{ type: 'function', function: { name: 'f', parameters: deep } }] }, shape: openAIShape },
      { path: '/v1/chat/completions', body: { model: MODEL, messages: user, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: deep } } }, shape: openAIShape },
      { path: '/v1/responses', body: { model: MODEL, input: 'hi', tools: [{ type: 'function', name: 'f', parameters: deep }] }, shape: openAIShape },
      { path: '/v1/messages', body: { model: MODEL, max_tokens: 4, messages: user, tools: [{ name: 'f', input_schema: deep }] }, shape: anthropicShape },
      { path: '/v1/messages/count_tokens', body: { model: MODEL, messages: user, tools: [{ name: 'f', input_schema: deep }] }, shape: anthropicShape },
      { path: '/api/chat', body: { model: MODEL, messages: user, format: deep, stream: false }, shape: ollamaShape },
    ];
    // More than --parallel of each: before the bound each one that reached the runner kept a slot.
    for (const c of cases) {
      for (let i = 0; i <= PARALLEL; i += 1) {
        const res = await post(c.path, withSchema(c.body, deepSchema(5000)));
        assert.equal(res.status, 400, `${c.path}: ${JSON.stringify(res.json)}`);
        assert.match(c.shape(res.json), new RegExp(`nested deeper than ${MAX_JSON_DEPTH} levels`), c.path);
      }
    }
    // Ollama reads any content type as JSON: the bound holds there too.
    const plain = await fetch(`${node.url}/api/chat`, { method: 'POST', body: withSchema({ model: MODEL, messages: user, format: deep }, deepSchema(5000)) });
    assert.equal(plain.status, 400);
    assert.match(ollamaShape(await plain.json()), /nested deeper/);

    const ok = await post('/v1/chat/completions', withSchema({ model: MODEL, messages: user, max_tokens: 4, tools: [{ type: 'function', function: { name: 'f', parameters: deep } }], tool_choice: 'none' }, deepSchema(8)));
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
  });

  test("headers too large are a 431 and a path part too long a 414, each in the family's shape", async () => {
    const big = { 'x-padding': 'a'.repeat(20_000) };
    const shapes: Array<[string, (json: unknown) => boolean]> = [
      ['/v1/models', (json) => (json as { error: { type: string } }).error.type === 'invalid_request_error'],
      ['/v1/messages', (json) => (json as { type: string }).type === 'error'],
      ['/api/tags', (json) => typeof (json as { error: unknown }).error === 'string'],
      ['/state', (json) => typeof (json as { error: { code: unknown } }).error.code === 'string'],
    ];
    for (const [path, shaped] of shapes) {
      const res = await fetch(`${node.url}${path}`, { headers: big });
      assert.equal(res.status, 431, path);
      const json: unknown = await res.json();
      assert.ok(shaped(json), `${path}: ${JSON.stringify(json)}`);
    }
    const long = 'x'.repeat(300);
    const openAI = await fetch(`${node.url}/v1/responses/${long}`);
    assert.equal(openAI.status, 414);
    assert.equal(((await openAI.json()) as { error: { type: string } }).error.type, 'invalid_request_error');
    const control = await fetch(`${node.url}/instance/${long}`, { method: 'DELETE', headers: { 'x-shoal-client': 'test' } });
    assert.equal(control.status, 414);
    assert.equal(((await control.json()) as { error: { code: string } }).error.code, 'BAD_REQUEST');
  });

  test('a body trickled in is cut off after the request timeout', async () => {
    const socket = connect(node.port, '127.0.0.1');
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:${node.port}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
    const trickle = setInterval(() => socket.write(' '), 100);
    let answer = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const timedOut = new Promise<'still open'>((resolve) => setTimeout(() => resolve('still open'), 15_000).unref());
    try {
      assert.notEqual(await Promise.race([closed, timedOut]), 'still open', 'a trickled body held its connection');
    } finally {
      clearInterval(trickle);
      socket.destroy();
    }
    assert.match(answer, /^HTTP\/1\.1 408/, 'Node answers 408 before it closes');
  });

  test('a streamed generation runs past the request timeout without being cut', async () => {
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: user, max_tokens: 3000, temperature: 1, seed: 7, stream: true, stream_options: { include_usage: true } }),
    });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    let text = '';
    let firstAt = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      firstAt ||= Date.now();
      text += Buffer.from(value).toString('utf8');
    }
    const streamedMs = Date.now() - firstAt;
    console.log(`# measured: the stream ran ${streamedMs} ms after its first chunk (request timeout ${REQUEST_TIMEOUT_MS} ms): ${/"usage":\{[^}]*\}/.exec(text)?.[0]}`);
    // Shorter and the test would prove nothing: Node checks the timeout every 500 ms here.
    assert.ok(streamedMs > REQUEST_TIMEOUT_MS * 3, `the generation took only ${streamedMs} ms`);
    assert.match(text, /"finish_reason":"(length|stop)"/);
    assert.match(text, /data: \[DONE\]/);
  });

  test('the data dir is 0700 and the event log files 0600', async () => {
    assert.equal((await stat(dataDir)).mode & 0o777, 0o700);
    const logDir = join(dataDir, 'log');
    assert.equal((await stat(logDir)).mode & 0o777, 0o700);
    const files = await readdir(logDir);
    assert.ok(files.length > 0, 'the log has files');
    for (const file of files) {
      const info = await stat(join(logDir, file));
      if (info.isFile()) assert.equal(info.mode & 0o777, 0o600, file);
    }
  });
});
