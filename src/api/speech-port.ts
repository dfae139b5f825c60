/**
 * The port the HTTP API serves text to speech through (`POST /v1/audio/speech`, issue #19): the node
 * fills it with its built-in eSpeak NG voice (src/speech/). Plain types only.
 */

/** The audio containers OpenAI's speech API names; `SpeechControl.formats` says which this node writes. */
export const AUDIO_FORMATS = ['mp3', 'opus', 'aac', 'flac', 'wav', 'pcm'] as const;
export type AudioFormat = (typeof AUDIO_FORMATS)[number];

export interface SpeechRequest {
  text: string;
  /** An OpenAI voice name (`alloy`) or an eSpeak NG voice (`en-us`, `de`, `en-us+f3`). */
  voice: string;
  /** OpenAI's speed: 1 is the voice's normal rate, 0.25..4. */
  speed: number;
  format: AudioFormat;
}

export interface SpeechChunk {
  /** The next bytes of the encoded audio, in order. */
  bytes: Uint8Array;
}

export interface SpeechControl {
  /** The model id the voice is served as (`shoal/voice`), listed in `/v1/models`. */
  readonly modelId: string;
  /** When the voice became available, in Unix seconds (the model's `created`). */
  readonly createdS: number;
  /** The formats `synthesize` writes, in the order error messages name them. */
  readonly formats: readonly AudioFormat[];
  /** The longest `text` accepted, in characters. */
  readonly maxInputChars: number;
  /**
   * Queues a synthesis. Resolves once it is accepted (the format is written, the voice is known, the
   * queue had room), so those failures are typed errors before any byte; the chunks follow as they
   * are encoded. `signal` ends it, queued or running: the iterator then throws CANCELLED, as it does
   * when the synthesis fails midway (too much audio) with that error.
   */
  synthesize(request: SpeechRequest, signal: AbortSignal): Promise<AsyncIterable<SpeechChunk>>;
}
