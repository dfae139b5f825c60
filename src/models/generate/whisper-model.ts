// A random-weight whisper model in whisper.cpp's legacy ggml file format (not GGUF), so tests and the
// built-in catalogue have a speech-to-text model without downloading one. The layout follows
// whisper.cpp 1.9.x `whisper_model_load`: magic, eleven int32 hyper-parameters, the mel filter bank,
// the vocabulary, then every tensor as (n_dims, name length, type, dims..., name, data). whisper.cpp
// checks each tensor's name, shape and byte size and that every tensor it expects is present.
// The bytes are a pure function of the spec: the weights come from the seeded PRNG in prng.ts.

import { randomBytes } from 'node:crypto';
import { access, mkdir, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ShoalError } from '../../common/errors.js';
import { Xoshiro128 } from './prng.js';
import { f32ToF16Bits } from '../gguf/quantize.js';

export interface WhisperModelSpec {
  name: string;
  seed: number;
  /** Width of the encoder and of the decoder (whisper.cpp requires them equal). */
  nState: number;
  nAudioHead: number;
  nAudioLayer: number;
  nTextHead: number;
  nTextLayer: number;
  /** Encoder positions: 1500 for whisper's 30 s windows (3000 mel frames, conv stride 2). */
  nAudioCtx: number;
  /** Decoder positions: 448 in every released whisper model. */
  nTextCtx: number;
  nMels: number;
  /** 51865 tokens (99 languages, translate/transcribe) when true, 51864 (English-only) when false. */
  multilingual: boolean;
  /** Storage of the matrices; norms, biases and positional embeddings are always f32. */
  tensorType: 'f16' | 'f32';
}

/** About 8 MB (8,043,353 bytes): one encoder and one decoder block of width 64, multilingual vocabulary, f16 matrices; a 64-token decoder context (whisper decodes at most half of it per window) keeps a babbling random model quick. */
export const TINY_WHISPER_SPEC: WhisperModelSpec = Object.freeze({
  name: 'whisper-random-tiny',
  seed: 0x5eed_5717,
  nState: 64,
  nAudioHead: 2,
  nAudioLayer: 1,
  nTextHead: 2,
  nTextLayer: 1,
  nAudioCtx: 1500,
  nTextCtx: 64,
  nMels: 80,
  multilingual: true,
  tensorType: 'f16',
});

const GGML_FILE_MAGIC = 0x67676d6c;
const GGML_TYPE_F32 = 0;
const GGML_TYPE_F16 = 1;
/** whisper's STFT: n_fft 400 gives 201 frequency bins. */
const N_FFT_BINS = 201;
const SAMPLE_RATE = 16_000;
/** The text tokens (GPT-2 byte-level BPE ids 0..50256, the last being <|endoftext|>); whisper.cpp adds the special tokens itself. */
const TEXT_TOKENS = 50_257;

type Init = { kind: 'zeros' } | { kind: 'ones' } | { kind: 'uniform'; scale: number };

interface TensorSpec {
  name: string;
  /** ggml order: ne[0] is the fastest-varying dimension. */
  ne: number[];
  type: typeof GGML_TYPE_F32 | typeof GGML_TYPE_F16;
  init: Init;
}

function validate(spec: WhisperModelSpec): void {
  const positive = ['nState', 'nAudioHead', 'nAudioLayer', 'nTextHead', 'nTextLayer', 'nAudioCtx', 'nTextCtx', 'nMels'] as const;
  for (const key of positive) {
    const value = spec[key];
    if (!Number.isInteger(value) || value < 1 || value > 1_000_000) {
      throw new ShoalError('BAD_REQUEST', `whisper model spec ${spec.name}: ${key} must be a positive integer, got ${String(value)}`);
    }
  }
  if (spec.nState % spec.nAudioHead !== 0 || spec.nState % spec.nTextHead !== 0) {
    throw new ShoalError('BAD_REQUEST', `whisper model spec ${spec.name}: nState ${spec.nState} must be a multiple of the head counts`);
  }
  if (!Number.isInteger(spec.seed)) throw new ShoalError('BAD_REQUEST', `whisper model spec ${spec.name}: seed must be an integer`);
}

function nVocab(spec: WhisperModelSpec): number {
  return spec.multilingual ? 51_865 : 51_864;
}

function tensorList(spec: WhisperModelSpec): TensorSpec[] {
  const s = spec.nState;
  const w = spec.tensorType === 'f16' ? GGML_TYPE_F16 : GGML_TYPE_F32;
  const f32 = GGML_TYPE_F32;
  const out: TensorSpec[] = [];
  const matrix = (name: string, nIn: number, nOut: number): void => {
    out.push({ name, ne: [nIn, nOut], type: w, init: { kind: 'uniform', scale: 1 / Math.sqrt(nIn) } });
  };
  const vector = (name: string, n: number, init: Init): void => {
    out.push({ name, ne: [n], type: f32, init });
  };
  const block = (prefix: string, cross: boolean): void => {
    for (const attn of cross ? ['attn', 'cross_attn'] : ['attn']) {
      vector(`${prefix}.${attn}_ln.weight`, s, { kind: 'ones' });
      vector(`${prefix}.${attn}_ln.bias`, s, { kind: 'zeros' });
      matrix(`${prefix}.${attn}.query.weight`, s, s);
      vector(`${prefix}.${attn}.query.bias`, s, { kind: 'zeros' });
      matrix(`${prefix}.${attn}.key.weight`, s, s);
      matrix(`${prefix}.${attn}.value.weight`, s, s);
      vector(`${prefix}.${attn}.value.bias`, s, { kind: 'zeros' });
      matrix(`${prefix}.${attn}.out.weight`, s, s);
      vector(`${prefix}.${attn}.out.bias`, s, { kind: 'zeros' });
    }
    vector(`${prefix}.mlp_ln.weight`, s, { kind: 'ones' });
    vector(`${prefix}.mlp_ln.bias`, s, { kind: 'zeros' });
    matrix(`${prefix}.mlp.0.weight`, s, 4 * s);
    vector(`${prefix}.mlp.0.bias`, 4 * s, { kind: 'zeros' });
    matrix(`${prefix}.mlp.2.weight`, 4 * s, s);
    vector(`${prefix}.mlp.2.bias`, s, { kind: 'zeros' });
  };

  out.push({ name: 'encoder.positional_embedding', ne: [s, spec.nAudioCtx], type: f32, init: { kind: 'uniform', scale: 0.1 } });
  // The convolutions are f16 unless the whole model is f32 (whisper.cpp's `vtype`).
  out.push({ name: 'encoder.conv1.weight', ne: [3, spec.nMels, s], type: w, init: { kind: 'uniform', scale: 1 / Math.sqrt(3 * spec.nMels) } });
  out.push({ name: 'encoder.conv1.bias', ne: [1, s], type: f32, init: { kind: 'zeros' } });
  out.push({ name: 'encoder.conv2.weight', ne: [3, s, s], type: w, init: { kind: 'uniform', scale: 1 / Math.sqrt(3 * s) } });
  out.push({ name: 'encoder.conv2.bias', ne: [1, s], type: f32, init: { kind: 'zeros' } });
  for (let i = 0; i < spec.nAudioLayer; i++) block(`encoder.blocks.${i}`, false);
  vector('encoder.ln_post.weight', s, { kind: 'ones' });
  vector('encoder.ln_post.bias', s, { kind: 'zeros' });

  out.push({ name: 'decoder.positional_embedding', ne: [s, spec.nTextCtx], type: f32, init: { kind: 'uniform', scale: 0.1 } });
  out.push({ name: 'decoder.token_embedding.weight', ne: [s, nVocab(spec)], type: w, init: { kind: 'uniform', scale: 0.5 } });
  for (let i = 0; i < spec.nTextLayer; i++) block(`decoder.blocks.${i}`, true);
  vector('decoder.ln.weight', s, { kind: 'ones' });
  vector('decoder.ln.bias', s, { kind: 'zeros' });
  return out;
}

const SYLLABLES = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'to', 'vi', 'da', 'pe', 'fu', 'go', 'hi', 'ja', 'ze', 'bo'];

/** Text token `id` as bytes: printable ASCII for the first 95, then space-led pseudo-words; all ASCII so any output is valid UTF-8. */
function tokenText(id: number): string {
  if (id === TEXT_TOKENS - 1) return '<|endoftext|>';
  if (id < 95) return String.fromCharCode(32 + id);
  let n = id - 95;
  let word = '';
  do {
    word += SYLLABLES[n & 15];
    n >>>= 4;
  } while (n > 0);
  return ` ${word}`;
}

/** whisper's 80-band (or n_mels) triangular mel filter bank over the 201 STFT bins, HTK mel scale. */
function melFilters(nMels: number): Float32Array {
  const mel = (hz: number): number => 2595 * Math.log10(1 + hz / 700);
  const hz = (m: number): number => 700 * (10 ** (m / 2595) - 1);
  const top = mel(SAMPLE_RATE / 2);
  const edges = Array.from({ length: nMels + 2 }, (_, i) => hz((top * i) / (nMels + 1)));
  const out = new Float32Array(nMels * N_FFT_BINS);
  for (let m = 0; m < nMels; m++) {
    const [lo, mid, hi] = [edges[m]!, edges[m + 1]!, edges[m + 2]!];
    for (let b = 0; b < N_FFT_BINS; b++) {
      const f = (b * SAMPLE_RATE) / 2 / (N_FFT_BINS - 1);
      const up = (f - lo) / (mid - lo);
      const down = (hi - f) / (hi - mid);
      // Slaney-style area normalisation keeps band energies comparable.
      out[m * N_FFT_BINS + b] = Math.max(0, Math.min(up, down)) * (2 / (hi - lo));
    }
  }
  return out;
}

function tensorDataBytes(t: TensorSpec): number {
  return t.ne.reduce((a, b) => a * b, 1) * (t.type === GGML_TYPE_F16 ? 2 : 4);
}

function tensorHeaderBytes(t: TensorSpec): number {
  return 12 + 4 * t.ne.length + Buffer.byteLength(t.name, 'ascii');
}

function headerAndVocab(spec: WhisperModelSpec): Uint8Array {
  const filters = melFilters(spec.nMels);
  const tokens = Array.from({ length: TEXT_TOKENS }, (_, i) => Buffer.from(tokenText(i), 'ascii'));
  const size = 4 + 11 * 4 + 8 + filters.byteLength + 4 + tokens.reduce((sum, t) => sum + 4 + t.length, 0);
  const bytes = new Uint8Array(size);
  const view = new DataView(bytes.buffer);
  let at = 0;
  const i32 = (v: number): void => {
    view.setInt32(at, v, true);
    at += 4;
  };
  view.setUint32(at, GGML_FILE_MAGIC, true);
  at += 4;
  for (const v of [nVocab(spec), spec.nAudioCtx, spec.nState, spec.nAudioHead, spec.nAudioLayer, spec.nTextCtx, spec.nState, spec.nTextHead, spec.nTextLayer, spec.nMels, spec.tensorType === 'f16' ? 1 : 0]) i32(v);
  i32(spec.nMels);
  i32(N_FFT_BINS);
  for (const f of filters) {
    view.setFloat32(at, f, true);
    at += 4;
  }
  i32(TEXT_TOKENS);
  for (const t of tokens) {
    i32(t.length);
    bytes.set(t, at);
    at += t.length;
  }
  return bytes;
}

/** The file's exact size in bytes, without generating it. */
export function whisperModelBytes(spec: WhisperModelSpec): number {
  validate(spec);
  const filters = spec.nMels * N_FFT_BINS * 4;
  let vocab = 4;
  for (let i = 0; i < TEXT_TOKENS; i++) vocab += 4 + tokenText(i).length;
  let total = 4 + 11 * 4 + 8 + filters + vocab;
  for (const t of tensorList(spec)) total += tensorHeaderBytes(t) + tensorDataBytes(t);
  return total;
}

const CHUNK_ELEMENTS = 1 << 16;

/** The file as a sequence of byte chunks, generated on the fly (the token embedding alone is megabytes). */
function* modelChunks(spec: WhisperModelSpec): Generator<Uint8Array> {
  yield headerAndVocab(spec);
  for (const t of tensorList(spec)) {
    const header = new Uint8Array(tensorHeaderBytes(t));
    const hv = new DataView(header.buffer);
    hv.setInt32(0, t.ne.length, true);
    hv.setInt32(4, t.name.length, true);
    hv.setInt32(8, t.type, true);
    t.ne.forEach((n, i) => hv.setInt32(12 + 4 * i, n, true));
    header.set(Buffer.from(t.name, 'ascii'), 12 + 4 * t.ne.length);
    yield header;

    const count = t.ne.reduce((a, b) => a * b, 1);
    const rng = new Xoshiro128(spec.seed, t.name);
    const bpe = t.type === GGML_TYPE_F16 ? 2 : 4;
    for (let first = 0; first < count; first += CHUNK_ELEMENTS) {
      const n = Math.min(CHUNK_ELEMENTS, count - first);
      const chunk = new Uint8Array(n * bpe);
      const view = new DataView(chunk.buffer);
      for (let i = 0; i < n; i++) {
        const init = t.init;
        const value = init.kind === 'zeros' ? 0 : init.kind === 'ones' ? 1 : rng.nextSigned() * init.scale;
        if (bpe === 2) view.setUint16(i * 2, f32ToF16Bits(value), true);
        else view.setFloat32(i * 4, value, true);
      }
      yield chunk;
    }
  }
}

/** The whole file in memory (tests; the generator writes it in chunks). */
export function whisperModelFileBytes(spec: WhisperModelSpec): Uint8Array {
  validate(spec);
  const out = new Uint8Array(whisperModelBytes(spec));
  let at = 0;
  for (const chunk of modelChunks(spec)) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/** Writes the model to `path` atomically (temp file + rename); returns the size in bytes. */
export async function generateWhisperModel(spec: WhisperModelSpec, path: string, opts: { signal?: AbortSignal } = {}): Promise<number> {
  validate(spec);
  await mkdir(dirname(path), { recursive: true });
  const tempPath = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const handle = await open(tempPath, 'wx');
  let renamed = false;
  try {
    let position = 0;
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    const flush = async (): Promise<void> => {
      if (pendingBytes === 0) return;
      const buffer = Buffer.concat(pending, pendingBytes);
      let done = 0;
      while (done < buffer.length) {
        const { bytesWritten } = await handle.write(buffer, done, buffer.length - done, position + done);
        done += bytesWritten;
      }
      position += buffer.length;
      pending = [];
      pendingBytes = 0;
    };
    for (const chunk of modelChunks(spec)) {
      opts.signal?.throwIfAborted();
      pending.push(chunk);
      pendingBytes += chunk.length;
      if (pendingBytes >= 1 << 20) await flush();
    }
    await flush();
    await handle.sync();
    await handle.close();
    await rename(tempPath, path);
    renamed = true;
    return position;
  } finally {
    if (!renamed) {
      await handle.close().catch(() => undefined);
      await rm(tempPath, { force: true });
    }
  }
}

/** Returns `path`, generating the model there first if no file exists (an existing file is kept as it is). */
export async function ensureGeneratedWhisperModel(spec: WhisperModelSpec, path: string, opts: { signal?: AbortSignal } = {}): Promise<string> {
  try {
    await access(path);
    return path;
  } catch {
    await generateWhisperModel(spec, path, opts);
    return path;
  }
}
