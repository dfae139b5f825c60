import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TINY_MODEL_SPEC, TINY_THINK_MODEL_SPEC } from '../generate/builtin.js';
import { generateRandomModel, modelSpecForParams, type RandomModelSpec } from '../generate/random-model.js';
import { ggmlByteSize, GgmlType } from '../gguf/quantize.js';
import { factsFromHeader, GgufFactsError, readGgufFacts, type GgufHeader } from './gguf-facts.js';

async function withTempDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-gguf-facts-'));
  try {
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const TYPES = { f32: GgmlType.F32, f16: GgmlType.F16, q8_0: GgmlType.Q8_0, q4_0: GgmlType.Q4_0 } as const;
const ALIGNMENT = 32;
const padded = (bytes: number) => Math.ceil(bytes / ALIGNMENT) * ALIGNMENT;

/** What the generator writes, tensor by tensor (weights.ts): norms in f32, matrices in the spec's type. */
function expectedBytes(spec: RandomModelSpec) {
  const d = spec.embeddingLength;
  const kv = (d / spec.headCount) * spec.headCountKv;
  const ff = spec.feedForwardLength;
  const matrix = (elements: number) => padded(ggmlByteSize(TYPES[spec.tensorType], elements));
  const norm = (elements: number) => padded(ggmlByteSize(GgmlType.F32, elements));
  const layer = norm(d) + matrix(d * d) + 2 * matrix(d * kv) + matrix(d * d) + norm(d) + 2 * matrix(d * ff) + matrix(ff * d);
  return { layer, embedding: matrix(d * spec.vocabSize), output: norm(d) + matrix(d * spec.vocabSize) };
}

test('facts read from generated GGUF files match their specs', async () => {
  await withTempDir(async (dir) => {
    const specs: RandomModelSpec[] = [
      TINY_MODEL_SPEC,
      TINY_THINK_MODEL_SPEC,
      modelSpecForParams(3e6, { tensorType: 'q8_0', contextLength: 2048 }),
      modelSpecForParams(2e6, { tensorType: 'q4_0' }),
      modelSpecForParams(2e6, { tensorType: 'f16', headCountKv: 1 }),
    ];
    for (const [i, spec] of specs.entries()) {
      const path = join(dir, `m${i}.gguf`);
      const written = await generateRandomModel(spec, path);
      const facts = await readGgufFacts(path);
      const what = `${spec.name} ${spec.tensorType}`;
      const expected = expectedBytes(spec);
      assert.equal(facts.architecture, 'llama', what);
      assert.equal(facts.blockCount, spec.blockCount, what);
      assert.equal(facts.headCount, spec.headCount, what);
      assert.equal(facts.headCountKv, spec.headCountKv, what);
      assert.deepEqual(facts.kvHeadsPerLayer, new Array<number>(spec.blockCount).fill(spec.headCountKv), what);
      assert.equal(facts.embeddingLength, spec.embeddingLength, what);
      assert.equal(facts.trainedContext, spec.contextLength, what);
      assert.equal(facts.keyLength, spec.embeddingLength / spec.headCount, what);
      assert.equal(facts.valueLength, spec.embeddingLength / spec.headCount, what);
      assert.equal(facts.vocabSize, spec.vocabSize, what);
      assert.equal(facts.fileBytes, written, what);
      assert.equal(facts.fileBytes, (await stat(path)).size, what);
      assert.deepEqual(facts.layerBytes, new Array<number>(spec.blockCount).fill(expected.layer), what);
      assert.equal(facts.embeddingBytes, expected.embedding, what);
      assert.equal(facts.outputBytes, expected.output, what);
      assert.equal(facts.outputTied, false, what);
      assert.equal(facts.tensorBytes, spec.blockCount * expected.layer + expected.embedding + expected.output, what);
      assert.ok(facts.tensorBytes < facts.fileBytes, `${what}: the header is the rest`);
    }
  });
});

function header(metadata: Record<string, unknown>, tensors: Array<[string, number]> = [['blk.0.attn_q.weight', 0]]): GgufHeader {
  return { metadata, tensorInfos: tensors.map(([name, offset]) => ({ name, offset: BigInt(offset) })), tensorDataOffset: 1000n };
}

const LLAMA = {
  'general.architecture': 'llama',
  'llama.block_count': 2,
  'llama.attention.head_count': 8,
  'llama.embedding_length': 512,
  'llama.context_length': 4096,
};

test('header rules: KV heads default to heads, may vary by layer; key/value lengths override the head size', () => {
  const noGqa = factsFromHeader(header(LLAMA), 2000, 'a.gguf');
  assert.equal(noGqa.headCountKv, 8);
  assert.deepEqual(noGqa.kvHeadsPerLayer, [8, 8]);
  assert.equal(noGqa.keyLength, 64);
  assert.equal(noGqa.vocabSize, null);

  const varied = factsFromHeader(
    header({ ...LLAMA, 'llama.attention.head_count_kv': [4, 0], 'llama.attention.key_length': 192, 'llama.attention.value_length': 128, 'llama.vocab_size': 100 }),
    2000,
    'a.gguf',
  );
  assert.deepEqual(varied.kvHeadsPerLayer, [4, 0]);
  assert.equal(varied.headCountKv, 4);
  assert.equal(varied.keyLength, 192);
  assert.equal(varied.valueLength, 128);
  assert.equal(varied.vocabSize, 100);

  const bigints = factsFromHeader(header({ ...LLAMA, 'llama.context_length': 131072n }), 2000, 'a.gguf');
  assert.equal(bigints.trainedContext, 131072);
});

test('header rules: tensor bytes from offsets, grouped into layers, embeddings and the rest', () => {
  const facts = factsFromHeader(
    header(LLAMA, [
      ['token_embd.weight', 0],
      ['blk.0.attn_q.weight', 100],
      ['blk.0.ffn_up.weight', 160],
      ['blk.1.attn_q.weight', 200],
      ['output_norm.weight', 260],
      ['rope_freqs.weight', 270],
    ]),
    1000 + 300,
    'a.gguf',
  );
  assert.equal(facts.embeddingBytes, 100);
  assert.deepEqual(facts.layerBytes, [100, 60]);
  // output_norm (10) + rope_freqs (30, to the end of the file)
  assert.equal(facts.outputBytes, 40);
  assert.equal(facts.tensorBytes, 300);
  assert.equal(facts.outputTied, true, 'no output.weight: the head reuses token_embd');
});

test('header errors name the file and the key', () => {
  const cases: Array<{ meta: Record<string, unknown>; message: RegExp }> = [
    { meta: { ...LLAMA, 'general.architecture': undefined }, message: /^m\.gguf: general\.architecture is missing/ },
    { meta: { ...LLAMA, 'llama.block_count': undefined }, message: /^m\.gguf: llama\.block_count is missing/ },
    { meta: { ...LLAMA, 'llama.attention.head_count': 0 }, message: /llama\.attention\.head_count is missing or not a positive integer/ },
    { meta: { ...LLAMA, 'llama.attention.head_count_kv': [4] }, message: /must list 2 non-negative counts/ },
    { meta: { ...LLAMA, 'llama.attention.head_count_kv': [0, 0] }, message: /no layer has a KV head/ },
  ];
  for (const c of cases) {
    assert.throws(() => factsFromHeader(header(c.meta), 2000, 'm.gguf'), (error: unknown) => error instanceof GgufFactsError && c.message.test(error.message));
  }
  assert.throws(() => factsFromHeader(header(LLAMA, [['blk.0.x', 500]]), 1200, 'm.gguf'), /truncated/);
});

test('a file that is not GGUF, or is cut short, is a GgufFactsError', async () => {
  await withTempDir(async (dir) => {
    const junk = join(dir, 'junk.gguf');
    await writeFile(junk, 'definitely not a model');
    await assert.rejects(readGgufFacts(junk), (error: unknown) => error instanceof GgufFactsError && error.message.includes('junk.gguf'));
    const cut = join(dir, 'cut.gguf');
    const size = await generateRandomModel(TINY_MODEL_SPEC, cut);
    // Cut in half, later tensors start past the end. (A cut inside the last tensor is not caught here:
    // downloads are verified by SHA-256 before anything reads them.)
    await truncate(cut, Math.floor(size / 2));
    await assert.rejects(readGgufFacts(cut), GgufFactsError);
  });
});
