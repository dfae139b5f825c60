import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';

/**
 * Readers for the audio the built-in voice writes, written from the format specifications rather
 * than from Shoal's encoders, so a test that uses them checks the encoders against the formats.
 */

export interface Pcm {
  sampleRate: number;
  samples: Int16Array;
}

/** A canonical PCM WAVE file (RIFF, `fmt ` then `data`), mono 16-bit. */
export function parseWav(bytes: Uint8Array): Pcm {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const text = (offset: number): string => String.fromCharCode(...bytes.subarray(offset, offset + 4));
  assert.equal(text(0), 'RIFF');
  assert.equal(view.getUint32(4, true), bytes.length - 8, 'the RIFF size is the file length less 8');
  assert.equal(text(8), 'WAVE');
  assert.equal(text(12), 'fmt ');
  assert.equal(view.getUint16(20, true), 1, 'PCM');
  assert.equal(view.getUint16(22, true), 1, 'one channel');
  assert.equal(view.getUint16(34, true), 16, '16 bits');
  assert.equal(text(36), 'data');
  const dataBytes = view.getUint32(40, true);
  assert.equal(dataBytes, bytes.length - 44);
  return { sampleRate: view.getUint32(24, true), samples: pcmFromLE(bytes.subarray(44)) };
}

export function pcmFromLE(bytes: Uint8Array): Int16Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Int16Array.from({ length: Math.floor(bytes.length / 2) }, (_, i) => view.getInt16(i * 2, true));
}

/** Root mean square of the samples, as a fraction of full scale. */
export function rms(samples: Int16Array): number {
  let sum = 0;
  for (const s of samples) sum += (s / 32768) ** 2;
  return Math.sqrt(sum / Math.max(1, samples.length));
}

export interface Mp3Stream {
  frames: number;
  sampleRate: number;
  /** Seconds of audio the frames hold (each MPEG-2 layer III frame holds 576 samples, MPEG-1 1152). */
  durationS: number;
}

const MP3_RATES: Record<number, number[]> = { 3: [44100, 48000, 32000], 2: [22050, 24000, 16000], 0: [11025, 12000, 8000] };
const MP3_KBPS: Record<number, number[]> = {
  3: [0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320],
  2: [0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160],
};

/**
 * Walks an MP3 stream frame by frame (an ID3v2 tag or a Xing/LAME info frame first is allowed): each
 * frame header must have the sync word, layer III and a valid bitrate and rate, and the next frame
 * must start exactly where its length says, to the end of the stream.
 */
export function walkMp3(bytes: Uint8Array): Mp3Stream {
  let offset = 0;
  if (String.fromCharCode(...bytes.subarray(0, 3)) === 'ID3') {
    offset = 10 + ((bytes[6]! << 21) | (bytes[7]! << 14) | (bytes[8]! << 7) | bytes[9]!);
  }
  let frames = 0;
  let sampleRate = 0;
  let samples = 0;
  while (offset + 4 <= bytes.length) {
    const [b0, b1, b2] = [bytes[offset]!, bytes[offset + 1]!, bytes[offset + 2]!];
    assert.ok(b0 === 0xff && (b1 & 0xe0) === 0xe0, `frame ${frames} at byte ${offset} starts with the MPEG sync word`);
    const version = (b1 >> 3) & 3;
    assert.equal((b1 >> 1) & 3, 1, 'layer III');
    const rate = MP3_RATES[version]?.[(b2 >> 2) & 3];
    const kbps = MP3_KBPS[version === 3 ? 3 : 2]?.[b2 >> 4];
    assert.ok(rate !== undefined && kbps !== undefined && kbps > 0, `frame ${frames} has a valid rate and bitrate`);
    const perFrame = version === 3 ? 1152 : 576;
    const length = Math.floor(((perFrame / 8) * kbps * 1000) / rate) + ((b2 >> 1) & 1);
    sampleRate = rate;
    samples += perFrame;
    frames++;
    offset += length;
  }
  assert.equal(offset, bytes.length, 'the last frame ends at the end of the stream');
  return { frames, sampleRate, durationS: samples / Math.max(1, sampleRate) };
}

export interface FlacStreamInfo {
  minBlock: number;
  maxBlock: number;
  sampleRate: number;
  channels: number;
  bitsPerSample: number;
  totalSamples: number;
  md5: string;
}

/** The STREAMINFO block, which every FLAC stream starts with after `fLaC`. */
export function flacStreamInfo(bytes: Uint8Array): FlacStreamInfo {
  assert.equal(String.fromCharCode(...bytes.subarray(0, 4)), 'fLaC');
  assert.equal(bytes[4]! & 0x7f, 0, 'the first metadata block is STREAMINFO');
  assert.equal((bytes[5]! << 16) | (bytes[6]! << 8) | bytes[7]!, 34);
  const b = bytes.subarray(8, 8 + 34);
  const rateAndMore = (b[10]! << 16) | (b[11]! << 8) | b[12]!;
  return {
    minBlock: (b[0]! << 8) | b[1]!,
    maxBlock: (b[2]! << 8) | b[3]!,
    sampleRate: rateAndMore >>> 4,
    channels: ((rateAndMore >> 1) & 7) + 1,
    bitsPerSample: (((b[12]! & 1) << 4) | (b[13]! >> 4)) + 1,
    totalSamples: (b[13]! & 0x0f) * 2 ** 32 + ((b[14]! << 24) >>> 0) + (b[15]! << 16) + (b[16]! << 8) + b[17]!,
    md5: Buffer.from(b.subarray(18, 34)).toString('hex'),
  };
}

/**
 * Decodes a mono 16-bit FLAC stream made of verbatim subframes, checking each frame's sync code,
 * frame number, CRC-8 and CRC-16 (table-driven here, bit-serial in the encoder).
 */
export function decodeVerbatimFlac(bytes: Uint8Array): Int16Array {
  const info = flacStreamInfo(bytes);
  const out: number[] = [];
  let offset = 4 + 4 + 34;
  for (let frame = 0; offset < bytes.length; frame++) {
    const start = offset;
    assert.equal(bytes[offset], 0xff, `frame ${frame}: sync`);
    assert.equal(bytes[offset + 1]! & 0xfe, 0xf8, `frame ${frame}: sync`);
    assert.equal(bytes[offset + 2]! >> 4, 7, `frame ${frame}: block size in 16 bits`);
    assert.equal(bytes[offset + 3]! >> 4, 0, `frame ${frame}: one channel`);
    offset += 4;
    // The frame number, UTF-8 style.
    const lead = bytes[offset]!;
    const extra = lead < 0x80 ? 0 : Math.clz32(~(lead << 24)) - 1;
    let number = extra === 0 ? lead : lead & ((1 << (6 - extra)) - 1);
    for (let i = 1; i <= extra; i++) number = number * 64 + (bytes[offset + i]! & 0x3f);
    assert.equal(number, frame, 'frames are numbered in order');
    offset += extra + 1;
    const blockSize = ((bytes[offset]! << 8) | bytes[offset + 1]!) + 1;
    offset += 2;
    assert.equal(crc8Table(bytes.subarray(start, offset)), bytes[offset], `frame ${frame}: header CRC-8`);
    offset += 1;
    assert.equal(bytes[offset], 0x02, `frame ${frame}: a verbatim subframe`);
    offset += 1;
    for (let i = 0; i < blockSize; i++, offset += 2) out.push((((bytes[offset]! << 8) | bytes[offset + 1]!) << 16) >> 16);
    const crc = (bytes[offset]! << 8) | bytes[offset + 1]!;
    assert.equal(crc16Table(bytes.subarray(start, offset)), crc, `frame ${frame}: CRC-16`);
    offset += 2;
  }
  assert.equal(out.length, info.totalSamples, 'STREAMINFO counts the samples the frames hold');
  const samples = Int16Array.from(out);
  const le = Buffer.alloc(samples.length * 2);
  samples.forEach((s, i) => le.writeInt16LE(s, i * 2));
  assert.equal(createHash('md5').update(le).digest('hex'), info.md5, 'STREAMINFO holds the MD5 of the samples');
  return samples;
}

const CRC8 = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let i = 0; i < 8; i++) c = c & 0x80 ? ((c << 1) ^ 0x07) & 0xff : (c << 1) & 0xff;
  return c;
});
const CRC16 = Array.from({ length: 256 }, (_, n) => {
  let c = n << 8;
  for (let i = 0; i < 8; i++) c = c & 0x8000 ? ((c << 1) ^ 0x8005) & 0xffff : (c << 1) & 0xffff;
  return c;
});

function crc8Table(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) crc = CRC8[crc ^ b]!;
  return crc;
}

function crc16Table(bytes: Uint8Array): number {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) ^ CRC16[(crc >> 8) ^ b]!) & 0xffff;
  return crc;
}

/** A 16-bit mono WAV at `rate` Hz of `seconds` of a 440 Hz tone gliding up: what a microphone file looks like to a decoder. */
export function toneWav(seconds: number, rate = 44_100): Buffer {
  const samples = Math.round(seconds * rate);
  const out = Buffer.alloc(44 + samples * 2);
  wavHeader(rate, samples * 2).copy(out);
  for (let i = 0; i < samples; i++) out.writeInt16LE(Math.round(Math.sin((2 * Math.PI * (440 + i / rate * 200) * i) / rate) * 12_000), 44 + i * 2);
  return out;
}

/** The 44-byte header of a canonical 16-bit mono PCM WAVE file holding `dataBytes` of samples at `rate` Hz. */
export function wavHeader(rate: number, dataBytes: number): Buffer {
  const out = Buffer.alloc(44);
  out.write('RIFF', 0, 'latin1');
  out.writeUInt32LE(36 + dataBytes, 4);
  out.write('WAVEfmt ', 8, 'latin1');
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20);
  out.writeUInt16LE(1, 22);
  out.writeUInt32LE(rate, 24);
  out.writeUInt32LE(rate * 2, 28);
  out.writeUInt16LE(2, 32);
  out.writeUInt16LE(16, 34);
  out.write('data', 36, 'latin1');
  out.writeUInt32LE(dataBytes, 40);
  return out;
}
