// Uploaded audio to whisper's input: 16 kHz mono float samples. The container is sniffed from the bytes
// (never the file name or the declared content type), decoded by the audio-decode family of pure
// JavaScript / WebAssembly decoders (nothing is downloaded at run time), downmixed and resampled with a
// windowed-sinc filter.

import decode from 'audio-decode';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { ShoalError, errorMessage } from '../../common/errors.js';

export const STT_SAMPLE_RATE = 16_000;

export interface DecodedAudio {
  samples: Float32Array;
  durationS: number;
  /** What it was: 'wav' | 'mp3' | 'ogg' | 'flac' | 'webm' | 'm4a'. */
  format: string;
}

/** The containers decodeAudio accepts, as said in its refusal. */
export const SUPPORTED_AUDIO_FORMATS = ['wav', 'mp3', 'ogg (opus, vorbis)', 'flac', 'webm (opus, vorbis)', 'm4a / mp4 (aac, alac)'] as const;

type DecoderName = 'wav' | 'mp3' | 'opus' | 'oga' | 'flac' | 'webm' | 'm4a';

interface Sniffed {
  format: string;
  decoder: DecoderName;
}

const FEED_BYTES = 256 * 1024;

function ascii(bytes: Uint8Array, from: number, length: number): string {
  return String.fromCharCode(...bytes.subarray(from, from + length));
}

function indexOfAscii(bytes: Uint8Array, text: string, limit: number): number {
  const end = Math.min(bytes.length - text.length, limit);
  outer: for (let i = 0; i <= end; i++) {
    for (let j = 0; j < text.length; j++) if (bytes[i + j] !== text.charCodeAt(j)) continue outer;
    return i;
  }
  return -1;
}

/** The container from its magic bytes; null when it is none this decoder knows. */
export function sniffAudioFormat(bytes: Uint8Array): Sniffed | { format: string; decoder: null } | null {
  if (bytes.length >= 12 && ascii(bytes, 0, 4) === 'RIFF' && ascii(bytes, 8, 4) === 'WAVE') return { format: 'wav', decoder: 'wav' };
  if (bytes.length >= 4 && ascii(bytes, 0, 4) === 'fLaC') return { format: 'flac', decoder: 'flac' };
  if (bytes.length >= 4 && ascii(bytes, 0, 4) === 'OggS') {
    if (indexOfAscii(bytes, 'OpusHead', 512) >= 0) return { format: 'ogg', decoder: 'opus' };
    if (indexOfAscii(bytes, 'vorbis', 512) >= 0) return { format: 'ogg', decoder: 'oga' };
    if (indexOfAscii(bytes, 'FLAC', 512) >= 0) return { format: 'ogg (flac)', decoder: null };
    return { format: 'ogg', decoder: 'opus' };
  }
  if (bytes.length >= 4 && bytes[0] === 0x1a && bytes[1] === 0x45 && bytes[2] === 0xdf && bytes[3] === 0xa3) return { format: 'webm', decoder: 'webm' };
  if (bytes.length >= 8 && ascii(bytes, 4, 4) === 'ftyp') return { format: 'm4a', decoder: 'm4a' };
  if (bytes.length >= 3 && ascii(bytes, 0, 3) === 'ID3') return { format: 'mp3', decoder: 'mp3' };
  if (bytes.length >= 2 && bytes[0] === 0xff && (bytes[1]! & 0xe0) === 0xe0) {
    // MPEG audio frame sync; layer bits 00 are ADTS AAC, which has no container here.
    if ((bytes[1]! & 0x06) !== 0) return { format: 'mp3', decoder: 'mp3' };
    return { format: 'aac (adts)', decoder: null };
  }
  if (bytes.length >= 12 && ascii(bytes, 0, 4) === 'FORM' && ['AIFF', 'AIFC'].includes(ascii(bytes, 8, 4))) return { format: 'aiff', decoder: null };
  if (bytes.length >= 4 && ascii(bytes, 0, 4) === 'caff') return { format: 'caf', decoder: null };
  return null;
}

function unsupported(what: string): ShoalError {
  return new ShoalError('BAD_REQUEST', `${what}; supported formats: ${SUPPORTED_AUDIO_FORMATS.join(', ')}`, { param: 'file' });
}

function tooLong(maxSeconds: number): ShoalError {
  return new ShoalError('BAD_REQUEST', `the audio is longer than the limit of ${maxSeconds} s: send a shorter file (split it)`, { param: 'file' });
}

/** Sniffs the container from the bytes, decodes, downmixes to mono, resamples to 16 kHz (windowed sinc). */
export async function decodeAudio(bytes: Uint8Array, opts: { maxSeconds: number; signal?: AbortSignal }): Promise<DecodedAudio> {
  opts.signal?.throwIfAborted();
  if (bytes.length === 0) throw new ShoalError('BAD_REQUEST', 'the audio file is empty', { param: 'file' });
  const sniffed = sniffAudioFormat(bytes);
  if (sniffed === null) throw unsupported('the file is not audio in a format this server decodes (its first bytes match no known container)');
  if (sniffed.decoder === null) throw unsupported(`${sniffed.format} audio is not supported`);

  const corrupt = (cause?: unknown): ShoalError =>
    new ShoalError('BAD_REQUEST', `the ${sniffed.format} audio could not be decoded (truncated or corrupt${cause === undefined ? '' : `: ${errorMessage(cause)}`})`, { param: 'file', ...(cause === undefined ? {} : { cause }) });

  let decoder: Awaited<ReturnType<(typeof decode)[DecoderName]>>;
  try {
    decoder = await decode[sniffed.decoder]();
  } catch (error) {
    throw new ShoalError('INTERNAL', `the ${sniffed.format} decoder failed to start: ${errorMessage(error)}`, { cause: error });
  }

  const parts: Float32Array[][] = [];
  let sampleRate = 0;
  let frames = 0;
  const take = (data: { channelData: Float32Array[]; sampleRate: number }): void => {
    if (data.channelData.length === 0 || data.channelData[0]!.length === 0) return;
    if (sampleRate === 0) sampleRate = data.sampleRate;
    else if (data.sampleRate !== sampleRate) throw corrupt(new Error(`the sample rate changes mid-stream (${sampleRate} Hz, then ${data.sampleRate} Hz)`));
    parts.push(data.channelData);
    frames += data.channelData[0]!.length;
    if (sampleRate > 0 && frames / sampleRate > opts.maxSeconds + 0.001) throw tooLong(opts.maxSeconds);
  };

  let freed = false;
  try {
    for (let at = 0; at < bytes.length; at += FEED_BYTES) {
      opts.signal?.throwIfAborted();
      take(await decoder(bytes.subarray(at, at + FEED_BYTES)));
      await yieldToLoop();
    }
    opts.signal?.throwIfAborted();
    freed = true;
    take(await decoder());
  } catch (error) {
    if (!freed) {
      try {
        decoder.free();
      } catch {
        // already released
      }
    }
    if (error instanceof ShoalError || opts.signal?.aborted) throw error;
    throw corrupt(error);
  }
  if (frames === 0 || sampleRate <= 0) throw corrupt();

  const mono = downmix(parts, frames);
  for (const v of mono) if (!Number.isFinite(v)) throw corrupt(new Error('the decoder produced non-finite samples'));
  const samples = resample(mono, sampleRate, STT_SAMPLE_RATE);
  return { samples, durationS: frames / sampleRate, format: sniffed.format };
}

function downmix(parts: Float32Array[][], frames: number): Float32Array {
  const out = new Float32Array(frames);
  let at = 0;
  for (const channels of parts) {
    const n = channels[0]!.length;
    const scale = 1 / channels.length;
    for (const channel of channels) {
      for (let i = 0; i < n; i++) out[at + i]! += channel[i]! * scale;
    }
    at += n;
  }
  return out;
}

/** Zero crossings of the sinc kept on each side of the centre tap. */
const SINC_ZERO_CROSSINGS = 12;
/** Kernel table points per input sample (linear interpolation between them). */
const TABLE_RESOLUTION = 512;

/**
 * Band-limited resampling: each output sample is the input convolved with a Blackman-windowed sinc
 * whose cut-off sits just below the lower of the two Nyquist frequencies, so downsampling does not alias.
 */
export function resample(input: Float32Array, fromRate: number, toRate: number): Float32Array {
  if (fromRate === toRate) return input.slice();
  const ratio = toRate / fromRate;
  const outLength = Math.max(1, Math.round(input.length * ratio));
  // Cut-off in cycles per input sample.
  const fc = 0.5 * Math.min(1, ratio) * 0.96;
  const halfWidth = SINC_ZERO_CROSSINGS / (2 * fc);
  const tableLength = Math.ceil(halfWidth * TABLE_RESOLUTION) + 2;
  const table = new Float32Array(tableLength);
  for (let j = 0; j < tableLength; j++) {
    const t = j / TABLE_RESOLUTION;
    if (t > halfWidth) break;
    const x = 2 * fc * t;
    const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
    const u = t / halfWidth;
    const window = 0.42 + 0.5 * Math.cos(Math.PI * u) + 0.08 * Math.cos(2 * Math.PI * u);
    table[j] = 2 * fc * sinc * window;
  }
  const out = new Float32Array(outLength);
  const step = 1 / ratio;
  for (let n = 0; n < outLength; n++) {
    const t = n * step;
    const first = Math.max(0, Math.ceil(t - halfWidth));
    const last = Math.min(input.length - 1, Math.floor(t + halfWidth));
    let sum = 0;
    for (let k = first; k <= last; k++) {
      const pos = Math.abs(t - k) * TABLE_RESOLUTION;
      const i = pos | 0;
      const frac = pos - i;
      sum += input[k]! * (table[i]! + (table[i + 1]! - table[i]!) * frac);
    }
    out[n] = sum;
  }
  return out;
}
