import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isNetworkError } from '../hub/endpoint.js';
import { ModelsError } from '../hub/errors.js';
import { HttpTransportError, httpGet, type ChunkSink, type HttpGetOptions } from './http-body.js';

// The GET a hub download reads its bytes with, against real servers on loopback: node:http ones for
// what a hub or CDN sends, raw sockets for what node:http would not send (split heads, 1xx answers,
// bodies that end with the connection), and an https server with a certificate made by openssl.

/**
 * A sink that keeps what it is given (a copy: the bytes are valid only during `push`); with
 * `regions`, it also offers memory of its own for reads to land in (of odd sizes, to end mid-read).
 */
function collector(opts: { pauseEvery?: number; readyAfterMs?: number; regions?: boolean } = {}): ChunkSink & { bytes(): Buffer; pushes: number; waits: number; commits: number } {
  const parts: Buffer[] = [];
  let pushes = 0;
  let waits = 0;
  let commits = 0;
  let region: Buffer | null = null;
  const more = (): boolean => !(opts.pauseEvery && (pushes + commits) % opts.pauseEvery === 0);
  return {
    push(bytes) {
      parts.push(Buffer.from(bytes));
      pushes += 1;
      return more();
    },
    ...(opts.regions
      ? {
          region(max: number) {
            region = Buffer.alloc(Math.min(max, 50_000 + ((pushes + commits) % 7) * 30_011));
            return region;
          },
          commit(n: number) {
            parts.push(Buffer.from((region as Buffer).subarray(0, n)));
            region = null;
            commits += 1;
            return more();
          },
        }
      : {}),
    async ready() {
      waits += 1;
      await new Promise((r) => setTimeout(r, opts.readyAfterMs ?? 5));
    },
    bytes: () => Buffer.concat(parts),
    get pushes() {
      return pushes;
    },
    get waits() {
      return waits;
    },
    get commits() {
      return commits;
    },
  };
}

async function listen(server: Server | ReturnType<typeof createNetServer>): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function close(server: Server | ReturnType<typeof createNetServer>): Promise<void> {
  (server as Server).closeAllConnections?.();
  return new Promise((resolve) => server.close(() => resolve()));
}

function opts(extra: Partial<HttpGetOptions> = {}): HttpGetOptions {
  return { signal: new AbortController().signal, ...extra };
}

/** A raw TCP server that answers every connection with `answer` (written in the pieces given), then does `then`. */
async function rawServer(pieces: (string | Buffer)[], then: 'end' | 'hold' = 'end'): Promise<{ url: string; server: ReturnType<typeof createNetServer>; requests: string[] }> {
  const requests: string[] = [];
  const server = createNetServer((socket: Socket) => {
    let head = '';
    socket.on('data', (d: Buffer) => {
      head += d.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      requests.push(head);
      void (async () => {
        for (const piece of pieces) {
          socket.write(piece);
          await new Promise((r) => setTimeout(r, 2));
        }
        if (then === 'end') socket.end();
      })();
    });
    socket.on('error', () => undefined);
  });
  const host = await listen(server);
  return { url: `http://${host}/file`, server, requests };
}

describe('httpGet reads a body into a sink', () => {
  const body = randomBytes(3 * 1024 * 1024 + 12_345);
  let server: Server;
  let base: string;
  const seen: { url: string; headers: IncomingMessage['headers'] }[] = [];
  let handler: (req: IncomingMessage, res: ServerResponse) => void = () => undefined;

  before(async () => {
    server = createServer((req, res) => {
      seen.push({ url: req.url as string, headers: req.headers });
      handler(req, res);
    });
    base = `http://${await listen(server)}`;
  });
  after(() => close(server));

  test('a Content-Length body arrives whole and in order, through a sink that makes it wait', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Length': body.length });
      res.end(body);
    };
    const res = await httpGet(`${base}/a`, opts({ readBufferBytes: 64 * 1024 }));
    assert.equal(res.status, 200);
    assert.equal(res.header('Content-Length'), String(body.length));
    const sink = collector({ pauseEvery: 3 });
    await res.pump(sink);
    assert.ok(sink.waits > 0, 'the sink asked the reader to wait');
    assert.deepEqual(sink.bytes(), body);
  });

  test('reads land in the memory the sink offers, up to the end of the body and no further', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Length': body.length });
      res.end(body);
    };
    const sink = collector({ pauseEvery: 4, regions: true });
    await (await httpGet(`${base}/a`, opts())).pump(sink);
    assert.ok(sink.commits > 10, `${sink.commits} reads into the sink's memory`);
    assert.ok(sink.waits > 0);
    assert.deepEqual(sink.bytes(), body);
  });

  test('a chunked body arrives whole, whatever the chunk sizes', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/octet-stream' });
      void (async () => {
        for (let at = 0, size = 1; at < body.length; size = (size * 7 + 13) % 200_000) {
          const end = Math.min(body.length, at + size + 1);
          if (!res.write(body.subarray(at, end))) await new Promise((r) => res.once('drain', r));
          at = end;
        }
        res.end();
      })();
    };
    const res = await httpGet(`${base}/chunked`, opts());
    assert.equal(res.header('transfer-encoding'), 'chunked');
    const sink = collector({ pauseEvery: 5 });
    await res.pump(sink);
    assert.deepEqual(sink.bytes(), body);
  });

  test('redirects are followed with the Range header; Authorization goes to the first origin only', async () => {
    const cdn = createServer((req, res) => {
      seen.push({ url: `cdn${req.url as string}`, headers: req.headers });
      const start = Number(/^bytes=(\d+)-/.exec(req.headers.range ?? '')?.[1] ?? 0);
      res.writeHead(206, { 'Content-Length': body.length - start, 'Content-Range': `bytes ${start}-${body.length - 1}/${body.length}` });
      res.end(body.subarray(start));
    });
    const cdnHost = await listen(cdn);
    try {
      handler = (req, res) => {
        // A relative redirect on the same origin first (the token stays), then one to the CDN.
        if (req.url === '/resolve') res.writeHead(302, { Location: '/resolve2' }).end();
        else res.writeHead(302, { Location: `http://${cdnHost}/blob?sig=1` }).end('redirecting');
      };
      seen.length = 0;
      const res = await httpGet(`${base}/resolve`, opts({ headers: { Authorization: 'Bearer hf_secret', Range: 'bytes=100-' } }));
      assert.equal(res.status, 206);
      assert.equal(res.url, `http://${cdnHost}/blob?sig=1`);
      const sink = collector();
      await res.pump(sink);
      assert.deepEqual(sink.bytes(), body.subarray(100));
      assert.deepEqual(
        seen.map((s) => [s.url, s.headers.authorization ?? null, s.headers.range]),
        [
          ['/resolve', 'Bearer hf_secret', 'bytes=100-'],
          ['/resolve2', 'Bearer hf_secret', 'bytes=100-'],
          ['cdn/blob?sig=1', null, 'bytes=100-'],
        ],
      );
    } finally {
      await close(cdn);
    }
  });

  test('more than five redirects is a bad answer, not a network failure', async () => {
    handler = (req, res) => res.writeHead(307, { Location: `/r${Number((req.url as string).slice(2) || 0) + 1}` }).end();
    seen.length = 0;
    await assert.rejects(httpGet(`${base}/r0`, opts()), (e: unknown) => e instanceof ModelsError && e.reason === 'HUB_BAD_RESPONSE' && /more than 5 times/.test(e.message));
    assert.equal(seen.length, 6);
  });

  test('a body cut mid-way fails as a network error (retryable), after handing over what came', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Length': body.length });
      res.write(body.subarray(0, 1_000_000), () => setTimeout(() => res.destroy(), 20));
    };
    const res = await httpGet(`${base}/cut`, opts());
    const sink = collector();
    const error = await res.pump(sink).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error instanceof HttpTransportError, String(error));
    assert.ok(error instanceof TypeError && isNetworkError(error));
    assert.match(error.message, /closed after 1000000 bytes of the body/);
    assert.deepEqual(sink.bytes(), body.subarray(0, 1_000_000));
  });

  test('aborting mid-body rejects with the reason and closes the connection', async () => {
    let closed: Promise<void> = Promise.resolve();
    handler = (req, res) => {
      closed = new Promise((r) => req.socket.once('close', () => r()));
      res.writeHead(200, { 'Content-Length': body.length });
      res.write(body.subarray(0, 200_000));
    };
    const controller = new AbortController();
    const res = await httpGet(`${base}/abort`, opts({ signal: controller.signal }));
    const reason = new Error('stop');
    const sink = collector();
    const pumping = res.pump({ push: (b) => (sink.push(b), controller.abort(reason), true), ready: () => sink.ready() });
    await assert.rejects(pumping, (e: unknown) => e === reason);
    await closed;
  });

  test('a server that stops sending fails after the idle timeout, as a network error', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'Content-Length': body.length });
      res.write(body.subarray(0, 1000));
    };
    const res = await httpGet(`${base}/stall`, opts({ idleTimeoutMs: 150 }));
    const error = await res.pump(collector()).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error instanceof HttpTransportError && isNetworkError(error), String(error));
    assert.equal((error.cause as { code?: string }).code, 'ETIMEDOUT');
  });

  test('an error status is returned for the caller to judge; a compressed body is refused', async () => {
    handler = (_req, res) => res.writeHead(404, { 'Content-Type': 'text/plain', 'X-Error-Code': 'EntryNotFound' }).end('not here');
    const res = await httpGet(`${base}/missing`, opts());
    assert.equal(res.status, 404);
    assert.equal(res.header('x-error-code'), 'EntryNotFound');
    res.discard();
    await assert.rejects(res.pump(collector()), /discarded/);

    handler = (_req, res) => res.writeHead(200, { 'Content-Encoding': 'gzip', 'Content-Length': 3 }).end('abc');
    await assert.rejects(httpGet(`${base}/gz`, opts()), (e: unknown) => e instanceof ModelsError && e.reason === 'HUB_BAD_RESPONSE' && /Content-Encoding gzip/.test(e.message));
  });

  test('a refused connection is a network error', async () => {
    const spare = createServer();
    const host = await listen(spare);
    await close(spare);
    const error = await httpGet(`http://${host}/x`, opts()).then(
      () => null,
      (e: unknown) => e,
    );
    assert.ok(error instanceof HttpTransportError && isNetworkError(error), String(error));
    assert.equal((error.cause as { code?: string }).code, 'ECONNREFUSED');
  });
});

describe('httpGet parses what node:http would not send', () => {
  test('a head split into single bytes, after a 103 answer, then a body that ends with the connection', async () => {
    const body = randomBytes(300_000);
    const head = 'HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nX-Repo-Commit: abc\r\nX-Twice: 1\r\nX-Twice: 2\r\n\r\n';
    const { url, server, requests } = await rawServer([...head].map((c) => Buffer.from(c, 'latin1')).concat([body.subarray(0, 1000), body.subarray(1000)]));
    try {
      const res = await httpGet(url, opts({ headers: { Range: 'bytes=0-' } }));
      assert.equal(res.status, 200);
      assert.equal(res.header('x-repo-commit'), 'abc');
      assert.equal(res.header('x-twice'), '1, 2');
      const sink = collector();
      await res.pump(sink);
      assert.deepEqual(sink.bytes(), body);
      assert.match(requests[0] as string, /^GET \/file HTTP\/1\.1\r\n/);
      assert.match(requests[0] as string, /\r\nRange: bytes=0-\r\n/);
      assert.match(requests[0] as string, /\r\nAccept-Encoding: identity\r\n/);
    } finally {
      await close(server);
    }
  });

  test('a small body that came with the head and the connection closed before pump still arrives', async () => {
    const { url, server } = await rawServer(['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello']);
    try {
      const res = await httpGet(url, opts());
      await new Promise((r) => setTimeout(r, 50));
      const sink = collector();
      await res.pump(sink);
      assert.equal(sink.bytes().toString(), 'hello');
    } finally {
      await close(server);
    }
  });

  test('a chunked body with extensions and trailers; a malformed one is a bad answer', async () => {
    const good = await rawServer(['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', '5;ext=1\r\nhel', 'lo\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n'], 'hold');
    const bad = await rawServer(['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', '5\r\nhello!!\r\n0\r\n\r\n'], 'hold');
    try {
      const res = await httpGet(good.url, opts());
      const sink = collector();
      await res.pump(sink);
      assert.equal(sink.bytes().toString(), 'hello world');
      const res2 = await httpGet(bad.url, opts());
      await assert.rejects(res2.pump(collector()), (e: unknown) => e instanceof ModelsError && e.reason === 'HUB_BAD_RESPONSE');
    } finally {
      await close(good.server);
      await close(bad.server);
    }
  });

  test('a connection closed before the head is complete is a network error', async () => {
    const { url, server } = await rawServer(['HTTP/1.1 200 OK\r\nContent-Le']);
    try {
      await assert.rejects(httpGet(url, opts()), (e: unknown) => e instanceof HttpTransportError && isNetworkError(e) && /before its answer was complete/.test(e.message));
    } finally {
      await close(server);
    }
  });
});

describe('httpGet over https', () => {
  let dir: string;
  let cert: Buffer;
  let key: Buffer;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-http-body-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-days', '1', '-subj', '/CN=shoal test', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    cert = await readFile(join(dir, 'cert.pem'));
    key = await readFile(join(dir, 'key.pem'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('a body arrives through TLS checked against the CA given; an unknown certificate is refused', async () => {
    const body = randomBytes(2 * 1024 * 1024 + 7);
    const server = createHttpsServer({ cert, key }, (_req, res) => {
      res.writeHead(200, { 'Content-Length': body.length });
      res.end(body);
    });
    const host = await listen(server);
    try {
      for (const regions of [false, true]) {
        const res = await httpGet(`https://${host}/file`, opts({ tls: { ca: cert } }));
        const sink = collector({ pauseEvery: 4, regions });
        await res.pump(sink);
        assert.deepEqual(sink.bytes(), body);
        assert.equal(sink.commits > 0, regions);
      }
      await assert.rejects(httpGet(`https://${host}/file`, opts()), (e: unknown) => e instanceof HttpTransportError && isNetworkError(e));
    } finally {
      await close(server);
    }
  });
});
