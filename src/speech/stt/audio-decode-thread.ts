import { Worker } from 'node:worker_threads';
import { ShoalError, errorMessage } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import type { AudioDecoder, DecodedAudio } from '../../api/audio-port.js';
import type { FromDecodeWorker, ToDecodeWorker } from './decode-protocol.js';

/** Decodes waiting behind the one running; more get 429. */
export const MAX_QUEUED_DECODES = 8;
/** Upload bytes held by the waiting decodes (the running one not counted); a decode that would wait and pass it gets 429. */
export const MAX_QUEUED_DECODE_BYTES = 64 * 1024 * 1024;

export interface AudioDecodeThreadOptions {
  log: Logger;
  maxQueued?: number;
  maxQueuedBytes?: number;
}

interface Job {
  id: number;
  /** The upload until it is sent to the worker (then transferred, so dropped here). */
  bytes: Uint8Array | null;
  byteLength: number;
  maxSeconds: number;
  signal: AbortSignal | undefined;
  onAbort: () => void;
  resolve: (decoded: DecodedAudio) => void;
  reject: (error: unknown) => void;
  settled: boolean;
}

/**
 * Fills the port `AudioDecoder` with decodeAudio (./audio.ts) run in one worker thread per node,
 * started at the first upload and ended with the node, so that a long decode spends none of the
 * event loop's time (the node relays token streams on it). Decodes run one at a time in arrival
 * order, behind a queue bounded in count and in bytes. A thread that dies (out of memory, a crash)
 * fails the decode it held; the next decode starts a fresh one.
 */
export class AudioDecodeThread implements AudioDecoder, AsyncDisposable {
  private readonly log: Logger;
  private readonly maxQueued: number;
  private readonly maxQueuedBytes: number;
  private worker: Worker | null = null;
  private readonly waiting: Job[] = [];
  private waitingBytes = 0;
  /** The job the worker holds; it stays here after its client left until the worker answers, so jobs never overlap. */
  private running: Job | null = null;
  private nextId = 1;
  private disposed = false;

  constructor(options: AudioDecodeThreadOptions) {
    this.log = options.log;
    this.maxQueued = options.maxQueued ?? MAX_QUEUED_DECODES;
    this.maxQueuedBytes = options.maxQueuedBytes ?? MAX_QUEUED_DECODE_BYTES;
  }

  /** The bytes are handed to the worker thread: their buffer is transferred (detached here) unless it is shared or pooled. */
  decode(bytes: Uint8Array, opts: { maxSeconds: number; signal?: AbortSignal }): Promise<DecodedAudio> {
    if (this.disposed) return Promise.reject(stopped());
    if (opts.signal?.aborted) return Promise.reject(opts.signal.reason as unknown);
    if (this.waiting.length >= this.maxQueued) {
      return Promise.reject(new ShoalError('QUEUE_FULL', `${this.waiting.length} audio uploads are already waiting to be decoded: retry shortly`));
    }
    if (this.running !== null && this.waitingBytes + bytes.byteLength > this.maxQueuedBytes) {
      return Promise.reject(new ShoalError('QUEUE_FULL', `${mib(this.waitingBytes)} MiB of audio uploads are already waiting to be decoded (the limit is ${mib(this.maxQueuedBytes)} MiB): retry shortly`));
    }
    return new Promise<DecodedAudio>((resolve, reject) => {
      const job: Job = { id: this.nextId++, bytes, byteLength: bytes.byteLength, maxSeconds: opts.maxSeconds, signal: opts.signal, onAbort: () => this.abort(job), resolve, reject, settled: false };
      opts.signal?.addEventListener('abort', job.onAbort, { once: true });
      this.waiting.push(job);
      this.waitingBytes += job.byteLength;
      this.pump();
    });
  }

  /**
   * Ends the worker thread the way a crash would: the decode it holds fails with INTERNAL and the
   * next decode starts a fresh thread. For tests, which have no other way to make a thread die.
   */
  async crashThreadForTests(): Promise<void> {
    await this.worker?.terminate();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    for (const job of this.waiting.splice(0)) this.settle(job, stopped());
    this.waitingBytes = 0;
    if (this.running) this.settle(this.running, stopped());
    this.running = null;
    const worker = this.worker;
    this.worker = null;
    await worker?.terminate();
  }

  /** A waiting job leaves the queue; a running one is told to stop, and its client is answered at once. */
  private abort(job: Job): void {
    const index = this.waiting.indexOf(job);
    if (index >= 0) {
      this.waiting.splice(index, 1);
      this.waitingBytes -= job.byteLength;
    } else if (this.running === job) {
      this.worker?.postMessage({ type: 'cancel', id: job.id } satisfies ToDecodeWorker);
    }
    this.settle(job, job.signal?.reason);
  }

  /** Sends the next waiting job once the worker is free. */
  private pump(): void {
    if (this.running !== null || this.disposed) {
      return;
    }
    const job = this.waiting.shift();
    if (job === undefined) {
      // An idle thread must not keep the process alive; a busy one does, so a pending decode is never orphaned.
      this.worker?.unref();
      return;
    }
    this.waitingBytes -= job.byteLength;
    this.running = job;
    const bytes = transferable(job.bytes!);
    job.bytes = null;
    try {
      const worker = this.thread();
      worker.ref();
      worker.postMessage({ type: 'decode', id: job.id, bytes, maxSeconds: job.maxSeconds } satisfies ToDecodeWorker, [bytes.buffer as ArrayBuffer]);
    } catch (error) {
      this.running = null;
      this.settle(job, new ShoalError('INTERNAL', `the audio decoder's worker thread could not take the upload: ${errorMessage(error)}`, { cause: error }));
      this.pump();
    }
  }

  private thread(): Worker {
    if (this.worker !== null) return this.worker;
    const worker = new Worker(new URL('./decode-worker.js', import.meta.url));
    // An error and the exit after it are one failure; a thread already replaced fails nobody.
    const failed = (error: Error): void => {
      if (this.worker !== worker) return;
      this.worker = null;
      void worker.terminate();
      const job = this.running;
      this.running = null;
      this.log.warn({ err: error.message, decoding: job !== null }, 'the audio decode worker thread died; the next upload starts a fresh one');
      if (job) this.settle(job, new ShoalError('INTERNAL', `the audio decoder's worker thread failed (${error.message}): retry the request`, { cause: error }));
      this.pump();
    };
    worker.on('error', failed);
    worker.on('exit', (code) => {
      if (!this.disposed) failed(new Error(`it exited with code ${code}`));
    });
    worker.on('message', (message: FromDecodeWorker) => this.fromWorker(message));
    this.worker = worker;
    return worker;
  }

  private fromWorker(message: FromDecodeWorker): void {
    const job = this.running;
    if (job === null || job.id !== message.id) return;
    this.running = null;
    switch (message.type) {
      case 'decoded':
        this.log.debug({ format: message.format, durationS: message.durationS, decodeMs: Math.round(message.decodeMs) }, 'audio decoded');
        this.settle(job, null, { samples: message.samples, durationS: message.durationS, format: message.format });
        break;
      case 'cancelled':
        this.log.debug({ id: job.id }, 'audio decode stopped: its client left');
        this.settle(job, job.signal?.reason);
        break;
      case 'failed':
        this.settle(job, new ShoalError(message.code, message.message, { param: message.param }));
        break;
    }
    this.pump();
  }

  private settle(job: Job, error: unknown, decoded?: DecodedAudio): void {
    if (job.settled) return;
    job.settled = true;
    job.signal?.removeEventListener('abort', job.onAbort);
    if (decoded !== undefined) job.resolve(decoded);
    else job.reject(error);
  }
}

/** The bytes in a buffer of their own that can be transferred: Buffer's pool and shared memory cannot, so those few are copied. */
function transferable(bytes: Uint8Array): Uint8Array {
  const whole = bytes.buffer instanceof ArrayBuffer && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
  return whole ? bytes : new Uint8Array(bytes);
}

function mib(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}

function stopped(): ShoalError {
  return new ShoalError('RUNNER_STOPPED', 'the node is stopping: send the request to another node or retry after its restart');
}
