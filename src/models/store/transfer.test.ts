import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { errorMessage, isShoalError } from '../../common/errors.js';
import { resolveHubOptions } from '../hub/endpoint.js';
import { ModelsError } from '../hub/errors.js';
import type { HubFile } from '../hub/gguf-files.js';
import { hubSource, RetryableError, TRANSFER_WRITE_BLOCK_BYTES, transferFile, type ByteSource, type PartWriter, type TransferArgs } from './transfer.js';

// The part file writer against the real file system, with byte sources over a buffer: several write
// blocks per file, odd chunk sizes, failures and cancellation mid-block. What is asserted is what a
// resume relies on: the part file holds exactly the bytes accepted so far, and progress never reports
// a byte the part file does not hold.

/** Bytes of the file: a little over two and a half write blocks, not a multiple of any chunk size. */
const SIZE = 2 * TRANSFER_WRITE_BLOCK_BYTES + 1_234_567;
/** Odd, so chunks straddle block boundaries. */
const CHUNK = 100_003;

interface Attempt {
  offset: number;
  delivered: number;
}

/**
 * A source serving `bytes` from the writer's position in CHUNK chunks (fresh memory each, as a
 * network source hands over), calling `during` after each chunk: it may throw to end the attempt.
 */
function bufferSource(bytes: Uint8Array, during: (attempt: Attempt, attempts: Attempt[]) => void = () => undefined): ByteSource & { attempts: Attempt[] } {
  const attempts: Attempt[] = [];
  return {
    name: 'buffer test',
    verb: 'copying',
    badAnswer: 'PEER_COPY_FAILED',
    attempts,
    fetch: async (file: HubFile, writer: PartWriter) => {
      const attempt = { offset: writer.position, delivered: 0 };
      attempts.push(attempt);
      for (let at = writer.position; at < file.size; at += CHUNK) {
        const chunk = Uint8Array.from(bytes.subarray(at, Math.min(file.size, at + CHUNK)));
        await writer.write(chunk);
        attempt.delivered += chunk.length;
        during(attempt, attempts);
      }
    },
    retryable: (error) => error instanceof RetryableError,
    failure: (error) => new ModelsError('PEER_COPY_FAILED', errorMessage(error)),
  };
}

describe('transferFile writes in blocks and keeps the part file exact', () => {
  let dir: string;
  let bytes: Buffer;
  let file: HubFile;
  let counter = 0;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-transfer-'));
    bytes = randomBytes(SIZE);
    file = { path: 'Blocks-Q4_K_M.gguf', size: SIZE, sha256: createHash('sha256').update(bytes).digest('hex'), gitOid: null };
  });

  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  function args(source: ByteSource, extra: Partial<TransferArgs> = {}): TransferArgs & { finalPath: string; partPath: string } {
    const finalPath = join(dir, `file-${counter++}.gguf`);
    return { source, repo: 'acme/Blocks-GGUF', revision: 'a'.repeat(40), file, finalPath, partPath: `${finalPath}.part`, signal: new AbortController().signal, retries: 2, retryDelayMs: 1, ...extra };
  }

  test('a file of several blocks arrives whole; every progress report is on disk when it is made', async () => {
    const reports: { delta: number; onDisk: number; partSize: number }[] = [];
    const a = args(bufferSource(bytes));
    await transferFile({ ...a, onBytes: (delta, onDisk) => reports.push({ delta, onDisk, partSize: statSync(a.partPath).size }) });
    assert.deepEqual(await readFile(a.finalPath), bytes);
    assert.ok(reports.length >= 3, `${reports.length} reports for ${SIZE} bytes`);
    for (const r of reports) assert.ok(r.partSize >= r.onDisk, `progress said ${r.onDisk} bytes on disk, the part file had ${r.partSize}`);
    assert.equal(reports.reduce((s, r) => s + r.delta, 0), SIZE);
    assert.equal(reports[reports.length - 1]?.onDisk, SIZE);
  });

  test('a cut mid-block: what arrived is written before the retry, which continues exactly there', async () => {
    const cutAt = TRANSFER_WRITE_BLOCK_BYTES + 5 * CHUNK;
    let partAtCut = -1;
    const a = args(bufferSource(bytes, (attempt, attempts) => {
      if (attempts.length === 1 && attempt.delivered >= cutAt) throw new RetryableError('the connection was cut');
    }));
    const source = a.source as ReturnType<typeof bufferSource>;
    await transferFile({ ...a, onRetry: () => (partAtCut = statSync(a.partPath).size) });
    assert.deepEqual(await readFile(a.finalPath), bytes);
    const delivered = source.attempts[0]?.delivered as number;
    assert.ok(delivered >= cutAt && delivered % TRANSFER_WRITE_BLOCK_BYTES !== 0);
    assert.equal(partAtCut, delivered, 'the part file holds every byte accepted before the cut');
    assert.deepEqual(source.attempts.map((t) => t.offset), [0, delivered]);
  });

  test('cancelled mid-block: the part file keeps what arrived, and a later transfer resumes from its size', async () => {
    const controller = new AbortController();
    const stopAt = TRANSFER_WRITE_BLOCK_BYTES + 7 * CHUNK;
    const a = args(bufferSource(bytes, (attempt) => {
      if (attempt.delivered >= stopAt) {
        controller.abort();
        throw new DOMException('aborted', 'AbortError');
      }
    }), { signal: controller.signal });
    await assert.rejects(transferFile(a), (e: unknown) => isShoalError(e) && e.code === 'CANCELLED');
    const kept = (await stat(a.partPath)).size;
    assert.equal(kept, (a.source as ReturnType<typeof bufferSource>).attempts[0]?.delivered);

    const again = bufferSource(bytes);
    await transferFile({ ...a, source: again, signal: new AbortController().signal });
    assert.deepEqual(again.attempts.map((t) => t.offset), [kept]);
    assert.deepEqual(await readFile(a.finalPath), bytes);
  });

  test('a source that starts over (a server that ignored Range) empties the part file mid-block and still verifies', async () => {
    const a = args(bufferSource(bytes));
    // A part file from an earlier attempt, not on a block boundary.
    await writeFile(a.partPath, bytes.subarray(0, 3 * CHUNK));
    const source: ByteSource = {
      ...a.source,
      fetch: async (f, writer) => {
        assert.equal(writer.position, 3 * CHUNK);
        await writer.write(Uint8Array.from(bytes.subarray(3 * CHUNK, 4 * CHUNK)));
        await writer.restart();
        for (let at = 0; at < f.size; at += CHUNK) await writer.write(Uint8Array.from(bytes.subarray(at, Math.min(f.size, at + CHUNK))));
      },
    };
    await transferFile({ ...a, source });
    assert.deepEqual(await readFile(a.finalPath), bytes);
  });

  test('a disk that is full (the kernel says ENOSPC: /dev/full) fails the transfer with INSUFFICIENT_DISK, not a retry', async () => {
    const a = args(bufferSource(bytes));
    let retries = 0;
    await assert.rejects(
      transferFile({ ...a, finalPath: join(dir, 'never.gguf'), partPath: '/dev/full', onRetry: () => (retries += 1) }),
      (e: unknown) => e instanceof ModelsError && e.reason === 'INSUFFICIENT_DISK' && (e.cause as { code?: string }).code === 'ENOSPC',
    );
    assert.equal(retries, 0);
    assert.equal((a.source as ReturnType<typeof bufferSource>).attempts.length, 1);
  });

  test('bytes past the size are refused, and what came before them stays in the part file', async () => {
    const a = args(bufferSource(bytes));
    const source: ByteSource = {
      ...a.source,
      fetch: async (f, writer) => {
        for (let at = 0; at < f.size; at += CHUNK) await writer.write(Uint8Array.from(bytes.subarray(at, Math.min(f.size, at + CHUNK))));
        await writer.write(new Uint8Array(1));
      },
    };
    await assert.rejects(transferFile({ ...a, source }), (e: unknown) => e instanceof ModelsError && e.reason === 'PEER_COPY_FAILED' && /sent more than/.test(e.message));
    assert.equal((await stat(a.partPath)).size, SIZE);
  });
});

// The hub source end to end against real servers: a hub whose resolve route redirects to a CDN on
// another origin, as huggingface.co does, and a CDN that can cut a body or ignore Range.
describe('hubSource downloads through the resolve redirect', () => {
  const REPO = 'acme/Blocks-GGUF';
  const REV = 'b'.repeat(40);
  let dir: string;
  let bytes: Buffer;
  let file: HubFile;
  let hubServer: Server;
  let cdnServer: Server;
  let endpoint: string;
  let counter = 0;
  const hubSeen: IncomingHttpHeaders[] = [];
  /** The CDN's GETs of the body (not the 1-byte probes). */
  const cdnGets: { range: string | null; authorization: string | null; userAgent: string | null; status: number }[] = [];
  const cdn = { cutNextAfter: null as number | null, ignoreRange: false };

  function listen(server: Server): Promise<string> {
    return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)));
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-transfer-hub-'));
    bytes = randomBytes(3 * TRANSFER_WRITE_BLOCK_BYTES + 54_321);
    const sha = createHash('sha256').update(bytes).digest('hex');
    file = { path: 'Blocks-Q4_K_M.gguf', size: bytes.length, sha256: sha, gitOid: null };
    cdnServer = createServer((req, res) => {
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
      const probe = req.headers.range === 'bytes=0-0';
      const partial = range !== null && (probe || !cdn.ignoreRange);
      const start = partial ? Number(range[1]) : 0;
      const end = partial && range[2] !== '' ? Number(range[2]) : bytes.length - 1;
      const status = partial ? 206 : 200;
      if (!probe) cdnGets.push({ range: req.headers.range ?? null, authorization: req.headers.authorization ?? null, userAgent: req.headers['user-agent'] ?? null, status });
      res.writeHead(status, {
        'Content-Length': end - start + 1,
        ETag: `"${sha}"`,
        'Accept-Ranges': 'bytes',
        ...(partial ? { 'Content-Range': `bytes ${start}-${end}/${bytes.length}` } : {}),
      });
      const body = bytes.subarray(start, end + 1);
      if (!probe && cdn.cutNextAfter !== null) {
        const cut = cdn.cutNextAfter;
        cdn.cutNextAfter = null;
        res.write(body.subarray(0, cut), () => setTimeout(() => res.destroy(), 20));
        return;
      }
      res.end(body);
    });
    const cdnUrl = await listen(cdnServer);
    hubServer = createServer((req, res) => {
      hubSeen.push(req.headers);
      if (req.url !== `/${REPO}/resolve/${REV}/${file.path}`) return void res.writeHead(404, { 'X-Error-Code': 'EntryNotFound' }).end();
      res.writeHead(302, { Location: `${cdnUrl}/blobs/${sha}?signature=x`, 'X-Repo-Commit': REV }).end();
    });
    endpoint = await listen(hubServer);
  });

  after(async () => {
    hubServer.closeAllConnections();
    cdnServer.closeAllConnections();
    await new Promise((r) => hubServer.close(r));
    await new Promise((r) => cdnServer.close(r));
    await rm(dir, { recursive: true, force: true });
  });

  function args(source: ByteSource, extra: Partial<TransferArgs> = {}): TransferArgs & { finalPath: string; partPath: string } {
    const finalPath = join(dir, `file-${counter++}.gguf`);
    hubSeen.length = 0;
    cdnGets.length = 0;
    return { source, repo: REPO, revision: REV, file, finalPath, partPath: `${finalPath}.part`, signal: new AbortController().signal, retries: 2, retryDelayMs: 1, ...extra };
  }

  test('the token goes to the hub only; a body cut mid-way is retried from the part file\'s end', async () => {
    const hub = resolveHubOptions({ endpoint, accessToken: 'hf_test_token' }, {});
    const a = args(hubSource(hub, REPO, REV));
    cdn.cutNextAfter = TRANSFER_WRITE_BLOCK_BYTES + 300_001;
    let partAtRetry = -1;
    await transferFile({ ...a, onRetry: (_attempt, error) => ((partAtRetry = statSync(a.partPath).size), assert.ok(error instanceof TypeError, String(error))) });
    assert.deepEqual(await readFile(a.finalPath), bytes);
    assert.ok(partAtRetry > 0 && partAtRetry <= TRANSFER_WRITE_BLOCK_BYTES + 300_001, `part file at the retry: ${partAtRetry}`);
    assert.deepEqual(
      cdnGets.map((g) => [g.range, g.authorization, g.status]),
      [
        [null, null, 200],
        [`bytes=${partAtRetry}-${bytes.length - 1}`, null, 206],
      ],
    );
    // The body is read by Shoal's own GET (http-body.ts), not by the global fetch.
    assert.deepEqual(cdnGets.map((g) => g.userAgent), ['shoal', 'shoal']);
    assert.ok(hubSeen.length >= 4 && hubSeen.every((h) => h.authorization === 'Bearer hf_test_token'), 'every request to the hub carried the token');
  });

  test('a CDN that ignores Range on a resume sends it all again: the part file starts over and verifies', async () => {
    const hub = resolveHubOptions({ endpoint }, {});
    const a = args(hubSource(hub, REPO, REV));
    await writeFile(a.partPath, bytes.subarray(0, 1_000_003));
    cdn.ignoreRange = true;
    try {
      await transferFile(a);
    } finally {
      cdn.ignoreRange = false;
    }
    assert.deepEqual(await readFile(a.finalPath), bytes);
    assert.deepEqual(cdnGets.map((g) => [g.range, g.status]), [[`bytes=1000003-${bytes.length - 1}`, 200]]);
  });

  test('a fetch given in the hub options carries the body too', async () => {
    const urls: string[] = [];
    const counting: typeof fetch = (input, init) => {
      urls.push(String(input));
      return fetch(input, init);
    };
    const hub = resolveHubOptions({ endpoint, fetch: counting }, {});
    const a = args(hubSource(hub, REPO, REV));
    await transferFile(a);
    assert.deepEqual(await readFile(a.finalPath), bytes);
    assert.equal(urls.length, 2, 'the probe and the body');
    assert.equal(cdnGets.length, 1);
    assert.notEqual(cdnGets[0]?.userAgent, 'shoal');
  });
});
