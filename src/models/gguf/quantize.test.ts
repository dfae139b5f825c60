import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decode, encode, f16BitsToF32, f32ToF16Bits, ggmlByteSize, GgmlType } from './quantize.js';

test('f32 -> f16 handles zeros, infinities, NaN and the overflow boundary', () => {
  assert.equal(f32ToF16Bits(0), 0x0000);
  assert.equal(f32ToF16Bits(-0), 0x8000);
  assert.equal(f32ToF16Bits(1), 0x3c00);
  assert.equal(f32ToF16Bits(-2), 0xc000);
  assert.equal(f32ToF16Bits(Infinity), 0x7c00);
  assert.equal(f32ToF16Bits(-Infinity), 0xfc00);
  assert.equal(f32ToF16Bits(NaN), 0x7e00);
  assert.equal(f32ToF16Bits(65504), 0x7bff, 'largest finite half');
  assert.equal(f32ToF16Bits(65519), 0x7bff, 'below the halfway point to 65536 rounds down');
  assert.equal(f32ToF16Bits(65520), 0x7c00, 'the halfway point rounds (to even) up to infinity');
  assert.equal(f32ToF16Bits(1e6), 0x7c00);
});

test('f32 -> f16 rounds to nearest, ties to even', () => {
  // Half spacing just above 1 is 2^-10: 1 + 2^-11 is a tie between 0x3c00 (even) and 0x3c01.
  assert.equal(f32ToF16Bits(1 + 2 ** -11), 0x3c00);
  assert.equal(f32ToF16Bits(1 + 3 * 2 ** -11), 0x3c02, 'tie between 0x3c01 and 0x3c02 goes to even');
  assert.equal(f32ToF16Bits(1 + 2 ** -11 + 2 ** -20), 0x3c01, 'just above the tie rounds up');
  // A mantissa carry must bump the exponent: 2 - 2^-12 rounds up to exactly 2.
  assert.equal(f32ToF16Bits(2 - 2 ** -12), 0x4000);
});

test('f32 -> f16 produces subnormals and underflows correctly', () => {
  assert.equal(f32ToF16Bits(2 ** -24), 0x0001, 'smallest subnormal');
  assert.equal(f32ToF16Bits(2 ** -14), 0x0400, 'smallest normal');
  assert.equal(f32ToF16Bits(2 ** -14 - 2 ** -24), 0x03ff, 'largest subnormal');
  assert.equal(f32ToF16Bits(2 ** -25), 0x0000, 'half the smallest subnormal ties to even zero');
  assert.equal(f32ToF16Bits(2 ** -25 + 2 ** -35), 0x0001, 'just above the tie rounds up');
  assert.equal(f32ToF16Bits(3 * 2 ** -25), 0x0002, '1.5 subnormal steps ties to even (2)');
  assert.equal(f32ToF16Bits(-(2 ** -24)), 0x8001);
  assert.equal(f32ToF16Bits(1e-10), 0x0000);
  assert.equal(f32ToF16Bits(-1e-10), 0x8000);
});

test('f16 bits decode back exactly for every finite half', () => {
  for (let bits = 0; bits < 0x10000; bits++) {
    const exponent = (bits >> 10) & 0x1f;
    if (exponent === 0x1f) continue;
    assert.equal(f32ToF16Bits(f16BitsToF32(bits)), bits);
  }
});

test('byte sizes follow the ggml block layouts', () => {
  assert.equal(ggmlByteSize(GgmlType.F32, 64), 256);
  assert.equal(ggmlByteSize(GgmlType.F16, 64), 128);
  assert.equal(ggmlByteSize(GgmlType.Q8_0, 64), 68);
  assert.equal(ggmlByteSize(GgmlType.Q4_0, 64), 36);
  assert.throws(() => ggmlByteSize(GgmlType.Q4_0, 48), RangeError);
});

function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('hex');
}

test('q8_0 matches quantize_row_q8_0_ref on a hand-computed block', () => {
  // amax 127 gives d = 1 exactly, so each value rounds half away from zero.
  const x = new Float32Array(32);
  x.set([127, -127, 0.5, -0.5, 1.5, -2.5, 3.49, 100.2]);
  const block = encode(GgmlType.Q8_0, x);
  assert.equal(block.length, 34);
  assert.equal(hex(block.subarray(0, 2)), '003c', 'f16 scale 1.0, little endian');
  assert.deepEqual([...new Int8Array(block.buffer, block.byteOffset + 2, 8)], [127, -127, 1, -1, 2, -3, 3, 100]);
  assert.ok(block.subarray(10).every((b) => b === 0));
});

test('q8_0 of an all-zero block has zero scale and zero quants', () => {
  const block = encode(GgmlType.Q8_0, new Float32Array(32));
  assert.ok(block.every((b) => b === 0));
});

test('q4_0 matches quantize_row_q4_0_ref on a hand-computed block', () => {
  // The max-magnitude value is -8 (first one wins), so d = -8 / -8 = 1 and id = 1.
  // q = min(15, trunc(x + 8.5)): -8 -> 0, 7 -> 15, 8 -> 15 (clamped), 0 -> 8, 0.5 -> 9, -0.5 -> 8, 2.4 -> 10.
  const x = new Float32Array(32);
  x.set([-8, 7, 0, 0.5, -0.5, 2.4]);
  x[16] = 8;
  x[17] = -1;
  x[31] = 3;
  const block = encode(GgmlType.Q4_0, x);
  assert.equal(block.length, 18);
  assert.equal(hex(block.subarray(0, 2)), '003c');
  const q = [...block.subarray(2)];
  const low = q.map((b) => b & 0x0f);
  const high = q.map((b) => b >> 4);
  assert.deepEqual(low.slice(0, 6), [0, 15, 8, 9, 8, 10]);
  assert.deepEqual(low.slice(6), new Array(10).fill(8));
  assert.deepEqual(high.slice(0, 2), [15, 7]);
  assert.equal(high[15], 11);
  assert.deepEqual(high.slice(2, 15), new Array(13).fill(8));
});

test('q4_0 keeps the sign of the largest magnitude and prefers the first of equal magnitudes', () => {
  const x = new Float32Array(32);
  x[0] = 4;
  x[1] = -4;
  const block = encode(GgmlType.Q4_0, x);
  // max = +4 (first), d = 4 / -8 = -0.5: +4 -> q 0, -4 -> trunc(8 + 8.5) = 16 -> clamped 15.
  assert.equal(f16BitsToF32(block[0]! | (block[1]! << 8)), -0.5);
  assert.equal(block[2]! & 0x0f, 0);
  assert.equal(block[3]! & 0x0f, 15);
});

test('decode inverts encode within each format precision', () => {
  const x = new Float32Array(256);
  for (let i = 0; i < x.length; i++) x[i] = Math.fround((((i * 37) % 101) - 50) / 40);
  assert.deepEqual(decode(GgmlType.F32, encode(GgmlType.F32, x), x.length), x);
  const f16 = decode(GgmlType.F16, encode(GgmlType.F16, x), x.length);
  const q8 = decode(GgmlType.Q8_0, encode(GgmlType.Q8_0, x), x.length);
  const q4 = decode(GgmlType.Q4_0, encode(GgmlType.Q4_0, x), x.length);
  for (let i = 0; i < x.length; i++) {
    assert.ok(Math.abs(f16[i]! - x[i]!) <= 2 ** -11 * Math.abs(x[i]!) + 1e-7);
    assert.ok(Math.abs(q8[i]! - x[i]!) <= 1.25 / 127 / 2 + 1e-3);
    assert.ok(Math.abs(q4[i]! - x[i]!) <= 1.25 / 8 + 1e-3);
  }
});
