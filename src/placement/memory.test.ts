import { test } from 'node:test';
import assert from 'node:assert/strict';
import { factsA, GiB, MiB } from './fixtures.test-support.js';
import {
  admits,
  contextCeiling,
  estimateMemory,
  FIT_MARGIN_BYTES,
  fullShare,
  kvBytesPerCell,
  OVERHEAD_FLOOR_BYTES,
  requiredFreeBytes,
  type KvCacheType,
} from './memory.js';

test('full model A at 4096 tokens, one sequence: every term by hand', () => {
  const facts = factsA();
  const e = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 1 });
  // weights  = 32 × 100 MiB + 64 MiB embeddings + 128 MiB output = 3392 MiB = 3,556,769,792 B
  assert.equal(e.weightsBytes, 3_556_769_792);
  // KV       = 32 layers × (128 + 128) × 8 KV heads × 2 B = 131,072 B/token; × 4096 tokens = 512 MiB
  assert.equal(e.kvBytes, 536_870_912);
  // logits   = 32000 vocab × 512 micro-batch × 4 B = 65,536,000 B
  assert.equal(e.outputWorkspaceBytes, 65_536_000);
  // overhead = ceil(10% × 3,556,769,792) = 355,676,980 B
  assert.equal(e.overheadBytes, 355_676_980);
  // floor    = 256 MiB = 268,435,456 B
  assert.equal(e.floorBytes, OVERHEAD_FLOOR_BYTES);
  assert.equal(e.floorBytes, 268_435_456);
  // total    = 3,556,769,792 + 536,870,912 + 65,536,000 + 355,676,980 + 268,435,456 = 4,783,289,140
  assert.equal(e.totalBytes, 4_783_289_140);
  assert.equal(e.kvCells, 4096);
  assert.ok(e.arithmetic.some((line) => line.startsWith('KV 512 MiB')), e.arithmetic.join('\n'));
});

test('an exact fit is refused; the margin is kept strictly', () => {
  const facts = factsA();
  const e = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 1 });
  // admitted iff total + 64 MiB < free: 4,783,289,140 + 67,108,864 = 4,850,398,004
  assert.equal(FIT_MARGIN_BYTES, 67_108_864);
  assert.equal(admits(e, 4_783_289_140), false, 'weights-equal-free is refused');
  assert.equal(admits(e, 4_850_398_004), false, 'exactly the margin is refused');
  assert.equal(admits(e, 4_850_398_005), true);
  assert.equal(requiredFreeBytes(e), 4_850_398_005);
});

test('KV follows llama.cpp: KV heads not query heads (GQA), padded to 256, × sequences, by cache type', () => {
  const facts = factsA();
  const cases: Array<{ what: string; ctx: number; seqs: number; type: KvCacheType; heads?: number; expected: number }> = [
    // 131,072 B/token × 4096 × 2 sequences = 1 GiB
    { what: 'two sequences double it', ctx: 4096, seqs: 2, type: 'f16', expected: GiB },
    // 1000 tokens pad to 1024 cells: 131,072 × 1024 = 128 MiB
    { what: 'context padded to 256 cells', ctx: 1000, seqs: 1, type: 'f16', expected: 128 * MiB },
    // f32: 4 B/element → 262,144 B/token × 4096 = 1 GiB
    { what: 'f32 cache', ctx: 4096, seqs: 1, type: 'f32', expected: GiB },
    // q8_0: 65,536 elements/token × 34/32 B = 69,632 B/token × 4096 = 285,212,672
    { what: 'q8_0 cache', ctx: 4096, seqs: 1, type: 'q8_0', expected: 285_212_672 },
    // q4_0: 65,536 × 18/32 = 36,864 B/token × 4096 = 150,994,944
    { what: 'q4_0 cache', ctx: 4096, seqs: 1, type: 'q4_0', expected: 150_994_944 },
    // without GQA (32 KV heads): 4× the 8-head figure, 2 GiB
    { what: 'no GQA costs 4x', ctx: 4096, seqs: 1, type: 'f16', heads: 32, expected: 2 * GiB },
  ];
  for (const c of cases) {
    const f = c.heads === undefined ? facts : factsA({ headCountKv: c.heads, kvHeadsPerLayer: new Array<number>(32).fill(c.heads) });
    const e = estimateMemory(f, fullShare(f), { contextTokens: c.ctx, sequences: c.seqs, kvCacheType: c.type });
    assert.equal(e.kvBytes, c.expected, c.what);
  }
});

test('the tiny model spec: 2 layers × (16 + 16) × 2 KV heads × 2 B = 256 B/token, 1 MiB at 4096', () => {
  const tiny = factsA({
    blockCount: 2,
    headCount: 4,
    headCountKv: 2,
    kvHeadsPerLayer: [2, 2],
    keyLength: 16,
    valueLength: 16,
    embeddingLength: 64,
    layerBytes: [0, 0],
  });
  assert.equal(kvBytesPerCell(tiny, fullShare(tiny)), 256);
  assert.equal(estimateMemory(tiny, fullShare(tiny), { contextTokens: 4096, sequences: 1 }).kvBytes, MiB);
});

test('a share counts only its layers; the output holder adds embeddings, head and logits workspace', () => {
  const facts = factsA();
  // donor: layers 0-12 = 13 × 100 MiB = 1300 MiB; KV 13 × 4 KiB/token × 4096 = 208 MiB;
  // overhead 130 MiB; floor 256 MiB → 1894 MiB
  const donor = estimateMemory(facts, { firstLayer: 0, layerCount: 13, holdsOutput: false }, { contextTokens: 4096, sequences: 1 });
  assert.equal(donor.weightsBytes, 1300 * MiB);
  assert.equal(donor.kvBytes, 208 * MiB);
  assert.equal(donor.outputWorkspaceBytes, 0);
  assert.equal(donor.overheadBytes, 130 * MiB);
  assert.equal(donor.totalBytes, 1894 * MiB);
  // driver: layers 13-31 = 1900 MiB + 192 MiB embeddings/head = 2092 MiB; KV 19 × 16 MiB = 304 MiB
  const driver = estimateMemory(facts, { firstLayer: 13, layerCount: 19, holdsOutput: true }, { contextTokens: 4096, sequences: 1 });
  assert.equal(driver.weightsBytes, 2092 * MiB);
  assert.equal(driver.kvBytes, 304 * MiB);
  assert.equal(driver.outputWorkspaceBytes, 65_536_000);
  // The two shares add up to the whole model's weights and KV.
  const full = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 1 });
  assert.equal(donor.weightsBytes + driver.weightsBytes, full.weightsBytes);
  assert.equal(donor.kvBytes + driver.kvBytes, full.kvBytes);
  assert.throws(() => estimateMemory(facts, { firstLayer: 30, layerCount: 3, holdsOutput: false }, { contextTokens: 1, sequences: 1 }), RangeError);
});

test('per-layer KV heads are summed layer by layer', () => {
  // 4 layers with 8, 8, 0, 4 KV heads: (128 + 128) × 20 × 2 B = 10,240 B/token
  const facts = factsA({ blockCount: 4, kvHeadsPerLayer: [8, 8, 0, 4], layerBytes: [MiB, MiB, MiB, MiB] });
  assert.equal(kvBytesPerCell(facts, fullShare(facts)), 10_240);
  assert.equal(kvBytesPerCell(facts, { firstLayer: 2, layerCount: 2, holdsOutput: false }), 2048);
});

test('context ceiling: the largest multiple of 256 that fits, capped at the trained context', () => {
  // Fixed part of model A (no KV) = 3,556,769,792 + 65,536,000 + 355,676,980 + 268,435,456 = 4,246,418,228.
  // On 6 GiB (6,442,450,944): room = 6,442,450,944 − 67,108,864 margin − 4,246,418,228 − 1 = 2,128,923,851.
  const long = factsA({ trainedContext: 32768 });
  const cases = [
    // 2,128,923,851 / 131,072 B/token = 16,242.4 → 16,128 (63 × 256)
    { what: 'one sequence', facts: long, free: 6 * GiB, parallel: 1, expected: 16_128 },
    // 2,128,923,851 / 262,144 = 8,121.2 → 7,936 (31 × 256)
    { what: 'two sequences halve it', facts: long, free: 6 * GiB, parallel: 2, expected: 7_936 },
    // plenty of memory: capped at the trained 8192
    { what: 'capped at trained', facts: factsA(), free: 64 * GiB, parallel: 1, expected: 8192 },
    // trained 1000 rounds down to 768
    { what: 'trained rounded down to 256', facts: factsA({ trainedContext: 1000 }), free: 64 * GiB, parallel: 1, expected: 768 },
    // 4 GiB cannot even hold the fixed part (4,246,418,228 > 4,294,967,296 − 67,108,864)
    { what: 'nothing fits', facts: long, free: 4 * GiB, parallel: 1, expected: 0 },
  ];
  for (const c of cases) {
    const ceiling = contextCeiling(c.facts, c.free, c.parallel);
    assert.equal(ceiling, c.expected, c.what);
    if (ceiling > 0) {
      const fits = (ctx: number) => admits(estimateMemory(c.facts, fullShare(c.facts), { contextTokens: ctx, sequences: c.parallel }), c.free);
      assert.ok(fits(ceiling), `${c.what}: the ceiling itself fits`);
      if (ceiling + 256 <= Math.floor(c.facts.trainedContext / 256) * 256) assert.ok(!fits(ceiling + 256), `${c.what}: one step more does not`);
    }
  }
});

test('context ceiling of a share: a donor holding 13 layers on 2 GiB', () => {
  const facts = factsA({ trainedContext: 65536 });
  // fixed = 1300 MiB + 130 MiB + 256 MiB = 1686 MiB; room = 2048 − 64 − 1686 MiB − 1 B ≈ 298 MiB;
  // KV 13 × 4 KiB = 52 KiB/token → 298 MiB / 52 KiB = 5868.3 → 5632 (22 × 256)
  assert.equal(contextCeiling(facts, 2 * GiB, 1, { share: { firstLayer: 0, layerCount: 13, holdsOutput: false } }), 5632);
});

test('flash attention off adds the attention scores, which the ceiling counts per token too', () => {
  const facts = factsA({ trainedContext: 32768 });
  const on = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 2 });
  const off = estimateMemory(facts, fullShare(facts), { contextTokens: 4096, sequences: 2, flashAttention: 'off' });
  assert.equal(on.attentionScoresBytes, 0);
  // 8192 cells × 512 micro-batch × 32 heads × 4 B = 512 MiB
  assert.equal(off.attentionScoresBytes, 512 * MiB);
  assert.equal(off.totalBytes - on.totalBytes, 512 * MiB);
  assert.ok(off.arithmetic.some((line) => /attention scores 512 MiB/.test(line)), off.arithmetic.join('\n'));
  // A donor share without layers computes no attention.
  assert.equal(estimateMemory(facts, { firstLayer: 0, layerCount: 0, holdsOutput: true }, { contextTokens: 4096, sequences: 1, flashAttention: 'off' }).attentionScoresBytes, 0);
  // Per token: 128 KiB of KV + 64 KiB of scores. Room on 6 GiB ≈ 2,128,923,851 B → 10,828 → 10,752
  const ceiling = contextCeiling(facts, 6 * GiB, 1, { flashAttention: 'off' });
  assert.equal(ceiling, 10_752);
  const fits = (ctx: number) => admits(estimateMemory(facts, fullShare(facts), { contextTokens: ctx, sequences: 1, flashAttention: 'off' }), 6 * GiB);
  assert.ok(fits(ceiling) && !fits(ceiling + 256));
});

test('a quantized KV cache raises the ceiling by its size ratio', () => {
  const facts = factsA({ trainedContext: 131072 });
  // 2,128,923,851 B of room on 6 GiB; q8_0 costs 68 KiB/token (34/64 of f16), q4_0 36 KiB
  assert.equal(contextCeiling(facts, 6 * GiB, 1, { kvCacheType: 'q8_0' }), 30_464);
  assert.equal(contextCeiling(facts, 6 * GiB, 1, { kvCacheType: 'q4_0' }), 57_600);
});
