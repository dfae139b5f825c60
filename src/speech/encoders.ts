import { createMp3Encoder } from 'wasm-media-encoders';
import type { AudioFormat } from '../api/speech-port.js';
import { encodeFlac } from './encode-flac.js';
import { encodeWav, pcm16le } from './encode-wav.js';

/** The formats this node writes, in the order error messages name them; opus and aac need encoders Shoal does not ship. */
export const WRITTEN_FORMATS = ['mp3', 'wav', 'flac', 'pcm'] as const satisfies readonly AudioFormat[];
export type WrittenFormat = (typeof WRITTEN_FORMATS)[number];

/** 64 kbit/s keeps speech at 24 kHz clear (MPEG-2 layer III allows up to 160). */
const MP3_KBPS = 64;

/**
 * Encodes 16-bit mono PCM chunk by chunk. mp3 and pcm give bytes as they go; wav and flac headers
 * name the stream's length, so those two give the whole file at `end`.
 */
export interface StreamEncoder {
  write(samples: Int16Array): Uint8Array;
  end(): Uint8Array;
}

export async function createEncoder(format: WrittenFormat, sampleRate: number): Promise<StreamEncoder> {
  switch (format) {
    case 'pcm':
      return { write: pcm16le, end: () => new Uint8Array(0) };
    case 'wav':
      return wholeFile((samples) => encodeWav(samples, sampleRate));
    case 'flac':
      return wholeFile((samples) => encodeFlac(samples, sampleRate));
    case 'mp3': {
      const mp3 = await createMp3Encoder();
      mp3.configure({ channels: 1, sampleRate, bitrate: MP3_KBPS });
      // The encoder's output is a view into its WebAssembly memory, valid until its next call: copied.
      return {
        write: (samples) => mp3.encode([toFloat(samples)]).slice(),
        end: () => mp3.finalize().slice(),
      };
    }
  }
}

function wholeFile(encode: (samples: Int16Array) => Uint8Array): StreamEncoder {
  const chunks: Int16Array[] = [];
  return {
    write: (samples) => {
      chunks.push(samples);
      return new Uint8Array(0);
    },
    end: () => {
      const all = new Int16Array(chunks.reduce((sum, c) => sum + c.length, 0));
      let offset = 0;
      for (const chunk of chunks) {
        all.set(chunk, offset);
        offset += chunk.length;
      }
      return encode(all);
    },
  };
}

/** LAME here takes samples as floats in -1..1. A plain loop: `Float32Array.from` with a mapper is several times slower. */
function toFloat(samples: Int16Array): Float32Array {
  const out = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = samples[i]! / 32768;
  return out;
}
