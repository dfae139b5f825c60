// The audio decode worker thread: runs decodeAudio (sniffing, the audio-decode decoders, downmix and
// the windowed-sinc resampler) away from the node's event loop, which relays every other request's
// token stream. A cancel arrives as a message; decodeAudio yields between its 256 KiB chunks, so the
// message is read there and the job stops at the next chunk. The downmix and resample after the last
// chunk are one synchronous stretch that runs to its end (about 1 s for 120 s of 44.1 kHz audio).

import { parentPort } from 'node:worker_threads';
import { errorMessage, isShoalError } from '../../common/errors.js';
import { decodeAudio } from './audio.js';
import type { DecodeJob, FromDecodeWorker, ToDecodeWorker } from './decode-protocol.js';

const port = parentPort!;
const post = (message: FromDecodeWorker, transfer: ArrayBuffer[] = []): void => port.postMessage(message, transfer);
/** The job decoding now (the node sends the next only after this one has answered). */
let current: { id: number; controller: AbortController } | null = null;

port.on('message', (message: ToDecodeWorker) => {
  if (message.type === 'cancel') {
    if (current?.id === message.id) current.controller.abort();
    return;
  }
  void run(message);
});

async function run(job: DecodeJob): Promise<void> {
  const controller = new AbortController();
  current = { id: job.id, controller };
  const started = performance.now();
  try {
    const decoded = await decodeAudio(job.bytes, { maxSeconds: job.maxSeconds, signal: controller.signal });
    post({ type: 'decoded', id: job.id, samples: decoded.samples, durationS: decoded.durationS, format: decoded.format, decodeMs: performance.now() - started }, [decoded.samples.buffer as ArrayBuffer]);
  } catch (error) {
    if (controller.signal.aborted) post({ type: 'cancelled', id: job.id });
    else if (isShoalError(error)) post({ type: 'failed', id: job.id, code: error.code, message: error.message, param: error.param });
    else post({ type: 'failed', id: job.id, code: 'INTERNAL', message: `audio decoding failed: ${errorMessage(error)}`, param: null });
  } finally {
    current = null;
  }
}
