import type { WrittenFormat } from './encoders.js';
import type { VoiceCatalog } from './voices.js';

/** The messages between the node and its speech worker thread (src/speech/speech-worker.ts). Plain data. */

/** The worker's data at start: a cell the node writes a running job's id into to cancel it. */
export interface SpeechWorkerData {
  cancel: SharedArrayBuffer;
}

export interface SpeechJob {
  type: 'job';
  id: number;
  text: string;
  /** An eSpeak NG voice name, already resolved (src/speech/voices.ts). */
  voice: string;
  wordsPerMinute: number;
  format: WrittenFormat;
  /** The output sample rate, in Hz. */
  sampleRate: number;
  /** A job whose audio would run longer ends with a BAD_REQUEST, in seconds of audio. */
  maxAudioS: number;
}

export type FromSpeechWorker =
  | { type: 'ready'; catalog: VoiceCatalog }
  | { type: 'chunk'; id: number; bytes: Uint8Array }
  | { type: 'done'; id: number; audioS: number; synthesisMs: number }
  | { type: 'cancelled'; id: number }
  | { type: 'failed'; id: number; code: 'BAD_REQUEST' | 'INTERNAL'; message: string };
