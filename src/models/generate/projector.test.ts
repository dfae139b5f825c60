import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gguf } from '@huggingface/gguf';
import { ensureGeneratedProjector, generateProjector, imageTokens, parseProjectorSpec } from './projector.js';
import { BUILTIN_PROJECTOR_SPECS, TINY_VISION_MODEL_ID, TINY_VISION_MODEL_SPEC, TINY_VISION_PROJECTOR_SPEC } from './builtin.js';
import { GgufSpecError } from './random-model.js';
import { BIAS_VALUE } from './weights.js';

async function withDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-projector-'));
  try {
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

test('the built-in vision model pairs its projector with its text model', () => {
  assert.equal(BUILTIN_PROJECTOR_SPECS[TINY_VISION_MODEL_ID], TINY_VISION_PROJECTOR_SPEC);
  assert.equal(TINY_VISION_PROJECTOR_SPEC.textEmbeddingLength, TINY_VISION_MODEL_SPEC.embeddingLength);
  assert.equal(imageTokens(TINY_VISION_PROJECTOR_SPEC), 16);
});

test('a projector has every key and tensor the clip loader reads, shaped for the text model', async () => {
  await withDir(async (dir) => {
    const path = join(dir, 'mmproj.gguf');
    const size = await generateProjector(TINY_VISION_PROJECTOR_SPEC, path);
    assert.ok(size < 256 * 1024, `tiny: ${size} bytes`);
    const parsed = await gguf(path, { allowLocalFile: true });
    const kv = parsed.metadata as unknown as Record<string, unknown>;
    const spec = TINY_VISION_PROJECTOR_SPEC;
    assert.equal(kv['clip.projector_type'], 'mlp');
    assert.equal(kv['clip.has_vision_encoder'], true);
    assert.equal(kv['clip.vision.image_size'], spec.imageSize);
    assert.equal(kv['clip.vision.patch_size'], spec.patchSize);
    assert.equal(kv['clip.vision.embedding_length'], spec.embeddingLength);
    assert.equal(kv['clip.vision.feed_forward_length'], spec.feedForwardLength);
    assert.equal(kv['clip.vision.block_count'], spec.blockCount);
    assert.equal(kv['clip.vision.attention.head_count'], spec.headCount);
    assert.equal(kv['clip.vision.projection_dim'], spec.textEmbeddingLength);
    assert.equal((kv['clip.vision.image_mean'] as number[]).length, 3);
    assert.equal((kv['clip.vision.image_std'] as number[]).length, 3);
    const shapes = new Map(parsed.tensorInfos.map((t) => [t.name, t.shape.map(Number)]));
    assert.deepEqual(shapes.get('v.patch_embd.weight'), [spec.patchSize, spec.patchSize, 3, spec.embeddingLength]);
    assert.deepEqual(shapes.get('v.position_embd.weight'), [spec.embeddingLength, imageTokens(spec)]);
    for (let il = 0; il < spec.blockCount; il++) {
      for (const name of ['attn_q', 'attn_k', 'attn_v', 'attn_out']) assert.deepEqual(shapes.get(`v.blk.${il}.${name}.weight`), [spec.embeddingLength, spec.embeddingLength]);
      // Rows of ffn_down are not the model width, so clip.cpp does not take them for swapped legacy tensors.
      assert.deepEqual(shapes.get(`v.blk.${il}.ffn_down.weight`), [spec.feedForwardLength, spec.embeddingLength]);
      for (const name of ['ln1.weight', 'ln1.bias', 'ln2.weight', 'ln2.bias']) assert.ok(shapes.has(`v.blk.${il}.${name}`), name);
    }
    assert.deepEqual(shapes.get('mm.0.weight'), [spec.embeddingLength, spec.projectorHiddenLength]);
    // mtmd compares mm.2's rows with the text model's embedding length.
    assert.deepEqual(shapes.get('mm.2.weight'), [spec.projectorHiddenLength, spec.textEmbeddingLength]);
    // The text model's BIAS channel arrives at its value in every image embedding.
    const bias = parsed.tensorInfos.find((t) => t.name === 'mm.2.bias')!;
    const file = await readFile(path);
    const at = Number(parsed.tensorDataOffset) + Number(bias.offset);
    assert.equal(file.readFloatLE(at), BIAS_VALUE);
    assert.equal(file.readFloatLE(at + 4), 0);
  });
});

// The built-in projector's bytes: a change must come with a GENERATOR_VERSION bump (its cache file name carries it).
const TINY_VISION_PROJECTOR_SHA256 = '4c89390f650b60efa0a886950644b4b03813f74fdcb1dd90ee413d6ae800637b';

test('the same spec gives the same bytes (pinned for the built-in); another seed other bytes', async () => {
  await withDir(async (dir) => {
    const hash = async (path: string): Promise<string> => createHash('sha256').update(await readFile(path)).digest('hex');
    await generateProjector(TINY_VISION_PROJECTOR_SPEC, join(dir, 'a.gguf'));
    await ensureGeneratedProjector(TINY_VISION_PROJECTOR_SPEC, join(dir, 'b.gguf'));
    await generateProjector({ ...TINY_VISION_PROJECTOR_SPEC, seed: 2 }, join(dir, 'c.gguf'));
    assert.equal(await hash(join(dir, 'a.gguf')), TINY_VISION_PROJECTOR_SHA256);
    assert.equal(await hash(join(dir, 'b.gguf')), TINY_VISION_PROJECTOR_SHA256);
    assert.notEqual(await hash(join(dir, 'a.gguf')), await hash(join(dir, 'c.gguf')));
  });
});

test('a spec the loader would refuse is refused here, every problem named', () => {
  assert.throws(
    () => parseProjectorSpec({ ...TINY_VISION_PROJECTOR_SPEC, imageSize: 30, headCount: 5, feedForwardLength: 32 }),
    (error: unknown) =>
      error instanceof GgufSpecError && /patchSize/.test(error.message) && /headCount/.test(error.message) && /feedForwardLength/.test(error.message),
  );
  assert.throws(() => parseProjectorSpec({ ...TINY_VISION_PROJECTOR_SPEC, blockCount: 1 }), GgufSpecError);
});
