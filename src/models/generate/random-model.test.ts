import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gguf } from '@huggingface/gguf';
import {
  BUILTIN_MODEL_SPECS,
  ensureGeneratedModel,
  TINY_EOS_MODEL_SPEC,
  TINY_MODEL_SPEC,
  TINY_THINK_MODEL_SPEC,
  TINY_TOOLS_MODEL_SPEC,
} from './builtin.js';
import {
  countParams,
  generateRandomModel,
  GENERATOR_VERSION,
  GgufSpecError,
  modelSpecForParams,
  parseModelSpec,
  speculativePairSpecs,
  type RandomModelSpec,
} from './random-model.js';
import { BEHAVIOUR_TAGS } from './behaviours.js';
import { TokenType } from './vocab.js';
import { GgmlType } from '../gguf/quantize.js';

async function withTempDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-random-model-'));
  try {
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function sha256(path: string): Promise<string> {
  return createHash('sha256').update(await readFile(path)).digest('hex');
}

// The tiny model's bytes, pinned: a change here means every machine would now generate a different
// file (or the recipe changed on purpose, and this should be updated with it).
const TINY_SHA256 = '6608ce99638ccf06b0d661f957bba1f4ecc46e77327690181a9eebc51191c1c2';

test('the same spec generates byte-identical files', async () => {
  await withTempDir(async (dir) => {
    for (const tensorType of ['f32', 'q4_0'] as const) {
      const spec = { ...TINY_MODEL_SPEC, tensorType };
      await generateRandomModel(spec, join(dir, 'a.gguf'));
      await generateRandomModel(spec, join(dir, 'b.gguf'));
      assert.equal(await sha256(join(dir, 'a.gguf')), await sha256(join(dir, 'b.gguf')), tensorType);
    }
    await generateRandomModel(TINY_MODEL_SPEC, join(dir, 'tiny.gguf'));
    assert.equal(await sha256(join(dir, 'tiny.gguf')), TINY_SHA256);
  });
});

// Every built-in model's bytes. A change to any of them must come with a GENERATOR_VERSION bump (the
// cache file names carry it); the plain two must never change, other tests depend on their outputs.
const BUILTIN_SHA256: Record<string, string> = {
  'shoal/tiny': TINY_SHA256,
  'shoal/tiny-eos': '06bd2b54b6d9ccbbc6e8d7770776146231a513576fe0f3499998243efafe87e7',
  'shoal/tiny-think': 'e0c86068126f1baa5791d1113fb802277f6123c3679c362b67def6f24938623e',
  'shoal/tiny-tools': 'b2e440368761e90b9eac6971547ecbabd36342cacbda375bf2181ceb65faa192',
  'shoal/tiny-vision': '3034abd7f850fc3e8f1a13466a64af46874ef1f3bd70a24370a72140f17be641',
};

test('every built-in model has pinned bytes, and GENERATOR_VERSION names the recipes', async () => {
  assert.ok(Number.isSafeInteger(GENERATOR_VERSION) && GENERATOR_VERSION >= 1);
  assert.deepEqual(Object.keys(BUILTIN_MODEL_SPECS).sort(), Object.keys(BUILTIN_SHA256).sort());
  await withTempDir(async (dir) => {
    for (const [id, spec] of Object.entries(BUILTIN_MODEL_SPECS)) {
      const path = join(dir, `${id.replace('/', '--')}.gguf`);
      await generateRandomModel(spec, path);
      assert.equal(await sha256(path), BUILTIN_SHA256[id], id);
    }
  });
});

test('the plain specs serialize as before the behaviour field existed', () => {
  // The built-in store names cache files by a hash of this JSON.
  const plain =
    '"seed":1,"vocabSize":1024,"embeddingLength":64,"blockCount":2,"headCount":4,"headCountKv":2,"feedForwardLength":128,' +
    '"contextLength":4096,"ropeFreqBase":10000,"rmsEps":0.00001,"tensorType":"f32"';
  assert.equal(JSON.stringify(TINY_MODEL_SPEC), `{"name":"shoal/tiny",${plain},"eosBias":"suppressed"}`);
  assert.equal(JSON.stringify(TINY_EOS_MODEL_SPEC), `{"name":"shoal/tiny-eos",${plain},"eosBias":"natural"}`);
  assert.equal(TINY_THINK_MODEL_SPEC.behaviour, 'think');
  assert.equal(TINY_TOOLS_MODEL_SPEC.behaviour, 'tools');
});

test('behaviour models carry their tags as USER_DEFINED tokens and the think template opens a think block', async () => {
  await withTempDir(async (dir) => {
    for (const spec of [TINY_THINK_MODEL_SPEC, TINY_TOOLS_MODEL_SPEC]) {
      const path = join(dir, 'model.gguf');
      await generateRandomModel(spec, path);
      const kv = (await gguf(path, { allowLocalFile: true })).metadata as unknown as Record<string, unknown>;
      const tokens = kv['tokenizer.ggml.tokens'] as string[];
      const types = kv['tokenizer.ggml.token_type'] as number[];
      const tags = BEHAVIOUR_TAGS[spec.behaviour as 'think' | 'tools'];
      assert.equal(tokens.length, spec.vocabSize);
      assert.deepEqual(tokens.slice(-tags.length), tags);
      assert.ok(types.slice(-tags.length).every((type) => type === TokenType.USER_DEFINED));
      assert.equal(kv['tokenizer.ggml.eos_token_id'], 4);
      assert.equal(kv['llama.context_length'], spec.contextLength);
      const template = kv['tokenizer.chat_template'] as string;
      if (spec.behaviour === 'think') assert.match(template, /\{\{ '<\|im_start\|>assistant\\n<think>\\n' \}\}\{%- endif -%\}$/);
      else assert.match(template, /\{\{ '<\|im_start\|>assistant\\n' \}\}\{% endif %\}$/);
    }
  });
});

test('the seed changes the weights', async () => {
  await withTempDir(async (dir) => {
    await generateRandomModel(TINY_MODEL_SPEC, join(dir, 'a.gguf'));
    await generateRandomModel({ ...TINY_MODEL_SPEC, seed: TINY_MODEL_SPEC.seed + 1 }, join(dir, 'b.gguf'));
    assert.notEqual(await sha256(join(dir, 'a.gguf')), await sha256(join(dir, 'b.gguf')));
  });
});

test('generated metadata and tensor infos are what llama.cpp expects', async () => {
  await withTempDir(async (dir) => {
    const spec: RandomModelSpec = { ...TINY_EOS_MODEL_SPEC, tensorType: 'q8_0' };
    const path = join(dir, 'model.gguf');
    const size = await generateRandomModel(spec, path);
    assert.equal((await stat(path)).size, size);
    const parsed = await gguf(path, { allowLocalFile: true, computeParametersCount: true });
    const kv = parsed.metadata as unknown as Record<string, unknown>;
    assert.equal(kv['general.architecture'], 'llama');
    assert.equal(kv['general.name'], spec.name);
    assert.equal(kv['general.alignment'], 32);
    assert.equal(kv['general.file_type'], 7);
    assert.equal(kv['llama.embedding_length'], spec.embeddingLength);
    assert.equal(kv['llama.block_count'], spec.blockCount);
    assert.equal(kv['llama.attention.head_count_kv'], spec.headCountKv);
    assert.equal(kv['llama.rope.dimension_count'], spec.embeddingLength / spec.headCount);
    assert.equal(kv['llama.attention.layer_norm_rms_epsilon'], Math.fround(spec.rmsEps));
    assert.equal(kv['tokenizer.ggml.model'], 'llama');
    assert.equal((kv['tokenizer.ggml.tokens'] as string[]).length, spec.vocabSize);
    assert.equal(kv['tokenizer.ggml.eos_token_id'], 4);
    assert.equal(kv['tokenizer.ggml.bos_token_id'], 1);
    assert.equal(kv['tokenizer.ggml.add_bos_token'], true);
    assert.match(kv['tokenizer.chat_template'] as string, /<\|im_start\|>assistant\\n/);

    const byName = new Map(parsed.tensorInfos.map((t) => [t.name, t]));
    assert.equal(parsed.tensorInfos.length, 3 + 9 * spec.blockCount);
    const kvLength = (spec.embeddingLength / spec.headCount) * spec.headCountKv;
    const expect = (name: string, shape: number[], type: GgmlType): void => {
      const info = byName.get(name);
      assert.ok(info, name);
      assert.deepEqual(info.shape.map(Number), shape, name);
      assert.equal(Number(info.dtype), type, name);
    };
    expect('token_embd.weight', [spec.embeddingLength, spec.vocabSize], GgmlType.Q8_0);
    expect('output.weight', [spec.embeddingLength, spec.vocabSize], GgmlType.Q8_0);
    expect('output_norm.weight', [spec.embeddingLength], GgmlType.F32);
    expect('blk.1.attn_norm.weight', [spec.embeddingLength], GgmlType.F32);
    expect('blk.1.attn_k.weight', [spec.embeddingLength, kvLength], GgmlType.Q8_0);
    expect('blk.1.ffn_down.weight', [spec.feedForwardLength, spec.embeddingLength], GgmlType.Q8_0);
    assert.equal(parsed.parameterCount, countParams(spec));
  });
});

test('spec validation names every problem', () => {
  const check = (overrides: Record<string, unknown>, pattern: RegExp): void => {
    assert.throws(
      () => parseModelSpec({ ...TINY_MODEL_SPEC, ...overrides }),
      (err: unknown) => err instanceof GgufSpecError && err.code === 'GGUF_SPEC_INVALID' && pattern.test(err.message),
    );
  };
  check({ headCount: 3 }, /not divisible by headCount/);
  check({ headCountKv: 3 }, /not divisible by headCountKv/);
  check({ tensorType: 'q4_0', feedForwardLength: 120 }, /feedForwardLength 120 must be a multiple of 32 for q4_0/);
  check({ tensorType: 'q8_0', embeddingLength: 80, headCount: 4, headCountKv: 2 }, /embeddingLength 80 must be a multiple of 32/);
  check({ tensorType: 'q5_0' }, /tensorType/);
  check({ vocabSize: 10 }, /vocabSize/);
  check({ eosBias: 'sometimes' }, /eosBias/);
  check({ behaviour: 'chatty' }, /behaviour/);
  check({ ...TINY_THINK_MODEL_SPEC, eosBias: 'suppressed' }, /ends its replies: eosBias must be 'natural'/);
  check({ ...TINY_TOOLS_MODEL_SPEC, headCountKv: 2, headCount: 4 }, /needs at least 3 kv heads/);
  check({ ...TINY_TOOLS_MODEL_SPEC, blockCount: 1 }, /needs at least 2 blocks/);
  check({ ...TINY_THINK_MODEL_SPEC, contextLength: 8192 }, /measures distances correctly up to 3141 tokens/);
  check({ ...TINY_THINK_MODEL_SPEC, ropeFreqBase: 10000 }, /up to 999 tokens/);
  assert.doesNotThrow(() => parseModelSpec({ ...TINY_MODEL_SPEC, behaviour: 'plain' }));
  assert.doesNotThrow(() => parseModelSpec({ ...TINY_TOOLS_MODEL_SPEC, tensorType: 'q8_0', seed: 9 }));
  check({ extra: 1 }, /extra|unrecognized/i);
  assert.doesNotThrow(() => parseModelSpec({ ...TINY_MODEL_SPEC, tensorType: 'f16', feedForwardLength: 120 }));
});

test('modelSpecForParams picks llama-like shapes near the requested size', () => {
  const spec200 = modelSpecForParams(200e6);
  assert.deepEqual(
    [spec200.embeddingLength, spec200.vocabSize, spec200.feedForwardLength, spec200.headCount, spec200.headCountKv],
    [1024, 32000, 2816, 16, 8],
  );
  for (const params of [1e6, 10e6, 200e6, 1.5e9]) {
    const spec = modelSpecForParams(params);
    assert.ok(Math.abs(countParams(spec) - params) / params < 0.1, `${params}: got ${countParams(spec)}`);
    assert.equal(spec.embeddingLength % 32, 0);
    assert.equal(spec.feedForwardLength % 32, 0);
    assert.doesNotThrow(() => parseModelSpec({ ...spec, tensorType: 'q4_0' }));
  }
  const custom = modelSpecForParams(1e6, { seed: 7, tensorType: 'q8_0', name: 'custom' });
  assert.equal(custom.seed, 7);
  assert.equal(custom.tensorType, 'q8_0');
  assert.equal(custom.name, 'custom');
  assert.throws(() => modelSpecForParams(0), GgufSpecError);
});

test('countParams adds up the tensors', () => {
  // token_embd + output (2 * 1024 * 64), output_norm 64, and per block: 2 norms, q and o (64 * 64),
  // k and v (64 * 32), gate, up and down (64 * 128).
  const perBlock = 2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128;
  assert.equal(countParams(TINY_MODEL_SPEC), 2 * 1024 * 64 + 64 + 2 * perBlock);
});

test('ensureGeneratedModel creates a missing file once and then reuses it', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'nested', 'tiny.gguf');
    assert.equal(await ensureGeneratedModel(TINY_MODEL_SPEC, path), path);
    const first = await stat(path);
    assert.equal(await ensureGeneratedModel(TINY_MODEL_SPEC, path), path);
    assert.equal((await stat(path)).mtimeMs, first.mtimeMs);
  });
});

test('generating the tiny model takes well under a second', async () => {
  await withTempDir(async (dir) => {
    const startedMs = performance.now();
    await generateRandomModel(TINY_MODEL_SPEC, join(dir, 'tiny.gguf'));
    assert.ok(performance.now() - startedMs < 1000);
  });
});

/** Each tensor's bytes by name, read with the offsets the GGUF header gives. */
async function tensorBytes(path: string): Promise<Map<string, Buffer>> {
  const parsed = await gguf(path, { allowLocalFile: true });
  const file = await readFile(path);
  const infos = [...parsed.tensorInfos].sort((a, b) => Number(a.offset - b.offset));
  const base = Number(parsed.tensorDataOffset);
  const out = new Map<string, Buffer>();
  infos.forEach((info, i) => {
    const start = base + Number(info.offset);
    const next = infos[i + 1];
    out.set(info.name, file.subarray(start, next ? base + Number(next.offset) : file.length));
  });
  return out;
}

test('a speculative target is its draft plus blocks that write nothing', async () => {
  await withTempDir(async (dir) => {
    const { target, draft } = speculativePairSpecs({ ...TINY_MODEL_SPEC, tensorType: 'f16' }, 3);
    assert.equal(target.blockCount, draft.blockCount + 3);
    assert.equal(target.inertBlocks, 3);
    await generateRandomModel(target, join(dir, 'target.gguf'));
    await generateRandomModel(draft, join(dir, 'draft.gguf'));
    const t = await tensorBytes(join(dir, 'target.gguf'));
    const d = await tensorBytes(join(dir, 'draft.gguf'));
    // Every working tensor is byte-identical, so the two models compute the same residual stream.
    for (const [name, bytes] of d) assert.ok(bytes.equals(t.get(name) as Buffer), name);
    assert.equal(t.size, d.size + 9 * 3);
    for (let block = draft.blockCount; block < target.blockCount; block++) {
      for (const name of ['attn_output', 'ffn_down']) {
        const bytes = t.get(`blk.${block}.${name}.weight`) as Buffer;
        assert.ok(bytes.every((b) => b === 0), `blk.${block}.${name} is zero`);
      }
      // The rest is random, so the inert blocks cost what working ones do.
      assert.ok(!(t.get(`blk.${block}.ffn_up.weight`) as Buffer).every((b) => b === 0));
    }
  });
});

test('inertBlocks must leave a working block and apply to plain models only', () => {
  assert.throws(() => parseModelSpec({ ...TINY_MODEL_SPEC, inertBlocks: TINY_MODEL_SPEC.blockCount }), /inertBlocks.*at least one working block/);
  assert.throws(() => parseModelSpec({ ...TINY_THINK_MODEL_SPEC, blockCount: 4, inertBlocks: 1 }), /plain models only/);
  assert.throws(() => speculativePairSpecs({ ...TINY_MODEL_SPEC, blockCount: 3, inertBlocks: 1 }, 2), /no inertBlocks of its own/);
});
