import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { gguf } from '@huggingface/gguf';
import fc from 'fast-check';
import { fuzzParams } from '../../../test/support/fuzz.js';
import { generateRandomModel, parseModelSpec } from '../generate/random-model.js';
import { factsFromHeader, GgufFactsError, MAX_GGUF_BLOCK_COUNT, readGgufFacts } from './gguf-facts.js';

/**
 * The GGUF header reader reads files from the hub and from the operator's disk: a damaged header is a
 * typed GgufFactsError, found without reading (or allocating) more than the file holds.
 */

let dir: string;
let model: Buffer;
/** Where the tensor data starts: everything before is header. */
let headerBytes: number;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-gguf-fuzz-'));
  const spec = parseModelSpec({ name: 'fuzz', seed: 1, vocabSize: 408, embeddingLength: 32, blockCount: 1, headCount: 2, headCountKv: 1, feedForwardLength: 32, contextLength: 256, ropeFreqBase: 10000, rmsEps: 1e-5, tensorType: 'f32' });
  const path = join(dir, 'model.gguf');
  await generateRandomModel(spec, path);
  model = await readFile(path);
  headerBytes = Number((await gguf(path, { allowLocalFile: true })).tensorDataOffset);
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
async function readsOrRefuses(bytes: Uint8Array): Promise<void> {
  const path = join(dir, `case-${n++}.gguf`);
  await writeFile(path, bytes);
  try {
    await readGgufFacts(path);
  } catch (error) {
    assert.ok(error instanceof GgufFactsError, `not a GgufFactsError: ${String(error)}`);
  } finally {
    await rm(path);
  }
}

describe('GGUF header reader, fuzzed', () => {
  it('a header with bytes flipped or overwritten is read or refused with a GgufFactsError', async () => {
    const edit = fc.record({ at: fc.nat(), value: fc.nat({ max: 255 }), flip: fc.boolean() });
    await fc.assert(
      fc.asyncProperty(fc.array(edit, { minLength: 1, maxLength: 6 }), fc.boolean(), async (edits, truncated) => {
        const bytes = Buffer.from(truncated ? model.subarray(0, headerBytes) : model);
        for (const e of edits) {
          const at = e.at % headerBytes;
          bytes[at] = e.flip ? bytes[at]! ^ (1 << e.value % 8) : e.value;
        }
        await readsOrRefuses(bytes);
      }),
      fuzzParams(150),
    );
  });

  it('any count or length field set to any 64-bit value is refused or read', async () => {
    // The counts (tensors at 8, metadata entries at 16) and the length of the first key (at 24).
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(8, 16, 24), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.nat({ max: model.length }), async (at, value, cut) => {
        const bytes = Buffer.from(model.subarray(0, Math.max(cut, 32)));
        bytes.writeBigUInt64LE(value, at);
        await readsOrRefuses(bytes);
      }),
      fuzzParams(150),
    );
  });

  it('random bytes and cuts of a real file are refused or read', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.uint8Array({ maxLength: 256 }), fc.nat({ max: model.length }).map((cut) => model.subarray(0, cut))), async (bytes) => {
        await readsOrRefuses(bytes);
      }),
      fuzzParams(150),
    );
  });

  it('a header that claims more tensors than the file can hold is refused before it is parsed', async () => {
    // Before the check the parser read ten million zero-filled tensor infos past the end of this 10 KB file.
    const bytes = Buffer.from(model.subarray(0, headerBytes));
    bytes.writeBigUInt64LE(9_999_999n, 8);
    const path = join(dir, 'claims.gguf');
    await writeFile(path, bytes);
    await assert.rejects(readGgufFacts(path), (error: unknown) => error instanceof GgufFactsError && /claims 9999999 tensors/.test(error.message));
  });

  it('a block count past the limit is refused before anything is sized by it', async () => {
    // Before the limit one flipped bit in block_count made arrays of two billion entries (gigabytes).
    const parsed = await gguf(join(dir, 'model.gguf'), { allowLocalFile: true });
    const metadata = { ...(parsed.metadata as unknown as Record<string, unknown>), 'llama.block_count': 2 ** 31 + 1 };
    const header = { metadata, tensorInfos: parsed.tensorInfos, tensorDataOffset: parsed.tensorDataOffset };
    assert.throws(() => factsFromHeader(header, model.length, 'm.gguf'), (error: unknown) => error instanceof GgufFactsError && error.message.includes(`more than the ${MAX_GGUF_BLOCK_COUNT} layers`));
  });
});
