import assert from 'node:assert/strict';
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { sleep } from '../support/wait.js';

/**
 * The HTTP connection caps on a real node (set low through their environment variables): idle
 * sockets past the per-address and the total cap are closed as they arrive while other clients are
 * served, and a client that sends nothing or never finishes its headers is cut off without cutting a
 * streaming answer.
 */

const PER_IP = 4;
const TOTAL = 10;
/** The headers timeout is min(30 s, this): short, so a silent socket is closed within the test. */
const REQUEST_TIMEOUT_MS = 3000;
const MODEL = 'shoal/tiny';

let node: TestNode;

before(async () => {
  node = await startTestNode({
    env: { SHOAL_HTTP_MAX_CONNECTIONS_PER_IP: String(PER_IP), SHOAL_HTTP_MAX_CONNECTIONS: String(TOTAL), SHOAL_HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) },
  });
});

after(async () => {
  await node?.stop();
});

interface Probe {
  socket: Socket;
  /** Settles when the node closes (or resets) the socket. */
  closed: Promise<void>;
  isClosed: () => boolean;
}

/** A connected socket from `localAddress` (any of 127.0.0.0/8 is this host) that sends nothing. */
async function idle(localAddress: string): Promise<Probe> {
  const socket = connect({ port: node.port, host: '127.0.0.1', localAddress });
  socket.on('error', () => {}); // a reset is one way the node closes it
  let isClosed = false;
  const closed = new Promise<void>((resolve) =>
    socket.once('close', () => {
      isClosed = true;
      resolve();
    }),
  );
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('close', () => reject(new Error('closed before it connected')));
  });
  return { socket, closed, isClosed: () => isClosed };
}

/** A GET on its own connection (no keep-alive pool), so the test knows what it holds open. */
function get(path: string, localAddress = '127.0.0.1'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: node.port, path, localAddress, agent: false, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const withinMs = <T>(promise: Promise<T>, ms: number): Promise<T | 'timeout'> =>
  Promise.race([promise, new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), ms).unref())]);

describe('HTTP connection caps on a real node', { timeout: 120_000 }, () => {
  test('connections past the per-address cap are closed as they arrive; other addresses are served', async () => {
    const held: Probe[] = [];
    for (let i = 0; i < PER_IP; i += 1) held.push(await idle('127.0.0.2'));
    const excess = await Promise.all([idle('127.0.0.2'), idle('127.0.0.2')]);
    try {
      for (const probe of excess) assert.notEqual(await withinMs(probe.closed, 1000), 'timeout', 'a connection past the per-address cap stayed open');
      assert.ok(held.every((p) => !p.isClosed()), 'the connections under the cap are still open');

      const health = await get('/healthz');
      assert.equal(health.status, 200, health.body);

      // Closing one frees its place for the same address.
      held[0]!.socket.destroy();
      await held[0]!.closed;
      await sleep(100);
      const again = await idle('127.0.0.2');
      held.push(again);
      assert.equal(await withinMs(again.closed, 500), 'timeout', 'a connection under the cap again was closed');
    } finally {
      for (const p of [...held, ...excess]) p.socket.destroy();
    }
  });

  test('connections past the total cap are closed as they arrive, and the node serves once they go', async () => {
    await sleep(200); // the previous test's sockets are gone on the node's side too
    const held: Probe[] = [];
    // From many addresses, PER_IP - 1 each, until the node refuses one: the total cap.
    let refused: Probe | null = null;
    for (let i = 0; refused === null && i < TOTAL + 2; i += 1) {
      const probe = await idle(`127.0.1.${1 + Math.floor(i / (PER_IP - 1))}`);
      if ((await withinMs(probe.closed, 150)) === 'timeout') held.push(probe);
      else refused = probe;
    }
    try {
      assert.ok(refused !== null, `${held.length} connections were all kept (the total cap is ${TOTAL})`);
      // This process's fetch() may still hold one kept-alive connection of its own.
      assert.ok(held.length >= TOTAL - 1 && held.length <= TOTAL, `the node kept ${held.length} connections, the total cap is ${TOTAL}`);
      assert.ok(held.every((p) => !p.isClosed()));
    } finally {
      for (const p of held) p.socket.destroy();
    }
    await Promise.all(held.map((p) => p.closed));
    await sleep(200);
    const health = await get('/healthz');
    assert.equal(health.status, 200, health.body);
  });

  test('a client that connects and sends nothing is closed after the headers timeout', async () => {
    const silent = await idle('127.0.0.4');
    assert.notEqual(await withinMs(silent.closed, 5 * REQUEST_TIMEOUT_MS), 'timeout', 'a silent connection was never closed');
  });

  test('a client that never finishes its headers is closed while a long stream stays open', async () => {
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 3000, temperature: 1, seed: 7, stream: true }),
    });
    assert.equal(res.status, 200);
    const slow = await idle('127.0.0.3');
    slow.socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${node.port}\r\n`); // and never the blank line
    let answer = '';
    slow.socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
    // The stream is left unread until the slow client is gone, so it outlives the timeouts.
    assert.notEqual(await withinMs(slow.closed, 5 * REQUEST_TIMEOUT_MS), 'timeout', 'a client that never finished its headers was never closed');
    assert.match(answer, /^HTTP\/1\.1 408/);
    const reader = res.body!.getReader();
    let text = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString('utf8');
    }
    assert.match(text, /"finish_reason":"(length|stop)"/);
    assert.match(text, /data: \[DONE\]/, 'the stream ran to its end');
  });
});
