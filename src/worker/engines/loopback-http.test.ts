import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { test } from 'node:test';
import { SseDecoder } from './llama-server-protocol.js';
import { LoopbackHttp, readBody } from './loopback-http.js';

type Handler = (request: IncomingMessage, response: ServerResponse, body: string) => void;

async function serve(handler: Handler): Promise<{ server: Server; port: number; sockets: Set<Socket>; [Symbol.asyncDispose](): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part: Buffer) => parts.push(part));
    request.once('end', () => handler(request, response, Buffer.concat(parts).toString('utf8')));
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    server,
    port: (server.address() as AddressInfo).port,
    sockets,
    [Symbol.asyncDispose]: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('an SSE stream written one byte per packet decodes to the same payloads, multi-byte characters included', async () => {
  const events = ['{"content":"Ahoj, světe 🦀"}', '{"content":"\\n"}', '[DONE]'];
  const bytes = Buffer.from(events.map((e) => `data: ${e}\n\n`).join(''));
  await using local = await serve(async (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.socket!.setNoDelay(true);
    for (let i = 0; i < bytes.length; i++) {
      response.write(bytes.subarray(i, i + 1));
      await nextTurn();
    }
    response.end();
  });
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 2, headers: {} });
  try {
    const signal = new AbortController().signal;
    const response = await http.post(local.port, '/stream', { stream: true }, signal);
    const decoder = new SseDecoder();
    const payloads: string[] = [];
    let chunks = 0;
    await readBody(response, signal, (chunk) => {
      chunks += 1;
      payloads.push(...decoder.push(chunk));
    });
    payloads.push(...decoder.flush());
    assert.deepEqual(payloads, events);
    assert.ok(chunks > events.length, `the body came in ${chunks} chunks: the split was not exercised`);
  } finally {
    http.close();
  }
});

test('requests one after another reuse one kept-alive connection, and send the configured headers and JSON', async () => {
  const seen: Array<{ port: number; auth: string | undefined; body: string }> = [];
  await using local = await serve((request, response, body) => {
    seen.push({ port: request.socket.remotePort!, auth: request.headers.authorization, body });
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ n: seen.length }));
  });
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 2, headers: { authorization: 'Bearer k' } });
  try {
    const signal = new AbortController().signal;
    for (let i = 1; i <= 3; i++) assert.deepEqual(await http.postJson(local.port, '/x', { i }, signal), { status: 200, body: { n: i } });
    assert.equal(new Set(seen.map((s) => s.port)).size, 1, `connections: ${seen.map((s) => s.port).join(', ')}`);
    assert.deepEqual(
      seen.map((s) => [s.auth, s.body]),
      [1, 2, 3].map((i) => ['Bearer k', JSON.stringify({ i })]),
    );
  } finally {
    http.close();
  }
});

test('an error answer is read whole: JSON when it parses, text when not', async () => {
  await using local = await serve((request, response) => {
    if (request.url === '/json') response.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"message":"bad"}}');
    else response.writeHead(500).end('plain failure');
  });
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 1, headers: {} });
  try {
    const signal = new AbortController().signal;
    assert.deepEqual(await http.postJson(local.port, '/json', {}, signal), { status: 400, body: { error: { message: 'bad' } } });
    assert.deepEqual(await http.getJson(local.port, '/text', signal), { status: 500, body: 'plain failure' });
  } finally {
    http.close();
  }
});

test('a connection dropped mid-stream rejects the body with a socket error after the chunks before it', async () => {
  await using local = await serve((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.write('data: {"a":1}\n\n', () => setTimeout(() => response.socket!.destroy(), 20));
  });
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 1, headers: {} });
  try {
    const signal = new AbortController().signal;
    const response = await http.post(local.port, '/stream', {}, signal);
    const decoder = new SseDecoder();
    const payloads: string[] = [];
    await assert.rejects(
      readBody(response, signal, (chunk) => payloads.push(...decoder.push(chunk))),
      (error: NodeJS.ErrnoException) => error.code === 'ECONNRESET',
    );
    assert.deepEqual(payloads, ['{"a":1}']);
  } finally {
    http.close();
  }
});

test('a refused connection rejects with ECONNREFUSED', async () => {
  const local = await serve(() => undefined);
  const port = local.port;
  await local[Symbol.asyncDispose]();
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 1, headers: {} });
  try {
    await assert.rejects(http.postJson(port, '/x', {}, new AbortController().signal), (error: NodeJS.ErrnoException) => error.code === 'ECONNREFUSED');
  } finally {
    http.close();
  }
});

test('aborting mid-stream rejects with the reason and closes the connection, so the server sees the client leave', async () => {
  let serverSawClose!: Promise<unknown>;
  await using local = await serve((_request, response) => {
    serverSawClose = once(response, 'close');
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.write('data: {"a":1}\n\n');
  });
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 1, headers: {} });
  try {
    const controller = new AbortController();
    const response = await http.post(local.port, '/stream', {}, controller.signal);
    const reason = new Error('cancelled by the test');
    const read = readBody(response, controller.signal, () => controller.abort(reason));
    await assert.rejects(read, (error) => error === reason);
    await serverSawClose;
    assert.equal(local.sockets.size, 0, 'the connection is not kept after an abort');
  } finally {
    http.close();
  }
});

test('aborting before the answer rejects with the reason; an aborted signal sends nothing', async () => {
  let requests = 0;
  await using local = await serve(() => {
    requests += 1; // never answers
  });
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 1, headers: {} });
  try {
    const controller = new AbortController();
    const pending = http.post(local.port, '/slow', {}, controller.signal);
    while (requests === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    const reason = new Error('gave up');
    controller.abort(reason);
    await assert.rejects(pending, (error) => error === reason);
    await assert.rejects(http.post(local.port, '/slow', {}, controller.signal), (error) => error === reason);
    assert.equal(requests, 1);
  } finally {
    http.close();
  }
});

test('a kept-alive connection the server closes as a request goes out is retried once on a fresh one', async () => {
  const perSocket = new Map<Socket, number>();
  let requests = 0;
  await using local = await serve((request, response) => {
    requests += 1;
    const n = (perSocket.get(request.socket) ?? 0) + 1;
    perSocket.set(request.socket, n);
    // The second request on a connection finds it closed, as an idle-timeout close racing it would.
    if (n === 2) request.socket.destroy();
    else response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ requests }));
  });
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 1, headers: {} });
  try {
    const signal = new AbortController().signal;
    assert.deepEqual(await http.postJson(local.port, '/x', {}, signal), { status: 200, body: { requests: 1 } });
    assert.deepEqual(await http.postJson(local.port, '/x', {}, signal), { status: 200, body: { requests: 3 } });
    assert.equal(perSocket.size, 2, 'the retry went out on a second connection');
  } finally {
    http.close();
  }
});

test('when the server closed several idle connections at once, the request is retried until a fresh one takes it', async () => {
  const perSocket = new Map<Socket, number>();
  let requests = 0;
  await using local = await serve((request, response) => {
    requests += 1;
    const n = (perSocket.get(request.socket) ?? 0) + 1;
    perSocket.set(request.socket, n);
    // Every kept-alive connection is gone by its second request, as after the server's idle timeout.
    if (n === 2) request.socket.destroy();
    // The first three answer together, so three connections are open and then idle.
    else setTimeout(() => response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ n })), 50);
  });
  const http = new LoopbackHttp({ maxSockets: 4, maxIdleSockets: 3, headers: {} });
  try {
    const signal = new AbortController().signal;
    await Promise.all([0, 1, 2].map(() => http.postJson(local.port, '/x', {}, signal)));
    assert.deepEqual(await http.postJson(local.port, '/x', {}, signal), { status: 200, body: { n: 1 } });
    assert.equal(perSocket.size, 4, 'three stale connections were tried, then a fourth, fresh one answered');
    assert.equal(requests, 7);
  } finally {
    http.close();
  }
});
