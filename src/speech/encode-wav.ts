/** 16-bit mono PCM as bytes and as a WAV file. Pure. */

/** The samples as little-endian 16-bit bytes, which is OpenAI's `pcm` format (no header). */
export function pcm16le(samples: Int16Array): Uint8Array {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) view.setInt16(i * 2, samples[i]!, true);
  return bytes;
}

/** A canonical 44-byte-header RIFF WAVE file: PCM, one channel, 16 bits. */
export function encodeWav(samples: Int16Array, sampleRate: number): Uint8Array {
  const data = pcm16le(samples);
  const bytes = new Uint8Array(44 + data.length);
  const view = new DataView(bytes.buffer);
  const ascii = (offset: number, text: string): void => {
    for (let i = 0; i < text.length; i++) bytes[offset + i] = text.charCodeAt(i);
  };
  ascii(0, 'RIFF');
  view.setUint32(4, 36 + data.length, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  view.setUint32(16, 16, true); // fmt chunk size
  view.setUint16(20, 1, true); // PCM
  view.setUint16(22, 1, true); // channels
  view.setUint32(24, sampleRate, true);
  view.setUint32(28, sampleRate * 2, true); // bytes per second
  view.setUint16(32, 2, true); // block align
  view.setUint16(34, 16, true); // bits per sample
  ascii(36, 'data');
  view.setUint32(40, data.length, true);
  bytes.set(data, 44);
  return bytes;
}
