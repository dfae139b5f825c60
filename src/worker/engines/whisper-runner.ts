// A speech-to-text part: a whisper model loaded in this process through the whisper.cpp binding
// (src/speech/stt/whisper-engine.ts), serving `transcribe` tasks one at a time in arrival order, with
// the queue positions, load figures and lifetimes every engine gives (src/worker/runner-contract.ts).

import { AsyncQueue } from '../../common/async-queue.js';
import { ShoalError, errorMessage, toShoalError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { WhisperEngine } from '../../speech/stt/whisper-engine.js';
import { decodeTaskAudio } from '../../wire/audio.js';
import { TRANSCRIBE_SAMPLE_RATE, type RunnerTask, type TaskEvent, type TranscribeTask } from '../../wire/task.js';
import type { InstanceRunner, RunnerState, RunnerStatus } from '../runner-contract.js';

/** Transcriptions that may wait behind the one running; the next is refused (429 upstream). */
export const WHISPER_MAX_QUEUED = 16;
/** whisper's encoder frames per second of audio (a 30 s window is 1500 frames): the `start` event's prompt size. */
const ENCODER_FRAMES_PER_SECOND = 50;

export interface WhisperRunnerOptions {
  modelPath: string;
  threads: number;
  log: Logger;
  onChange?: () => void;
}

interface Waiter {
  admit: () => void;
  position: (n: number) => void;
}

export class WhisperRunner implements InstanceRunner {
  private state: RunnerState = 'starting';
  private reason: string | null = 'loading the whisper model';
  private engine: WhisperEngine | null = null;
  private readonly loaded: Promise<void>;
  private readonly load = new AbortController();
  private busy = false;
  private readonly waiting: Waiter[] = [];
  private readonly open = new Set<AbortController>();

  constructor(private readonly options: WhisperRunnerOptions) {
    this.loaded = WhisperEngine.load(options.modelPath, { threads: options.threads, signal: this.load.signal }).then(
      (engine) => {
        if (this.state === 'stopped') {
          void engine[Symbol.asyncDispose]();
          return;
        }
        this.engine = engine;
        this.set('ready', null);
        options.log.info({ modelPath: options.modelPath, threads: options.threads }, 'whisper model loaded');
      },
      (error: unknown) => {
        if (this.state === 'stopped') return;
        this.set('failed', `the whisper model did not load: ${errorMessage(error)}`);
        options.log.error({ err: error, modelPath: options.modelPath }, this.reason ?? 'the whisper model did not load');
      },
    );
  }

  status(): RunnerStatus {
    return {
      state: this.state,
      reason: this.reason,
      // In this process: there is no engine process of its own to report.
      pid: null,
      restarts: 0,
      inFlight: this.busy ? 1 : 0,
      queued: this.waiting.length,
      contextSize: null,
      sequences: 1,
      gpu: false,
      model: null,
    };
  }

  async whenReady(signal?: AbortSignal): Promise<void> {
    const aborted = new Promise<never>((_, reject) => {
      if (signal === undefined) return;
      const fail = (): void => reject(new ShoalError('CANCELLED', 'stopped waiting for the whisper model to load'));
      if (signal.aborted) fail();
      else signal.addEventListener('abort', fail, { once: true });
    });
    await Promise.race([this.loaded, aborted]);
    if (this.state === 'ready') return;
    if (this.state === 'stopped') throw new ShoalError('RUNNER_STOPPED', 'the speech-to-text part was stopped');
    throw new ShoalError('MODEL_FAILED', this.reason ?? 'the whisper model did not load');
  }

  run(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    if (task.kind !== 'transcribe') throw new ShoalError('CAPABILITY_MISSING', 'this is a speech-to-text model: it transcribes audio (POST /v1/audio/transcriptions) and generates no text from prompts');
    if (this.state === 'stopped') throw new ShoalError('RUNNER_STOPPED', 'the speech-to-text part was stopped');
    if (this.state === 'failed') throw new ShoalError('MODEL_FAILED', this.reason ?? 'the whisper model did not load');
    if (this.waiting.length >= WHISPER_MAX_QUEUED) {
      throw new ShoalError('QUEUE_FULL', `${WHISPER_MAX_QUEUED} transcriptions already wait for this model: retry shortly, or place another replica`);
    }
    const events = new AsyncQueue<TaskEvent>();
    void this.serve(task, signal, events);
    return events;
  }

  private async serve(task: TranscribeTask, signal: AbortSignal, events: AsyncQueue<TaskEvent>): Promise<void> {
    const controller = new AbortController();
    const stop = (): void => controller.abort(signal.reason);
    signal.addEventListener('abort', stop, { once: true });
    this.open.add(controller);
    let admitted = false;
    try {
      await this.admit(controller.signal, (position) => events.push({ type: 'queued', position }));
      admitted = true;
      await this.whenReady(controller.signal);
      const samples = decodeTaskAudio(task.audio);
      const durationS = samples.length / TRANSCRIBE_SAMPLE_RATE;
      events.push({ type: 'start', promptTokens: Math.ceil(durationS * ENCODER_FRAMES_PER_SECOND) });
      const transcript = await (this.engine as WhisperEngine).transcribe(samples, {
        ...(task.language !== null ? { language: task.language } : {}),
        ...(task.prompt !== null ? { prompt: task.prompt } : {}),
        translate: task.translate,
        wordTimestamps: task.wordTimestamps,
        temperature: task.temperature,
        signal: controller.signal,
      });
      events.push({ type: 'transcript', language: transcript.language, durationS: transcript.durationS, text: transcript.text, segments: transcript.segments });
      events.push({ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 0, completionTokens: 0 } });
      events.end();
    } catch (error) {
      const failure = controller.signal.aborted && this.state === 'stopped' ? new ShoalError('RUNNER_STOPPED', 'the speech-to-text part was stopped') : toShoalError(error);
      events.fail(failure);
    } finally {
      signal.removeEventListener('abort', stop);
      this.open.delete(controller);
      if (admitted) this.release();
    }
  }

  /** Resolves when it is this request's turn; reports its place in line meanwhile. */
  private admit(signal: AbortSignal, position: (n: number) => void): Promise<void> {
    if (!this.busy) {
      this.busy = true;
      this.options.onChange?.();
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        admit: () => {
          signal.removeEventListener('abort', leave);
          resolve();
        },
        position,
      };
      const leave = (): void => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        this.reportPositions();
        reject(new ShoalError('CANCELLED', 'the transcription was cancelled while it waited'));
      };
      signal.addEventListener('abort', leave, { once: true });
      this.waiting.push(waiter);
      position(this.waiting.length);
      this.options.onChange?.();
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next === undefined) this.busy = false;
    else next.admit();
    this.reportPositions();
    this.options.onChange?.();
  }

  private reportPositions(): void {
    this.waiting.forEach((waiter, i) => waiter.position(i + 1));
  }

  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.set('stopped', 'stopped');
    this.load.abort();
    for (const controller of this.open) controller.abort(new ShoalError('RUNNER_STOPPED', 'the speech-to-text part was stopped'));
    await this.loaded;
    const engine = this.engine;
    this.engine = null;
    await engine?.[Symbol.asyncDispose]();
  }

  private set(state: RunnerState, reason: string | null): void {
    this.state = state;
    this.reason = reason;
    this.options.onChange?.();
  }
}

/**
 * Whether the whisper.cpp binding loads on this machine (its prebuilt for the platform is there), so
 * the node may advertise `whisper-cpu`. Looked at once per start.
 */
export async function whisperBindingLoads(log: Pick<Logger, 'info'>): Promise<boolean> {
  try {
    const binding = await import('@fugood/whisper.node');
    await binding.loadWhisperModule('default');
    return true;
  } catch (error) {
    log.info(`the whisper.cpp binding does not load here, so this node runs no speech-to-text models: ${errorMessage(error)}`);
    return false;
  }
}
