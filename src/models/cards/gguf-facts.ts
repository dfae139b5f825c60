// Architecture facts read from a GGUF header: what placement needs to size a model (layers, heads,
// KV heads, head dims, trained context, bytes per layer). Read from the file, never typed on a card,
// so the estimate always describes the bytes that will actually load.

import { open, stat } from 'node:fs/promises';
import { gguf } from '@huggingface/gguf';
import { z } from 'zod';
import { errorMessage } from '../../common/errors.js';

const count = z.number().int().min(0);
/**
 * Most repeating layers a header may claim (llama.cpp itself loads at most 512): the facts hold
 * arrays of one entry per layer, so a damaged count must not size them.
 */
export const MAX_GGUF_BLOCK_COUNT = 4096;
const positive = z.number().int().min(1);

export const GgufFacts = z.strictObject({
  architecture: z.string().min(1),
  /** `<arch>.block_count`: repeating layers. */
  blockCount: positive,
  headCount: positive,
  /** Largest KV head count of any layer (GQA: fewer KV heads than query heads). */
  headCountKv: positive,
  /** KV heads of each layer; llama.cpp allows them to vary by layer. */
  kvHeadsPerLayer: z.array(count),
  embeddingLength: positive,
  /** `<arch>.context_length`: the context the model was trained for. */
  trainedContext: positive,
  /** Per-head key and value widths (`<arch>.attention.key_length`, default embedding / heads). */
  keyLength: positive,
  valueLength: positive,
  /** Token count of the vocabulary, null when the file does not say. */
  vocabSize: count.nullable(),
  fileBytes: count,
  /** Bytes of all tensor data (the file minus its header). */
  tensorBytes: count,
  /** Tensor bytes of each repeating layer `blk.<i>.*`, in layer order. */
  layerBytes: z.array(count),
  /** `token_embd.*`: the input embedding table. */
  embeddingBytes: count,
  /** Every other tensor outside the layers: output head, final norm, rope tables. */
  outputBytes: count,
  /** No `output.weight`: the output head reuses the embedding table (read in full every token). */
  outputTied: z.boolean(),
});
export type GgufFacts = z.infer<typeof GgufFacts>;

export class GgufFactsError extends Error {
  readonly code = 'GGUF_FACTS_INVALID';
  override name = 'GgufFactsError';
}

/** The parts of `@huggingface/gguf`'s output that facts come from (so tests can feed a header directly). */
export interface GgufHeader {
  metadata: Record<string, unknown>;
  tensorInfos: ReadonlyArray<{ name: string; offset: bigint }>;
  tensorDataOffset: bigint;
}

function asInt(value: unknown): number | undefined {
  if (typeof value === 'bigint') return Number(value);
  if (typeof value === 'number' && Number.isInteger(value)) return value;
  return undefined;
}

/** Per-tensor bytes from the gaps between data offsets: exact for every quantization type, padding included. */
function tensorSizes(header: GgufHeader, fileBytes: number, file: string): Array<{ name: string; bytes: number }> {
  const dataStart = Number(header.tensorDataOffset);
  const sorted = [...header.tensorInfos].sort((a, b) => (a.offset < b.offset ? -1 : a.offset > b.offset ? 1 : 0));
  return sorted.map((info, i) => {
    const start = dataStart + Number(info.offset);
    const next = sorted[i + 1];
    const end = next === undefined ? fileBytes : dataStart + Number(next.offset);
    if (start > fileBytes || end > fileBytes || end < start) {
      throw new GgufFactsError(`${file}: tensor '${info.name}' lies outside the file (${fileBytes} bytes): the file is truncated`);
    }
    return { name: info.name, bytes: end - start };
  });
}

/** Facts from a parsed header; pure. `file` names the model in errors. */
export function factsFromHeader(header: GgufHeader, fileBytes: number, file: string): GgufFacts {
  const meta = header.metadata;
  const architecture = meta['general.architecture'];
  if (typeof architecture !== 'string' || architecture === '') {
    throw new GgufFactsError(`${file}: general.architecture is missing; is this a GGUF model file?`);
  }
  const required = (key: string): number => {
    const value = asInt(meta[`${architecture}.${key}`]);
    if (value === undefined || value <= 0) throw new GgufFactsError(`${file}: ${architecture}.${key} is missing or not a positive integer`);
    return value;
  };
  const optional = (key: string): number | undefined => asInt(meta[`${architecture}.${key}`]);

  const blockCount = required('block_count');
  if (blockCount > MAX_GGUF_BLOCK_COUNT) {
    throw new GgufFactsError(`${file}: ${architecture}.block_count is ${blockCount}, more than the ${MAX_GGUF_BLOCK_COUNT} layers Shoal reads: the file is damaged or not a model llama.cpp can load`);
  }
  const headCount = required('attention.head_count');
  const embeddingLength = required('embedding_length');
  const trainedContext = required('context_length');
  // head_count_kv is absent without GQA (same as head_count) and an array when it varies by layer.
  const kvRaw = meta[`${architecture}.attention.head_count_kv`];
  let kvHeadsPerLayer: number[];
  if (Array.isArray(kvRaw)) {
    kvHeadsPerLayer = kvRaw.map((v) => asInt(v) ?? -1);
    if (kvHeadsPerLayer.length !== blockCount || kvHeadsPerLayer.some((v) => v < 0)) {
      throw new GgufFactsError(`${file}: ${architecture}.attention.head_count_kv must list ${blockCount} non-negative counts`);
    }
  } else {
    kvHeadsPerLayer = new Array<number>(blockCount).fill(kvRaw === undefined ? headCount : required('attention.head_count_kv'));
  }
  const headCountKv = kvHeadsPerLayer.reduce((most, v) => Math.max(most, v), 0);
  if (headCountKv <= 0) throw new GgufFactsError(`${file}: no layer has a KV head`);
  const defaultHeadDim = Math.floor(embeddingLength / headCount);
  const keyLength = optional('attention.key_length') ?? defaultHeadDim;
  const valueLength = optional('attention.value_length') ?? defaultHeadDim;
  const tokens = meta['tokenizer.ggml.tokens'];
  const vocabSize = optional('vocab_size') ?? (Array.isArray(tokens) ? tokens.length : null);

  const layerBytes = new Array<number>(blockCount).fill(0);
  let embeddingBytes = 0;
  let outputBytes = 0;
  let outputTied = true;
  let tensorBytes = 0;
  for (const { name, bytes } of tensorSizes(header, fileBytes, file)) {
    tensorBytes += bytes;
    const layer = /^blk\.(\d+)\./.exec(name);
    const index = layer ? Number(layer[1]) : -1;
    if (index >= 0 && index < blockCount) layerBytes[index]! += bytes;
    else if (name.startsWith('token_embd.')) embeddingBytes += bytes;
    else {
      outputBytes += bytes;
      if (name === 'output.weight') outputTied = false;
    }
  }

  const facts: GgufFacts = {
    architecture,
    blockCount,
    headCount,
    headCountKv,
    kvHeadsPerLayer,
    embeddingLength,
    trainedContext,
    keyLength,
    valueLength,
    vocabSize,
    fileBytes,
    tensorBytes,
    layerBytes,
    embeddingBytes,
    outputBytes,
    outputTied,
  };
  const parsed = GgufFacts.safeParse(facts);
  if (!parsed.success) throw new GgufFactsError(`${file}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

/** Bytes of the smallest tensor info (an empty name, no dimensions) and of the smallest metadata entry. */
const MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8;
const MIN_KV_BYTES = 8 + 4 + 1;
/** Magic, version, tensor count and metadata count (GGUF v2 and v3). */
const GGUF_PREAMBLE_BYTES = 24;

/**
 * Refuses a header whose tensor or metadata count could not fit in the file. The parser reads past
 * the end as zeros, so a 10 KB file that claims ten million tensors would otherwise cost seconds of
 * CPU and hundreds of MB before it fails.
 */
async function checkCounts(path: string, size: number): Promise<void> {
  const fh = await open(path, 'r');
  let preamble: Buffer;
  try {
    preamble = Buffer.alloc(GGUF_PREAMBLE_BYTES);
    const { bytesRead } = await fh.read(preamble, 0, GGUF_PREAMBLE_BYTES, 0);
    if (bytesRead < GGUF_PREAMBLE_BYTES) return; // the parser says what is wrong with a file this short
  } finally {
    await fh.close();
  }
  const littleEndian = (preamble.readUInt32LE(4) & 0xffff) !== 0;
  const version = littleEndian ? preamble.readUInt32LE(4) : preamble.readUInt32BE(4);
  if (version < 2) return; // v1's 32-bit counts: the parser's own limits bound it
  const tensors = littleEndian ? preamble.readBigUInt64LE(8) : preamble.readBigUInt64BE(8);
  const kvs = littleEndian ? preamble.readBigUInt64LE(16) : preamble.readBigUInt64BE(16);
  const least = BigInt(GGUF_PREAMBLE_BYTES) + tensors * BigInt(MIN_TENSOR_INFO_BYTES) + kvs * BigInt(MIN_KV_BYTES);
  if (least > BigInt(size)) {
    throw new GgufFactsError(`${path}: not a readable GGUF file: its header claims ${tensors} tensors and ${kvs} metadata entries, more than a file of ${size} bytes can hold (the file is damaged or truncated: download it again)`);
  }
}

/** `general.architecture` of a local GGUF file (`clip` for a multimodal projector), null when unset; throws when it is no readable GGUF. */
export async function readGgufArchitecture(path: string): Promise<string | null> {
  const { size } = await stat(path);
  await checkCounts(path, size);
  const parsed = await gguf(path, { allowLocalFile: true });
  const architecture = (parsed.metadata as unknown as Record<string, unknown>)['general.architecture'];
  return typeof architecture === 'string' ? architecture : null;
}

/** Reads only the header (and the file's size) of a local GGUF file. */
export async function readGgufFacts(path: string): Promise<GgufFacts> {
  const { size } = await stat(path);
  await checkCounts(path, size);
  let parsed: Awaited<ReturnType<typeof gguf>>;
  try {
    parsed = await gguf(path, { allowLocalFile: true });
  } catch (error) {
    const reason = errorMessage(error);
    throw new GgufFactsError(`${path}: not a readable GGUF file: ${reason}`, { cause: error });
  }
  return factsFromHeader(
    { metadata: parsed.metadata as unknown as Record<string, unknown>, tensorInfos: parsed.tensorInfos, tensorDataOffset: parsed.tensorDataOffset },
    size,
    path,
  );
}
