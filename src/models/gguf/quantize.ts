// Encoders from float32 values to ggml tensor storage formats. The quantizers reproduce ggml's
// quantize_row_*_ref bit for bit (float32 arithmetic via Math.fround), so files we write match what
// llama.cpp's own reference quantizer would produce for the same weights.

/** ggml tensor element types (enum ggml_type) that this project writes. */
export const GgmlType = {
  F32: 0,
  F16: 1,
  Q4_0: 2,
  Q8_0: 8,
} as const;
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

interface TypeLayout {
  /** Elements per block; a row's length must be a multiple of it. */
  blockElements: number;
  blockBytes: number;
}

const LAYOUTS: Record<GgmlType, TypeLayout> = {
  [GgmlType.F32]: { blockElements: 1, blockBytes: 4 },
  [GgmlType.F16]: { blockElements: 1, blockBytes: 2 },
  [GgmlType.Q4_0]: { blockElements: 32, blockBytes: 18 },
  [GgmlType.Q8_0]: { blockElements: 32, blockBytes: 34 },
};

export const GGML_TYPE_NAMES: Record<GgmlType, string> = {
  [GgmlType.F32]: 'f32',
  [GgmlType.F16]: 'f16',
  [GgmlType.Q4_0]: 'q4_0',
  [GgmlType.Q8_0]: 'q8_0',
};

export function ggmlBlockElements(type: GgmlType): number {
  return LAYOUTS[type].blockElements;
}

/** Bytes needed to store `elementCount` values; the count must be a whole number of blocks. */
export function ggmlByteSize(type: GgmlType, elementCount: number): number {
  const { blockElements, blockBytes } = LAYOUTS[type];
  if (!Number.isSafeInteger(elementCount) || elementCount < 0 || elementCount % blockElements !== 0) {
    throw new RangeError(`${GGML_TYPE_NAMES[type]} needs a multiple of ${blockElements} elements, got ${elementCount}`);
  }
  return (elementCount / blockElements) * blockBytes;
}

const scratchF32 = new Float32Array(1);
const scratchU32 = new Uint32Array(scratchF32.buffer);

/** IEEE binary16 bits of `value` rounded to float32 first, then to half with round-to-nearest-even. */
export function f32ToF16Bits(value: number): number {
  scratchF32[0] = value;
  return f32BitsToF16Bits(scratchU32[0] as number);
}

function f32BitsToF16Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const exponent = (bits >>> 23) & 0xff;
  const mantissa = bits & 0x7fffff;
  // ggml turns every NaN into the canonical quiet NaN, keeping only the sign.
  if (exponent === 0xff) return mantissa === 0 ? sign | 0x7c00 : sign | 0x7e00;
  const halfExponent = exponent - 127 + 15;
  if (halfExponent >= 0x1f) return sign | 0x7c00;
  if (halfExponent <= 0) {
    // Below 2^-25 (half of the smallest subnormal) everything rounds to zero, ties included.
    if (halfExponent < -10) return sign;
    const full = mantissa | 0x800000;
    const shift = 14 - halfExponent;
    return sign | roundShift(full, shift);
  }
  // A mantissa carry out of roundShift bumps the exponent, which is exactly the right result
  // (and turns 65520 and above into infinity).
  return sign | ((halfExponent << 10) + roundShift(mantissa, 13));
}

/** `value >> shift`, rounded to nearest with ties to even. */
function roundShift(value: number, shift: number): number {
  const kept = value >>> shift;
  const rest = value & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  return rest > half || (rest === half && (kept & 1) === 1) ? kept + 1 : kept;
}

/** The float value of IEEE binary16 bits (exact: every half is representable as a double). */
export function f16BitsToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1024 + mantissa) * 2 ** (exponent - 25);
}

/** Encodes `values` (a whole number of blocks) as `type`, little endian, into `out` at `outOffset`. */
export function encodeInto(type: GgmlType, values: Float32Array, out: Uint8Array, outOffset = 0): number {
  const byteLength = ggmlByteSize(type, values.length);
  if (outOffset + byteLength > out.length) throw new RangeError('output buffer too small');
  const view = new DataView(out.buffer, out.byteOffset + outOffset, byteLength);
  switch (type) {
    case GgmlType.F32:
      for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i] as number, true);
      break;
    case GgmlType.F16:
      encodeF16(values, view);
      break;
    case GgmlType.Q8_0:
      encodeQ8_0(values, view);
      break;
    case GgmlType.Q4_0:
      encodeQ4_0(values, view);
      break;
  }
  return byteLength;
}

export function encode(type: GgmlType, values: Float32Array): Uint8Array {
  const out = new Uint8Array(ggmlByteSize(type, values.length));
  encodeInto(type, values, out);
  return out;
}

function encodeF16(values: Float32Array, view: DataView): void {
  // Reading the bits through an aliasing view avoids a float->bits round trip per element.
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  for (let i = 0; i < bits.length; i++) view.setUint16(i * 2, f32BitsToF16Bits(bits[i] as number), true);
}

/** C's roundf: half away from zero. Math.round would send -2.5 to -2. */
function roundHalfAwayFromZero(x: number): number {
  return x < 0 ? -Math.floor(-x + 0.5) : Math.floor(x + 0.5);
}

function encodeQ8_0(values: Float32Array, view: DataView): void {
  const fr = Math.fround;
  for (let block = 0; block * 32 < values.length; block++) {
    const base = block * 32;
    let amax = 0;
    for (let j = 0; j < 32; j++) {
      const v = Math.abs(values[base + j] as number);
      if (v > amax) amax = v;
    }
    const d = fr(amax / 127);
    const id = d !== 0 ? fr(1 / d) : 0;
    const at = block * 34;
    view.setUint16(at, f32ToF16Bits(d), true);
    for (let j = 0; j < 32; j++) {
      view.setInt8(at + 2 + j, roundHalfAwayFromZero(fr((values[base + j] as number) * id)));
    }
  }
}

function encodeQ4_0(values: Float32Array, view: DataView): void {
  const fr = Math.fround;
  for (let block = 0; block * 32 < values.length; block++) {
    const base = block * 32;
    // The signed value with the largest magnitude (first one wins a tie) sets the scale, so that
    // value lands exactly on -8 and the other end of the range keeps one extra level.
    let amax = 0;
    let max = 0;
    for (let j = 0; j < 32; j++) {
      const v = values[base + j] as number;
      if (amax < Math.abs(v)) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = fr(max / -8);
    const id = d !== 0 ? fr(1 / d) : 0;
    const at = block * 18;
    view.setUint16(at, f32ToF16Bits(d), true);
    for (let j = 0; j < 16; j++) {
      const q0 = Math.min(15, Math.trunc(fr(fr((values[base + j] as number) * id) + 8.5)));
      const q1 = Math.min(15, Math.trunc(fr(fr((values[base + 16 + j] as number) * id) + 8.5)));
      view.setUint8(at + 2 + j, q0 | (q1 << 4));
    }
  }
}

/** Decodes ggml storage back to float32 values (used to check encoders and inspect written files). */
export function decode(type: GgmlType, bytes: Uint8Array, elementCount: number): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, ggmlByteSize(type, elementCount));
  const out = new Float32Array(elementCount);
  switch (type) {
    case GgmlType.F32:
      for (let i = 0; i < elementCount; i++) out[i] = view.getFloat32(i * 4, true);
      break;
    case GgmlType.F16:
      for (let i = 0; i < elementCount; i++) out[i] = f16BitsToF32(view.getUint16(i * 2, true));
      break;
    case GgmlType.Q8_0:
      for (let i = 0; i < elementCount; i++) {
        const at = (i >> 5) * 34;
        out[i] = f16BitsToF32(view.getUint16(at, true)) * view.getInt8(at + 2 + (i & 31));
      }
      break;
    case GgmlType.Q4_0:
      for (let i = 0; i < elementCount; i++) {
        const at = (i >> 5) * 18;
        const j = i & 31;
        const byte = view.getUint8(at + 2 + (j & 15));
        const q = j < 16 ? byte & 0x0f : byte >> 4;
        out[i] = f16BitsToF32(view.getUint16(at, true)) * (q - 8);
      }
      break;
  }
  return out;
}
