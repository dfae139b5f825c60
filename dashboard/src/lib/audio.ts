// The chat page's audio arithmetic, kept free of DOM types so the unit tier runs it: microphone samples
// (Web Audio floats at the device's rate) resampled as they arrive, turned into the PCM16 the realtime
// route takes, and into the WAV the transcription route takes; the PCM16 the realtime route sends back
// turned into floats to play.

/** The realtime route's audio, both ways: PCM16 LE mono at 24 kHz (OpenAI's `audio/pcm`). */
export const REALTIME_SAMPLE_RATE = 24_000;
/**
 * Recordings for /v1/audio/transcriptions are uploaded at whisper's own rate: the node resamples to
 * 16 kHz anyway, and a third of the 48 kHz bytes keeps uploads small (32 KB per second).
 */
export const RECORDING_SAMPLE_RATE = 16_000;
/**
 * The longest recording the page keeps (docs/LIMITS.md): 5 minutes are 9.6 MB of WAV, well inside the
 * node's 25 MiB upload and 900 s audio limits, and a dictated message is never that long. The
 * recorder stops by itself there.
 */
export const MAX_RECORDING_S = 300;

/** Zero crossings of the sinc kept on each side of the centre tap. */
const SINC_ZERO_CROSSINGS = 8;
/** Kernel table points per input sample (linear interpolation between them). */
const TABLE_RESOLUTION = 256;

/**
 * Resamples a stream of chunks from `fromRate` to `toRate` with a Blackman-windowed sinc whose cut-off
 * sits just below the lower Nyquist frequency (as the node's own resampler, src/speech/stt/audio.ts,
 * but shorter: it runs on every microphone chunk in the page). It keeps the input the next outputs
 * still need, so chunk joins are seamless; each chunk's last outputs wait for the next chunk.
 */
export class StreamResampler {
  private readonly step: number;
  private readonly halfWidth: number;
  private readonly table: Float32Array;
  /** Where the next output sample sits, in input samples counted from the start of `tail`. */
  private position = 0;
  private tail = new Float32Array(0);

  constructor(
    readonly fromRate: number,
    readonly toRate: number,
  ) {
    if (!(fromRate > 0) || !(toRate > 0)) throw new RangeError(`sample rates must be positive (got ${fromRate} and ${toRate})`);
    this.step = fromRate / toRate;
    // Cut-off in cycles per input sample.
    const fc = 0.5 * Math.min(1, toRate / fromRate) * 0.9;
    this.halfWidth = SINC_ZERO_CROSSINGS / (2 * fc);
    const length = Math.ceil(this.halfWidth * TABLE_RESOLUTION) + 2;
    this.table = new Float32Array(length);
    for (let j = 0; j < length; j++) {
      const t = j / TABLE_RESOLUTION;
      if (t > this.halfWidth) break;
      const x = 2 * fc * t;
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * x) / (Math.PI * x);
      const u = t / this.halfWidth;
      this.table[j] = 2 * fc * sinc * (0.42 + 0.5 * Math.cos(Math.PI * u) + 0.08 * Math.cos(2 * Math.PI * u));
    }
    // The first output sits on the first input sample, whose past is silence.
    this.tail = new Float32Array(Math.ceil(this.halfWidth));
    this.position = this.tail.length;
  }

  push(chunk: Float32Array): Float32Array {
    if (this.fromRate === this.toRate) return chunk.slice();
    const input = new Float32Array(this.tail.length + chunk.length);
    input.set(this.tail);
    input.set(chunk, this.tail.length);
    const out: number[] = [];
    const { halfWidth, table } = this;
    while (this.position + halfWidth < input.length) {
      const t = this.position;
      const first = Math.max(0, Math.ceil(t - halfWidth));
      const last = Math.floor(t + halfWidth);
      let sum = 0;
      for (let k = first; k <= last; k++) {
        const pos = Math.abs(t - k) * TABLE_RESOLUTION;
        const i = pos | 0;
        sum += input[k]! * (table[i]! + (table[i + 1]! - table[i]!) * (pos - i));
      }
      out.push(sum);
      this.position += this.step;
    }
    const keepFrom = Math.max(0, Math.min(input.length, Math.ceil(this.position - halfWidth)));
    this.tail = input.slice(keepFrom);
    this.position -= keepFrom;
    return Float32Array.from(out);
  }
}

/** Floats in -1..1 to signed 16-bit, clamped (a microphone's gain can overshoot). */
export function floatToPcm16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const v = Math.max(-1, Math.min(1, samples[i]!));
    out[i] = v < 0 ? Math.round(v * 0x8000) : Math.round(v * 0x7fff);
  }
  return out;
}

/** PCM16 as little-endian bytes, whatever the machine's byte order. */
export function pcm16Bytes(pcm: Int16Array): Uint8Array {
  const bytes = new Uint8Array(pcm.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < pcm.length; i++) view.setInt16(i * 2, pcm[i]!, true);
  return bytes;
}

/** Little-endian PCM16 bytes to floats; a trailing odd byte (half a sample) is dropped. */
export function pcm16BytesToFloat(bytes: Uint8Array): Float32Array {
  const n = bytes.length >> 1;
  const view = new DataView(bytes.buffer, bytes.byteOffset, n * 2);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = view.getInt16(i * 2, true) / 0x8000;
  return out;
}

/** A 16-bit PCM mono WAV file of `samples` (floats) at `sampleRate`. */
export function encodeWav(samples: Float32Array, sampleRate: number): Uint8Array {
  const data = pcm16Bytes(floatToPcm16(samples));
  const out = new Uint8Array(44 + data.length);
  const view = new DataView(out.buffer);
  const text = (at: number, s: string): void => {
    for (let i = 0; i < s.length; i++) out[at + i] = s.charCodeAt(i);
  };
  text(0, 'RIFF');
  view.setUint32(4, 36 + data.length, true);
  text(8, 'WAVE');
  text(12, 'fmt ');
  view.setUint32(16, 16, true); // fmt chunk size
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // mono
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true); // bytes per second
  view.setUint16(32, 2, true); // bytes per frame
  view.setUint16(34, 16, true); // bits per sample
  text(36, 'data');
  view.setUint32(40, data.length, true);
  out.set(data, 44);
  return out;
}

/** Joins chunks into one array. */
export function concatSamples(chunks: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

// btoa and atob work on "binary strings"; chunks keep String.fromCharCode's argument list short.
const BASE64_CHUNK = 0x8000;

export function bytesToBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.length; i += BASE64_CHUNK) binary += String.fromCharCode(...bytes.subarray(i, i + BASE64_CHUNK));
  return btoa(binary);
}

/** Throws (a DOMException naming the character) on text that is not base64. */
export function base64ToBytes(text: string): Uint8Array {
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/**
 * When each chunk of a reply starts playing, so consecutive chunks join without a gap: right after
 * the previous one, or (after an underrun, or for the first chunk) a short lead after now, so a
 * chunk that arrives late does not start in the past and get clipped.
 */
export class PlaybackClock {
  private nextAt = 0;

  constructor(private readonly leadS = 0.05) {}

  /** The start time of a chunk of `durationS` that arrives at `nowS` (AudioContext time). */
  schedule(nowS: number, durationS: number): number {
    const at = Math.max(this.nextAt, nowS + this.leadS);
    this.nextAt = at + durationS;
    return at;
  }

  /** Seconds of scheduled audio still to play at `nowS`. */
  pendingS(nowS: number): number {
    return Math.max(0, this.nextAt - nowS);
  }

  reset(): void {
    this.nextAt = 0;
  }
}
