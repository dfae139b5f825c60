import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isShoalError } from '../../common/errors.js';
import { ModelsError } from '../hub/errors.js';
import type { HubFile } from '../hub/gguf-files.js';
import { RetryableError, TRANSFER_WRITE_BLOCK_BYTES, transferFile, type ByteSource, type PartWriter, type TransferArgs } from './transfer.js';

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
    failure: (error) => new ModelsError('PEER_COPY_FAILED', error instanceof Error ? error.message : String(error)),
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
