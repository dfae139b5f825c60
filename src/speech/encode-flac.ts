import { createHash } from 'node:crypto';
import { pcm16le } from './encode-wav.js';

/**
 * 16-bit mono PCM as a FLAC stream with verbatim subframes: no prediction, so the file is as large as
 * a WAV, but every FLAC decoder reads it and the format needs no native encoder. Pure.
 */

/** Samples per frame; every frame but the last holds exactly this many. */
export const FLAC_BLOCK_SAMPLES = 4096;

/** FLAC's frame-header codes for the sample rates it can name there; others say "see STREAMINFO" (0). */
const RATE_CODES: Readonly<Record<number, number>> = { 8000: 4, 16000: 5, 22050: 6, 24000: 7, 32000: 8, 44100: 9, 48000: 10 };

export function encodeFlac(samples: Int16Array, sampleRate: number): Uint8Array {
  const parts: Uint8Array[] = [new TextEncoder().encode('fLaC'), streamInfo(samples, sampleRate)];
  for (let first = 0, frame = 0; first < samples.length; first += FLAC_BLOCK_SAMPLES, frame++) {
    parts.push(flacFrame(samples.subarray(first, first + FLAC_BLOCK_SAMPLES), frame, sampleRate));
  }
  const out = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/**
 * The only metadata block (last-block flag set): block sizes, rate, one channel, 16 bits, the sample
 * count, frame sizes unknown (0), and the MD5 of the samples (little-endian), which decoders verify.
 */
function streamInfo(samples: Int16Array, sampleRate: number): Uint8Array {
  const totalSamples = samples.length;
  const bits = new BitWriter();
  bits.write(1, 1); // last metadata block
  bits.write(0, 7); // STREAMINFO
  bits.write(34, 24);
  bits.write(FLAC_BLOCK_SAMPLES, 16);
  bits.write(FLAC_BLOCK_SAMPLES, 16);
  bits.write(0, 24); // min frame bytes: unknown
  bits.write(0, 24); // max frame bytes: unknown
  bits.write(sampleRate, 20);
  bits.write(0, 3); // channels - 1
  bits.write(15, 5); // bits per sample - 1
  bits.write(Math.floor(totalSamples / 2 ** 32), 4);
  bits.write(totalSamples >>> 0, 32);
  const info = bits.bytes();
  const withMd5 = new Uint8Array(info.length + 16);
  withMd5.set(info);
  withMd5.set(createHash('md5').update(pcm16le(samples)).digest(), info.length);
  return withMd5;
}

function flacFrame(block: Int16Array, frameNumber: number, sampleRate: number): Uint8Array {
  const bits = new BitWriter();
  bits.write(0b11111111111110, 14); // sync
  bits.write(0, 1);
  bits.write(0, 1); // fixed block size: frames are numbered
  bits.write(7, 4); // block size: 16 bits at the header's end
  bits.write(RATE_CODES[sampleRate] ?? 0, 4);
  bits.write(0, 4); // one channel
  bits.write(4, 3); // 16 bits per sample
  bits.write(0, 1);
  for (const byte of utf8Number(frameNumber)) bits.write(byte, 8);
  bits.write(block.length - 1, 16);
  bits.write(crc8(bits.bytes()), 8);
  bits.write(0, 1); // subframe padding
  bits.write(1, 6); // verbatim
  bits.write(0, 1); // no wasted bits
  for (const sample of block) bits.write(sample & 0xffff, 16);
  const frame = bits.bytes();
  const withCrc = new Uint8Array(frame.length + 2);
  withCrc.set(frame);
  const crc = crc16(frame);
  withCrc[frame.length] = crc >> 8;
  withCrc[frame.length + 1] = crc & 0xff;
  return withCrc;
}

/** FLAC codes frame numbers as UTF-8 would code them (up to 36 bits). */
function utf8Number(value: number): number[] {
  if (value < 0x80) return [value];
  const bytes: number[] = [];
  let rest = value;
  let room = 0x3f; // what the lead byte can still hold
  while (rest > room) {
    bytes.unshift(0x80 | (rest & 0x3f));
    rest = Math.floor(rest / 64);
    room >>= 1;
  }
  const lead = (0xff << (7 - bytes.length)) & 0xff;
  return [lead | rest, ...bytes];
}

function crc8(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let i = 0; i < 8; i++) crc = crc & 0x80 ? ((crc << 1) ^ 0x07) & 0xff : (crc << 1) & 0xff;
  }
  return crc;
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x8005) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** Big-endian bit packing, as FLAC writes everything. */
class BitWriter {
  private readonly out: number[] = [];
  private current = 0;
  private used = 0;

  write(value: number, width: number): void {
    // Whole bytes at a byte boundary (the samples): no bit loop.
    if (this.used === 0 && width % 8 === 0) {
      for (let shift = width - 8; shift >= 0; shift -= 8) this.out.push(Math.floor(value / 2 ** shift) & 0xff);
      return;
    }
    for (let bit = width - 1; bit >= 0; bit--) {
      this.current = (this.current << 1) | (Math.floor(value / 2 ** bit) & 1);
      if (++this.used === 8) {
        this.out.push(this.current);
        this.current = 0;
        this.used = 0;
      }
    }
  }

  /** The bytes so far; a partial last byte is padded with zero bits. */
  bytes(): Uint8Array {
    return Uint8Array.from(this.used === 0 ? this.out : [...this.out, this.current << (8 - this.used)]);
  }
}
