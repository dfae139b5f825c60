// What the API decodes uploaded audio through (speech to text, issue #19): the node fills it with the
// decoders of src/speech/stt/audio.ts, run in a worker thread (src/speech/stt/audio-decode-thread.ts). Plain types only.

/** An upload decoded to what whisper reads: mono float samples at 16 kHz. */
export interface DecodedAudio {
  samples: Float32Array;
  durationS: number;
  /** What the bytes were ('wav', 'mp3', ...), for the log. */
  format: string;
}

export interface AudioDecoder {
  /**
   * Sniffs the format from the bytes, decodes, downmixes and resamples. Rejects with BAD_REQUEST
   * (a message naming what works) for an empty, unknown, truncated or damaged file, or one longer
   * than `maxSeconds`; with QUEUE_FULL when too many uploads wait. The bytes are handed over: the
   * caller must not read them afterwards (their buffer may be transferred to another thread).
   */
  decode(bytes: Uint8Array, opts: { maxSeconds: number; signal?: AbortSignal }): Promise<DecodedAudio>;
}
