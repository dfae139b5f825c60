// Streaming GGUF v3 writer. The header (metadata and tensor infos) is built in memory, but tensor data
// is pulled from each tensor's chunk source and written straight to the file, so a multi-gigabyte
// model never has to fit in memory. The file appears atomically: written to a temp file in the
// destination directory, fsynced, then renamed over the target.

import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { fsyncDir } from '../../common/durable-fs.js';
import { GGML_TYPE_NAMES, ggmlBlockElements, ggmlByteSize, type GgmlType } from './quantize.js';

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
const GGUF_VERSION = 3;
export const GGUF_DEFAULT_ALIGNMENT = 32;

export type GgufScalarType = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'bool' | 'string' | 'u64' | 'i64' | 'f64';

/** Metadata values, tagged with their GGUF type because a JS number does not say which one it is. */
export type GgufValue =
  | { type: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64'; value: number }
  | { type: 'u64' | 'i64'; value: bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; itemType: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64'; value: ArrayLike<number> }
  | { type: 'array'; itemType: 'u64' | 'i64'; value: readonly bigint[] }
  | { type: 'array'; itemType: 'bool'; value: readonly boolean[] }
  | { type: 'array'; itemType: 'string'; value: readonly string[] };

/** Constructors for GgufValue, so call sites read `gv.u32(4)` instead of object literals. */
export const gv = {
  u8: (value: number): GgufValue => ({ type: 'u8', value }),
  i8: (value: number): GgufValue => ({ type: 'i8', value }),
  u16: (value: number): GgufValue => ({ type: 'u16', value }),
  i16: (value: number): GgufValue => ({ type: 'i16', value }),
  u32: (value: number): GgufValue => ({ type: 'u32', value }),
  i32: (value: number): GgufValue => ({ type: 'i32', value }),
  f32: (value: number): GgufValue => ({ type: 'f32', value }),
  f64: (value: number): GgufValue => ({ type: 'f64', value }),
  u64: (value: bigint): GgufValue => ({ type: 'u64', value }),
  i64: (value: bigint): GgufValue => ({ type: 'i64', value }),
  bool: (value: boolean): GgufValue => ({ type: 'bool', value }),
  string: (value: string): GgufValue => ({ type: 'string', value }),
  strings: (value: readonly string[]): GgufValue => ({ type: 'array', itemType: 'string', value }),
  f32s: (value: ArrayLike<number>): GgufValue => ({ type: 'array', itemType: 'f32', value }),
  i32s: (value: ArrayLike<number>): GgufValue => ({ type: 'array', itemType: 'i32', value }),
};

const VALUE_TYPE_IDS: Record<GgufScalarType | 'array', number> = {
  u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12,
};

export type ChunkSource = Iterable<Uint8Array> | AsyncIterable<Uint8Array>;

export interface GgufTensor {
  name: string;
  /** ggml order: dims[0] is the fastest-varying (contiguous) dimension. */
  dims: readonly number[];
  type: GgmlType;
  /**
   * Produces the encoded tensor data in order; called once, when the writer reaches this tensor. Each
   * chunk is fully written before the next is requested, so a source may refill one buffer.
   */
  data: () => ChunkSource;
}

export interface GgufFile {
  /** Keys in the order they should appear. `general.alignment`, when present, sets data alignment. */
  metadata: ReadonlyArray<readonly [string, GgufValue]>;
  tensors: readonly GgufTensor[];
}

export interface WriteGgufOptions {
  signal?: AbortSignal;
  onProgress?: (bytesWritten: number, totalBytes: number) => void;
}

export class GgufWriteError extends Error {
  readonly code = 'GGUF_WRITE_INVALID';
  override name = 'GgufWriteError';
}

/** Writes `file` to `path` atomically and returns the file size in bytes. */
export async function writeGguf(path: string, file: GgufFile, opts: WriteGgufOptions = {}): Promise<number> {
  const layout = planLayout(file);
  const tempPath = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const handle = await open(tempPath, 'wx');
  let renamed = false;
  try {
    let position = 0;
    const emit = async (bytes: Uint8Array): Promise<void> => {
      opts.signal?.throwIfAborted();
      let done = 0;
      while (done < bytes.length) {
        const { bytesWritten } = await handle.write(bytes, done, bytes.length - done, position);
        done += bytesWritten;
        position += bytesWritten;
      }
      opts.onProgress?.(position, layout.totalBytes);
    };
    await emit(layout.header);
    for (const [i, tensor] of file.tensors.entries()) {
      const expectedBytes = layout.tensorBytes[i] as number;
      let tensorBytes = 0;
      for await (const chunk of tensor.data()) {
        tensorBytes += chunk.length;
        if (tensorBytes > expectedBytes) break;
        await emit(chunk);
      }
      if (tensorBytes !== expectedBytes) {
        throw new GgufWriteError(`tensor ${tensor.name} produced ${tensorBytes} bytes, expected ${expectedBytes}`);
      }
      const pad = padding(position, layout.alignment);
      if (pad > 0) await emit(new Uint8Array(pad));
    }
    await handle.sync();
    await handle.close();
    await rename(tempPath, path);
    renamed = true;
    await fsyncDir(dirname(path));
    return position;
  } finally {
    if (!renamed) {
      await handle.close().catch(() => undefined);
      await rm(tempPath, { force: true });
    }
  }
}

interface Layout {
  header: Uint8Array;
  alignment: number;
  tensorBytes: number[];
  totalBytes: number;
}

function planLayout(file: GgufFile): Layout {
  const alignment = alignmentOf(file.metadata);
  const names = new Set<string>();
  const tensorBytes: number[] = [];
  const offsets: number[] = [];
  let dataBytes = 0;
  for (const tensor of file.tensors) {
    if (names.has(tensor.name)) throw new GgufWriteError(`duplicate tensor name ${tensor.name}`);
    names.add(tensor.name);
    const bytes = tensorByteSize(tensor);
    offsets.push(dataBytes);
    tensorBytes.push(bytes);
    dataBytes += bytes + padding(bytes, alignment);
  }

  const out = new ByteSink();
  out.u32(GGUF_MAGIC);
  out.u32(GGUF_VERSION);
  out.u64(BigInt(file.tensors.length));
  out.u64(BigInt(file.metadata.length));
  const keys = new Set<string>();
  for (const [key, value] of file.metadata) {
    if (keys.has(key)) throw new GgufWriteError(`duplicate metadata key ${key}`);
    keys.add(key);
    out.string(key);
    writeValue(out, key, value);
  }
  for (const [i, tensor] of file.tensors.entries()) {
    out.string(tensor.name);
    out.u32(tensor.dims.length);
    for (const dim of tensor.dims) out.u64(BigInt(dim));
    out.u32(tensor.type);
    out.u64(BigInt(offsets[i] as number));
  }
  out.zeros(padding(out.length, alignment));
  const header = out.bytes();
  return { header, alignment, tensorBytes, totalBytes: header.length + dataBytes };
}

function alignmentOf(metadata: GgufFile['metadata']): number {
  const entry = metadata.find(([key]) => key === 'general.alignment');
  if (!entry) return GGUF_DEFAULT_ALIGNMENT;
  const value = entry[1];
  // llama.cpp reads general.alignment as a u32 and rejects anything that is not a power of two.
  if (value.type !== 'u32' || value.value <= 0 || (value.value & (value.value - 1)) !== 0) {
    throw new GgufWriteError('general.alignment must be a u32 power of two');
  }
  return value.value;
}

function tensorByteSize(tensor: GgufTensor): number {
  const { name, dims, type } = tensor;
  if (dims.length < 1 || dims.length > 4) throw new GgufWriteError(`tensor ${name} must have 1 to 4 dims`);
  for (const dim of dims) {
    if (!Number.isSafeInteger(dim) || dim <= 0) throw new GgufWriteError(`tensor ${name} has invalid dim ${dim}`);
  }
  const block = ggmlBlockElements(type);
  if ((dims[0] as number) % block !== 0) {
    throw new GgufWriteError(`tensor ${name}: ${GGML_TYPE_NAMES[type]} rows must be a multiple of ${block}, got ${dims[0]}`);
  }
  return ggmlByteSize(type, dims.reduce((a, b) => a * b, 1));
}

function padding(length: number, alignment: number): number {
  return (alignment - (length % alignment)) % alignment;
}

function writeValue(out: ByteSink, key: string, value: GgufValue): void {
  out.u32(VALUE_TYPE_IDS[value.type]);
  if (value.type !== 'array') {
    writeScalar(out, key, value.type, value.value);
    return;
  }
  out.u32(VALUE_TYPE_IDS[value.itemType]);
  out.u64(BigInt(value.value.length));
  for (let i = 0; i < value.value.length; i++) writeScalar(out, key, value.itemType, value.value[i]);
}

const INT_RANGES = {
  u8: [0, 0xff], i8: [-0x80, 0x7f], u16: [0, 0xffff], i16: [-0x8000, 0x7fff], u32: [0, 0xffffffff], i32: [-0x80000000, 0x7fffffff],
} as const;
const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);
const I64_MAX = (1n << 63n) - 1n;

function writeScalar(out: ByteSink, key: string, type: GgufScalarType, value: unknown): void {
  const invalid = (): GgufWriteError => new GgufWriteError(`metadata ${key}: ${String(value)} is not a valid ${type}`);
  switch (type) {
    case 'u8': case 'i8': case 'u16': case 'i16': case 'u32': case 'i32': {
      const [min, max] = INT_RANGES[type];
      if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw invalid();
      const size = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4 }[type];
      out.put(size, (v, at) => {
        if (type === 'u8') v.setUint8(at, value);
        else if (type === 'i8') v.setInt8(at, value);
        else if (type === 'u16') v.setUint16(at, value, true);
        else if (type === 'i16') v.setInt16(at, value, true);
        else if (type === 'u32') v.setUint32(at, value, true);
        else v.setInt32(at, value, true);
      });
      return;
    }
    case 'f32':
    case 'f64':
      if (typeof value !== 'number') throw invalid();
      if (type === 'f32') out.put(4, (v, at) => v.setFloat32(at, value, true));
      else out.put(8, (v, at) => v.setFloat64(at, value, true));
      return;
    case 'u64':
      if (typeof value !== 'bigint' || value < 0n || value > U64_MAX) throw invalid();
      out.u64(value);
      return;
    case 'i64':
      if (typeof value !== 'bigint' || value < I64_MIN || value > I64_MAX) throw invalid();
      out.put(8, (v, at) => v.setBigInt64(at, value, true));
      return;
    case 'bool':
      if (typeof value !== 'boolean') throw invalid();
      out.put(1, (v, at) => v.setUint8(at, value ? 1 : 0));
      return;
    case 'string':
      if (typeof value !== 'string') throw invalid();
      out.string(value);
      return;
  }
}

/** Growable little-endian byte buffer for the header. */
class ByteSink {
  private buffer = new Uint8Array(64 * 1024);
  private view = new DataView(this.buffer.buffer);
  length = 0;

  put(size: number, write: (view: DataView, at: number) => void): void {
    this.reserve(size);
    write(this.view, this.length);
    this.length += size;
  }

  u32(value: number): void {
    this.put(4, (v, at) => v.setUint32(at, value, true));
  }

  u64(value: bigint): void {
    this.put(8, (v, at) => v.setBigUint64(at, value, true));
  }

  string(value: string): void {
    const bytes = Buffer.from(value, 'utf8');
    this.u64(BigInt(bytes.length));
    this.reserve(bytes.length);
    this.buffer.set(bytes, this.length);
    this.length += bytes.length;
  }

  zeros(count: number): void {
    this.reserve(count);
    this.buffer.fill(0, this.length, this.length + count);
    this.length += count;
  }

  bytes(): Uint8Array {
    return this.buffer.subarray(0, this.length);
  }

  private reserve(size: number): void {
    if (this.length + size <= this.buffer.length) return;
    let capacity = this.buffer.length * 2;
    while (capacity < this.length + size) capacity *= 2;
    const next = new Uint8Array(capacity);
    next.set(this.buffer.subarray(0, this.length));
    this.buffer = next;
    this.view = new DataView(next.buffer);
  }
}
