// The header of whisper.cpp's ggml model file (`ggml-base.en.bin`): what a speech-to-text model is,
// read from its first 48 bytes as whisper.cpp 1.9.x `whisper_model_load` reads them. Pure.

/** The legacy ggml file magic, little-endian at offset 0 ('lmgg' on disk). */
export const GGML_FILE_MAGIC = 0x67676d6c;
/** The magic and the eleven int32 hyper-parameters. */
export const WHISPER_HEADER_BYTES = 4 + 11 * 4;

export interface WhisperHeader {
  vocabSize: number;
  audioContext: number;
  audioState: number;
  audioHeads: number;
  audioLayers: number;
  /** Decoder positions (448 in every released model). */
  textContext: number;
  textState: number;
  textHeads: number;
  textLayers: number;
  mels: number;
  /** ggml's ftype, with the quantization version folded in above 1000 (as whisper.cpp writes it). */
  ftype: number;
}

/** The header of a whisper ggml file from its first bytes; null when they are not one (a GGUF, too short, nonsense sizes). */
export function parseWhisperHeader(bytes: Uint8Array): WhisperHeader | null {
  if (bytes.length < WHISPER_HEADER_BYTES) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, WHISPER_HEADER_BYTES);
  if (view.getUint32(0, true) !== GGML_FILE_MAGIC) return null;
  const v = Array.from({ length: 11 }, (_, i) => view.getInt32(4 + 4 * i, true));
  const [vocabSize, audioContext, audioState, audioHeads, audioLayers, textContext, textState, textHeads, textLayers, mels, ftype] = v as [number, number, number, number, number, number, number, number, number, number, number];
  // Bounds far above any released model: past them the bytes are not a whisper header.
  const within = (n: number, max: number): boolean => n >= 1 && n <= max;
  if (!within(vocabSize, 1 << 20) || !within(audioContext, 1 << 16) || !within(textContext, 1 << 16) || !within(mels, 1024)) return null;
  if (![audioState, audioHeads, audioLayers, textState, textHeads, textLayers].every((n) => within(n, 1 << 16)) || ftype < 0) return null;
  return { vocabSize, audioContext, audioState, audioHeads, audioLayers, textContext, textState, textHeads, textLayers, mels, ftype };
}
