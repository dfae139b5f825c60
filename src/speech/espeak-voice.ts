import { Worker } from 'node:worker_threads';
import { ShoalError, errorMessage } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import type { SpeechChunk, SpeechControl, SpeechRequest } from '../api/speech-port.js';
import { WRITTEN_FORMATS, type WrittenFormat } from './encoders.js';
import { resolveVoice, wordsPerMinute, type VoiceCatalog } from './voices.js';
import type { FromSpeechWorker, SpeechJob, SpeechWorkerData } from './worker-protocol.js';

/** The id the built-in voice is served as, on every node. */
export const SPEECH_MODEL_ID = 'shoal/voice';
/** OpenAI's own limit on `input`, in characters. */
export const MAX_INPUT_CHARS = 4096;
/** Requests waiting behind the one being synthesized; more get 429. */
export const MAX_QUEUED_SPEECH_REQUESTS = 16;
/** The most audio one request may make, in seconds: 4096 characters at the slowest rate stay under it. */
export const MAX_AUDIO_S = 600;
/** OpenAI's speech API answers at 24 kHz (its `pcm` has no header that could say otherwise). */
export const OUTPUT_SAMPLE_RATE_HZ = 24_000;

export interface EspeakVoiceOptions {
  log: Logger;
  maxQueued?: number;
  maxAudioS?: number;
}

interface Job {
  message: SpeechJob;
  chunks: ChunkChannel;
  signal: AbortSignal;
  onAbort: () => void;
}

interface StartedWorker {
  worker: Worker;
  catalog: VoiceCatalog;
}

/**
 * The built-in voice: eSpeak NG compiled to WebAssembly, in one worker thread started at the first
 * request, so a long synthesis never holds up the node's event loop. Requests run one at a time in
 * arrival order, behind a bounded queue.
 */
export class EspeakVoice implements SpeechControl, AsyncDisposable {
  readonly modelId = SPEECH_MODEL_ID;
  readonly createdS = Math.floor(Date.now() / 1000);
  readonly formats = WRITTEN_FORMATS;
  readonly maxInputChars = MAX_INPUT_CHARS;
  private readonly log: Logger;
  private readonly maxQueued: number;
  private readonly maxAudioS: number;
  /** The running job's id, written here, tells the worker to stop it (it reads the cell between chunks). */
  private readonly cancelCell = new Int32Array(new SharedArrayBuffer(4));
  private starting: Promise<StartedWorker> | null = null;
  private readonly waiting: Job[] = [];
  private running: Job | null = null;
  private nextId = 1;
  private disposed = false;

  constructor(options: EspeakVoiceOptions) {
    this.log = options.log;
    this.maxQueued = options.maxQueued ?? MAX_QUEUED_SPEECH_REQUESTS;
    this.maxAudioS = options.maxAudioS ?? MAX_AUDIO_S;
  }

  async synthesize(request: SpeechRequest, signal: AbortSignal): Promise<AsyncIterable<SpeechChunk>> {
    const format = WRITTEN_FORMATS.find((f) => f === request.format);
    if (format === undefined) {
      throw new ShoalError('UNSUPPORTED_PARAMETER', `response_format '${request.format}' is not available on Shoal's built-in voice: use one of ${WRITTEN_FORMATS.join(', ')}`, { param: 'response_format' });
    }
    const { catalog } = await this.worker();
    const voice = resolveVoice(request.voice, catalog);
    if (voice === null) {
      throw new ShoalError('BAD_REQUEST', `unknown voice '${request.voice}': use an OpenAI voice name (alloy, echo, fable, onyx, nova, shimmer, ...) or an eSpeak NG voice such as en-us, de or en-us+f3 (docs/API.md)`, { param: 'voice' });
    }
    if (signal.aborted) throw cancelled();
    if (this.waiting.length >= this.maxQueued) {
      throw new ShoalError('QUEUE_FULL', `${this.waiting.length} speech requests are already waiting for the voice: retry shortly`);
    }
    const job = this.enqueue(this.jobMessage(request, voice, format), signal);
    return job.chunks;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    const stopped = new ShoalError('RUNNER_STOPPED', 'the node is stopping: send the request to another node or retry after its restart');
    for (const job of this.waiting.splice(0)) this.finish(job, stopped);
    if (this.running) this.finish(this.running, stopped);
    const starting = this.starting;
    this.starting = null;
    const started = await starting?.catch(() => null);
    await started?.worker.terminate();
  }

  private jobMessage(request: SpeechRequest, voice: string, format: WrittenFormat): SpeechJob {
    return { type: 'job', id: this.nextId++, text: request.text, voice, wordsPerMinute: wordsPerMinute(request.speed), format, sampleRate: OUTPUT_SAMPLE_RATE_HZ, maxAudioS: this.maxAudioS };
  }

  private enqueue(message: SpeechJob, signal: AbortSignal): Job {
    const chunks = new ChunkChannel(() => this.abort(job, cancelled()));
    const job: Job = { message, chunks, signal, onAbort: () => this.abort(job, cancelled()) };
    signal.addEventListener('abort', job.onAbort, { once: true });
    this.waiting.push(job);
    this.pump();
    return job;
  }

  /** Ends a job for its client: a waiting one leaves the queue, a running one is stopped in the worker. */
  private abort(job: Job, error: ShoalError): void {
    const index = this.waiting.indexOf(job);
    if (index >= 0) {
      this.waiting.splice(index, 1);
      this.finish(job, error);
    } else if (this.running === job) {
      Atomics.store(this.cancelCell, 0, job.message.id);
    }
  }

  /** Sends the next waiting job once the worker is free. */
  private pump(): void {
    if (this.running !== null || this.disposed) return;
    const job = this.waiting.shift();
    if (job === undefined) return;
    this.running = job;
    this.worker().then(
      ({ worker }) => worker.postMessage(job.message),
      (error: unknown) => this.finish(job, new ShoalError('INTERNAL', `the speech engine did not start: ${errorMessage(error)}`, { cause: error })),
    );
  }

  private worker(): Promise<StartedWorker> {
    if (this.disposed) return Promise.reject(new ShoalError('RUNNER_STOPPED', 'the node is stopping: send the request to another node or retry after its restart'));
    this.starting ??= this.startWorker();
    return this.starting;
  }

  private startWorker(): Promise<StartedWorker> {
    const workerData: SpeechWorkerData = { cancel: this.cancelCell.buffer as SharedArrayBuffer };
    const worker = new Worker(new URL('./speech-worker.js', import.meta.url), { workerData });
    // The HTTP server keeps the process alive while requests run; an idle voice must not.
    worker.unref();
    const started = new Promise<StartedWorker>((resolve, reject) => {
      // An error and the exit after it are one failure; a worker already replaced fails nobody.
      const failed = (error: Error): void => {
        reject(error);
        if (this.starting !== started) return;
        this.starting = null;
        if (this.running) this.finish(this.running, new ShoalError('INTERNAL', `the speech engine failed: ${error.message}`, { cause: error }));
      };
      worker.on('error', failed);
      worker.on('exit', (code) => {
        if (!this.disposed) failed(new Error(`its worker thread exited with code ${code}`));
      });
      worker.on('message', (message: FromSpeechWorker) => {
        if (message.type === 'ready') {
          this.log.info({ voices: message.catalog.voices.length }, 'the built-in voice (eSpeak NG) is ready');
          resolve({ worker, catalog: message.catalog });
        } else {
          this.fromWorker(message);
        }
      });
    });
    return started;
  }

  private fromWorker(message: Exclude<FromSpeechWorker, { type: 'ready' }>): void {
    const job = this.running;
    if (job === null || job.message.id !== message.id) return;
    switch (message.type) {
      case 'chunk':
        job.chunks.push({ bytes: message.bytes });
        return;
      case 'done':
        this.log.debug({ audioS: message.audioS, synthesisMs: message.synthesisMs }, 'speech synthesized');
        return this.finish(job, null);
      case 'cancelled':
        return this.finish(job, cancelled());
      case 'failed':
        return this.finish(job, new ShoalError(message.code, message.message, message.code === 'BAD_REQUEST' ? { param: 'input' } : {}));
    }
  }

  private finish(job: Job, error: ShoalError | null): void {
    job.signal.removeEventListener('abort', job.onAbort);
    if (error === null) job.chunks.end();
    else job.chunks.fail(error);
    if (this.running === job) {
      this.running = null;
      this.pump();
    }
  }
}

function cancelled(): ShoalError {
  return new ShoalError('CANCELLED', 'the client disconnected');
}

/** The chunks of one job, handed from the worker's messages to the HTTP response as they come. */
class ChunkChannel implements AsyncIterable<SpeechChunk> {
  private readonly buffered: SpeechChunk[] = [];
  private closed: { error: ShoalError | null } | null = null;
  private wake: (() => void) | null = null;

  /** `onStop` runs when the reader stops early (a `break`, a failed write). */
  constructor(private readonly onStop: () => void) {}

  push(chunk: SpeechChunk): void {
    this.buffered.push(chunk);
    this.wake?.();
  }

  end(): void {
    this.closed ??= { error: null };
    this.wake?.();
  }

  fail(error: ShoalError): void {
    this.closed ??= { error };
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<SpeechChunk> {
    let complete = false;
    try {
      for (;;) {
        const chunk = this.buffered.shift();
        if (chunk !== undefined) {
          yield chunk;
          continue;
        }
        if (this.closed !== null) {
          complete = true;
          if (this.closed.error !== null) throw this.closed.error;
          return;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
        this.wake = null;
      }
    } finally {
      if (!complete) this.onStop();
    }
  }
}
