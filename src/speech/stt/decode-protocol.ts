import type { ErrorCode } from '../../common/errors.js';

/** The messages between the node and its audio decode worker thread (src/speech/stt/decode-worker.ts). Plain data. */

export interface DecodeJob {
  type: 'decode';
  id: number;
  /** The upload, its buffer transferred (the node keeps no copy). */
  bytes: Uint8Array;
  maxSeconds: number;
}

/** Stops the job with this id if it is still decoding; the worker answers `cancelled` (or its result, if it had finished). */
export interface DecodeCancel {
  type: 'cancel';
  id: number;
}

export type ToDecodeWorker = DecodeJob | DecodeCancel;

export type FromDecodeWorker =
  /** `samples`' buffer is transferred. */
  | { type: 'decoded'; id: number; samples: Float32Array; durationS: number; format: string; decodeMs: number }
  | { type: 'cancelled'; id: number }
  /** A ShoalError from the decoder, rebuilt on the node with the same code, message and param. */
  | { type: 'failed'; id: number; code: ErrorCode; message: string; param: string | null };
