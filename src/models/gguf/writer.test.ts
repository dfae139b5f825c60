import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gguf, GGUFValueType } from '@huggingface/gguf';
import { encode, GgmlType } from './quantize.js';
import { gv, writeGguf, GgufWriteError, type GgufFile, type GgufTensor } from './writer.js';

async function withTempDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-gguf-'));
  try {
    await run(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function ramp(length: number, scale: number): Float32Array {
  const values = new Float32Array(length);
  for (let i = 0; i < length; i++) values[i] = Math.fround(((i % 17) - 8) * scale);
  return values;
}

/** A tensor whose data arrives in two chunks, to exercise chunked writes. */
function tensor(name: string, dims: number[], type: GgmlType, values: Float32Array): GgufTensor & { bytes: Uint8Array } {
  const bytes = encode(type, values);
  const half = Math.floor(bytes.length / 2);
  return { name, dims, type, bytes, data: () => [bytes.subarray(0, half), bytes.subarray(half)] };
}

const TENSORS = [
  tensor('a.f32', [3], GgmlType.F32, ramp(3, 0.5)),
  tensor('b.f16', [5, 3], GgmlType.F16, ramp(15, 0.25)),
  tensor('c.q8_0', [64, 2], GgmlType.Q8_0, ramp(128, 0.1)),
  tensor('d.q4_0', [32, 3, 2], GgmlType.Q4_0, ramp(192, 0.3)),
];

const FILE: GgufFile = {
  metadata: [
    ['general.architecture', gv.string('llama')],
    ['general.name', gv.string('test ✓ model')],
    ['test.u8', gv.u8(255)],
    ['test.i8', gv.i8(-128)],
    ['test.u16', gv.u16(65535)],
    ['test.i16', gv.i16(-32768)],
    ['test.u32', gv.u32(4294967295)],
    ['test.i32', gv.i32(-2147483648)],
    ['test.f32', gv.f32(0.5)],
    ['test.f64', gv.f64(1 / 3)],
    ['test.bool', gv.bool(true)],
    ['test.u64', gv.u64(2n ** 64n - 1n)],
    ['test.i64', gv.i64(-(2n ** 63n))],
    ['test.strings', gv.strings(['', 'a', '▁word'])],
    ['test.f32s', gv.f32s([1.5, -2])],
    ['test.i32s', gv.i32s([1, -1, 7])],
    ['test.empty', gv.i32s([])],
  ],
  tensors: TENSORS,
};

test('a written file round-trips through @huggingface/gguf', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'model.gguf');
    const progress: Array<[number, number]> = [];
    const size = await writeGguf(path, FILE, { onProgress: (written, total) => progress.push([written, total]) });
    assert.equal((await stat(path)).size, size);
    assert.deepEqual(progress.at(-1), [size, size], 'progress ends at the planned total');

    const parsed = await gguf(path, { allowLocalFile: true, typedMetadata: true });
    const { metadata, typedMetadata } = parsed;
    assert.equal(metadata.version, 3);
    assert.equal(metadata.tensor_count, 4n);
    assert.equal(metadata.kv_count, BigInt(FILE.metadata.length));
    const kv = metadata as unknown as Record<string, unknown>;
    assert.equal(kv['general.name'], 'test ✓ model');
    assert.equal(kv['test.u8'], 255);
    assert.equal(kv['test.i8'], -128);
    assert.equal(kv['test.u16'], 65535);
    assert.equal(kv['test.i16'], -32768);
    assert.equal(kv['test.u32'], 4294967295);
    assert.equal(kv['test.i32'], -2147483648);
    assert.equal(kv['test.f32'], 0.5);
    assert.equal(kv['test.f64'], 1 / 3);
    assert.equal(kv['test.bool'], true);
    assert.equal(kv['test.u64'], 2n ** 64n - 1n);
    assert.equal(kv['test.i64'], -(2n ** 63n));
    assert.deepEqual(kv['test.strings'], ['', 'a', '▁word']);
    assert.deepEqual(kv['test.f32s'], [1.5, -2]);
    assert.deepEqual(kv['test.i32s'], [1, -1, 7]);
    assert.deepEqual(kv['test.empty'], []);
    assert.equal(typedMetadata['test.u64']?.type, GGUFValueType.UINT64);
    assert.equal(typedMetadata['test.f32s']?.subType, GGUFValueType.FLOAT32);
    assert.equal(typedMetadata['test.i32s']?.subType, GGUFValueType.INT32);

    assert.deepEqual(
      parsed.tensorInfos.map((t) => [t.name, t.n_dims, t.shape.map(Number), Number(t.dtype)]),
      TENSORS.map((t) => [t.name, t.dims.length, t.dims, t.type]),
    );

    const file = await readFile(path);
    const dataStart = Number(parsed.tensorDataOffset);
    assert.equal(dataStart % 32, 0);
    for (const [i, info] of parsed.tensorInfos.entries()) {
      const offset = Number(info.offset);
      assert.equal(offset % 32, 0, `${info.name} data is aligned`);
      const expected = TENSORS[i]!.bytes;
      assert.deepEqual(file.subarray(dataStart + offset, dataStart + offset + expected.length), Buffer.from(expected));
    }
    assert.equal(size % 32, 0, 'the last tensor is padded too');
  });
});

test('general.alignment sets the data alignment', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'aligned.gguf');
    await writeGguf(path, { metadata: [['general.alignment', gv.u32(256)]], tensors: TENSORS });
    const parsed = await gguf(path, { allowLocalFile: true });
    assert.equal(Number(parsed.tensorDataOffset) % 256, 0);
    for (const info of parsed.tensorInfos) assert.equal(Number(info.offset) % 256, 0);
  });
});

test('invalid input is rejected before anything is written', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'bad.gguf');
    const bad = (file: GgufFile): Promise<number> => writeGguf(path, file);
    await assert.rejects(bad({ metadata: [['general.alignment', gv.u32(48)]], tensors: [] }), GgufWriteError);
    await assert.rejects(bad({ metadata: [['x', gv.u8(256)]], tensors: [] }), /not a valid u8/);
    await assert.rejects(bad({ metadata: [['x', gv.i32(1.5)]], tensors: [] }), /not a valid i32/);
    await assert.rejects(bad({ metadata: [['x', gv.u64(-1n)]], tensors: [] }), /not a valid u64/);
    await assert.rejects(bad({ metadata: [['x', gv.u8(1)], ['x', gv.u8(2)]], tensors: [] }), /duplicate metadata key/);
    await assert.rejects(bad({ metadata: [], tensors: [TENSORS[0]!, TENSORS[0]!] }), /duplicate tensor name/);
    const misaligned = { ...TENSORS[2]!, dims: [48, 2] };
    await assert.rejects(bad({ metadata: [], tensors: [misaligned] }), /multiple of 32/);
    assert.deepEqual(await readdir(dir), []);
  });
});

test('a tensor producing the wrong byte count fails and leaves no file behind', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'short.gguf');
    const short: GgufTensor = { name: 't', dims: [8], type: GgmlType.F32, data: () => [new Uint8Array(31)] };
    await assert.rejects(writeGguf(path, { metadata: [], tensors: [short] }), (err: unknown) => {
      assert.ok(err instanceof GgufWriteError);
      assert.equal(err.code, 'GGUF_WRITE_INVALID');
      assert.match(err.message, /produced 31 bytes, expected 32/);
      return true;
    });
    assert.deepEqual(await readdir(dir), []);
  });
});

test('aborting mid-write removes the temp file and keeps an existing target intact', async () => {
  await withTempDir(async (dir) => {
    const path = join(dir, 'model.gguf');
    const firstSize = await writeGguf(path, FILE);
    const controller = new AbortController();
    const endless: GgufTensor = {
      name: 'big',
      dims: [1 << 20],
      type: GgmlType.F32,
      *data() {
        for (let i = 0; i < 64; i++) yield new Uint8Array(1 << 16);
      },
    };
    const write = writeGguf(path, { metadata: [], tensors: [endless] }, {
      signal: controller.signal,
      onProgress: (written) => {
        if (written > 1 << 18) controller.abort();
      },
    });
    await assert.rejects(write, { name: 'AbortError' });
    assert.deepEqual(await readdir(dir), ['model.gguf']);
    assert.equal((await stat(path)).size, firstSize);
  });
});
