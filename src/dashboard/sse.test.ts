import assert from 'node:assert/strict';
import { get, type IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { SseHub, type SseClient } from './sse.js';

let app: FastifyInstance;
let port: number;
const hub = new SseHub({ maxClients: 2, maxBufferedBytes: 256 * 1024, heartbeatMs: 50 });
const opened: SseClient[] = [];

before(async () => {
  app = Fastify();
  app.get('/stream', async (request, reply) => {
    const client = hub.open(request, reply);
    if (client !== null) {
      opened.push(client);
      client.send('hello', { n: opened.length, text: 'line\nbreak' });
    }
    return reply;
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  port = (app.server.address() as { port: number }).port;
});

after(async () => {
  hub.closeAll();
  await app.close();
});

function open(): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => get({ host: '127.0.0.1', port, path: '/stream' }, resolve).once('error', reject));
}

/** Reads a response until `pattern` appears in it. */
function readUntil(res: IncomingMessage, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('utf8');
      if (pattern.test(text)) {
        res.off('data', onData);
        resolve(text);
      }
    };
    res.on('data', onData);
    res.once('end', () => reject(new Error(`ended before ${pattern}: ${text}`)));
  });
}

async function until(what: string, probe: () => boolean): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

test('a stream opens with SSE headers, a retry hint, events with escaped payloads and heartbeats', async () => {
  const res = await open();
  assert.equal(res.statusCode, 200);
  assert.equal(res.headers['content-type'], 'text/event-stream; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-cache');
  const text = await readUntil(res, /: heartbeat\n\n/);
  assert.match(text, /^retry: 2000\n\n/);
  assert.match(text, /event: hello\ndata: \{"n":1,"text":"line\\nbreak"\}\n\n/);
  assert.throws(() => opened[0]!.send('x', 'two\nlines'), /line break/);
  res.destroy();
  await until('the hub to forget the closed client', () => hub.size === 0);
  opened.length = 0;
});

test('the hub serves at most its limit; one more gets 503 until a slot frees', async () => {
  const a = await open();
  const b = await open();
  await until('two clients', () => hub.size === 2);
  const c = await open();
  assert.equal(c.statusCode, 503);
  assert.equal(c.headers['retry-after'], '2');
  const body = JSON.parse(await new Promise<string>((resolve) => {
    let t = '';
    c.on('data', (d: Buffer) => (t += d.toString())).once('end', () => resolve(t));
  })) as { error: { code: string; message: string } };
  assert.equal(body.error.code, 'QUEUE_FULL');
  assert.match(body.error.message, /2 live streams/);
  a.destroy();
  await until('a free slot', () => hub.size === 1);
  const d = await open();
  assert.equal(d.statusCode, 200);
  b.destroy();
  d.destroy();
  await until('no clients', () => hub.size === 0);
  opened.length = 0;
});

test('a client that does not read is dropped once its buffer passes the bound', async () => {
  // A raw socket that sends the request and never reads: the kernel buffers fill, then the node's.
  const socket = connect(port, '127.0.0.1');
  socket.write(`GET /stream HTTP/1.1\r\nHost: x\r\n\r\n`);
  socket.pause();
  await until('the client to open', () => opened.length === 1);
  const client = opened[0]!;
  const chunk = 'x'.repeat(64 * 1024);
  let sent = 0;
  while (client.send('bulk', chunk) && sent < 4000) {
    sent += 1;
    if (sent % 16 === 0) await new Promise((r) => setImmediate(r));
  }
  assert.equal(client.isClosed, true, `dropped after ${sent} events of 64 KiB`);
  assert.ok(sent < 4000);
  await until('the hub to forget it', () => hub.size === 0);
  assert.equal(client.send('after', 1), false);
  socket.destroy();
  opened.length = 0;
});

test('closeAll ends every stream and refuses new ones', async () => {
  const res = await open();
  const ended = new Promise<void>((resolve) => res.once('end', resolve).resume());
  await until('one client', () => hub.size === 1);
  hub.closeAll();
  await ended;
  const refused = await open();
  assert.equal(refused.statusCode, 503);
  refused.resume();
});
