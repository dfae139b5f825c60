// Speech to text with whisper.cpp through @fugood/whisper.node. The binding runs each transcription on
// a libuv worker thread (a Napi::AsyncWorker), so the event loop stays free while it runs; loading the
// model happens synchronously in the binding's constructor (tens of ms for small models, up to a few
// seconds for the large ones, which the node accepts as part of a model load).
//
// Two quirks of the binding (seen in 1.1.1 and 1.1.3) shape this file:
// - its `stop()` only sets a flag that whisper.cpp never reads while decoding, and when the flag is set the
//   job's promise never settles (the error path calls back with one argument, which the binding's own
//   handler ignores); any native failure (e.g. "Transcription failed") likewise never settles. So this
//   engine never calls `stop()`, validates everything whisper.cpp would refuse beforehand, and cancels
//   by discarding: audio is fed in windows of at most 30 s, cut at the quietest moment near the end of
//   each window, and an abort rejects at once and starts no further window (the window in flight runs to
//   its end, and the next transcription queued on this engine waits for it).
// - it takes 16-bit PCM, not float, so samples are converted (whisper's mel front end does not need more).

import { open } from 'node:fs/promises';
import { initWhisper, toggleNativeLog, addNativeLogListener, type WhisperContext, type TranscribeOptions as NativeOptions, type TranscribeResult } from '@fugood/whisper.node';
import { ShoalError, errorMessage } from '../../common/errors.js';
import { STT_SAMPLE_RATE } from './audio.js';
import type { Transcript } from '../../wire/task.js';

type TranscriptSegment = Transcript['segments'][number];
type TranscriptWord = NonNullable<TranscriptSegment['words']>[number];

export interface TranscribeOptions {
  /** ISO-639-1 code (`en`, `de`, ...); absent: detected from the first window. */
  language?: string;
  prompt?: string;
  translate: boolean;
  wordTimestamps: boolean;
  /** 0 or absent: greedy with whisper's temperature fallback (+0.2 steps); above 0: sampled at that temperature, no fallback. */
  temperature?: number;
  signal?: AbortSignal;
}

// The transcript types live beside their formatter, which imports nothing, so it can move to the API layer.

/** The languages whisper.cpp 1.9 knows (`g_lang`), by ISO-639-1 code (plus haw, yue). */
export const WHISPER_LANGUAGES: ReadonlySet<string> = new Set(
  ('en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi ml cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd gu am yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue').split(' '),
);

/** Longest audio fed to whisper in one native call; also the bound on how long an abort waits. */
const WINDOW_S = 30;
/** A window is cut at the quietest 20 ms frame in its last this-many seconds, so words are rarely split. */
const CUT_SEARCH_S = 5;
/** whisper.cpp transcribes nothing from input of a second or less; shorter windows are padded with silence to this. */
const MIN_WINDOW_S = 2;
/** How much of the previous window's text is passed on as the next window's prompt. */
const CARRY_CHARS = 400;

// --- native log routing -----------------------------------------------------------------------------
// whisper.cpp logs to stderr unless a callback is set; the binding's callback is a thread-safe function
// that keeps the process alive, so it is on only while an engine is loaded. The last lines are kept to
// explain a failed load.
let liveEngines = 0;
const recentLog: string[] = [];
let logListener: { remove: () => void } | null = null;

async function retainNativeLog(): Promise<void> {
  liveEngines++;
  if (logListener) return;
  logListener = addNativeLogListener((level, text) => {
    if (level !== 'error' && level !== 'warn') return;
    recentLog.push(text.trim());
    if (recentLog.length > 20) recentLog.shift();
  });
  await toggleNativeLog(true);
}

async function releaseNativeLog(): Promise<void> {
  liveEngines = Math.max(0, liveEngines - 1);
  if (liveEngines > 0 || !logListener) return;
  logListener.remove();
  logListener = null;
  await toggleNativeLog(false);
}

function cancelled(): ShoalError {
  return new ShoalError('CANCELLED', 'the transcription was cancelled');
}

/** Float samples in [-1, 1] as little-endian 16-bit PCM, the binding's input, padded with silence to MIN_WINDOW_S. */
function toPcm16(samples: Float32Array): ArrayBuffer {
  const out = new Int16Array(Math.max(samples.length, MIN_WINDOW_S * STT_SAMPLE_RATE));
  for (let i = 0; i < samples.length; i++) {
    const v = samples[i]!;
    out[i] = v >= 1 ? 32767 : v <= -1 ? -32768 : Math.round(v * 32767);
  }
  return out.buffer;
}

/** Start and end sample of each window: at most WINDOW_S long, cut at the quietest frame near its end. */
export function windowBounds(samples: Float32Array): Array<[number, number]> {
  const max = WINDOW_S * STT_SAMPLE_RATE;
  const frame = STT_SAMPLE_RATE / 50;
  const out: Array<[number, number]> = [];
  let start = 0;
  while (samples.length - start > max) {
    // Leave at least MIN_WINDOW_S for the last window (whisper.cpp skips a final second or less).
    const limit = Math.min(start + max, samples.length - MIN_WINDOW_S * STT_SAMPLE_RATE);
    const searchFrom = limit - CUT_SEARCH_S * STT_SAMPLE_RATE;
    let best = limit;
    let bestEnergy = Infinity;
    for (let f = searchFrom; f + frame <= limit; f += frame) {
      let energy = 0;
      for (let i = f; i < f + frame; i++) energy += samples[i]! * samples[i]!;
      if (energy < bestEnergy) {
        bestEnergy = energy;
        best = f + frame / 2;
      }
    }
    out.push([start, best]);
    start = best;
  }
  out.push([start, samples.length]);
  return out;
}

interface NativeSegment {
  text: string;
  t0: number;
  t1: number;
}

/** Token-level segments (max_len 1) merged into words: a token that starts with a space starts a word. */
function tokensToWords(tokens: NativeSegment[], offsetS: number, limitS: number): TranscriptWord[] {
  const words: TranscriptWord[] = [];
  for (const token of tokens) {
    if (token.text === '') continue;
    const startS = clamp(offsetS + token.t0 / 1000, 0, limitS);
    const endS = clamp(offsetS + token.t1 / 1000, startS, limitS);
    const last = words.at(-1);
    if (last && !/^\s/.test(token.text)) {
      last.word += token.text;
      last.endS = Math.max(last.endS, endS);
    } else {
      words.push({ word: token.text.trim(), startS, endS });
    }
  }
  return words.filter((w) => w.word !== '');
}

/** Words grouped back into segments: at sentence ends, or after 1 s of silence between words. */
function wordsToSegments(words: TranscriptWord[]): TranscriptSegment[] {
  const segments: TranscriptSegment[] = [];
  let current: TranscriptWord[] = [];
  const close = (): void => {
    if (current.length === 0) return;
    segments.push({ startS: current[0]!.startS, endS: current.at(-1)!.endS, text: ` ${current.map((w) => w.word).join(' ')}`, words: current });
    current = [];
  };
  for (const word of words) {
    const previous = current.at(-1);
    if (previous && word.startS - previous.endS > 1) close();
    current.push(word);
    if (/[.!?。！？]$/.test(word.word)) close();
  }
  close();
  return segments;
}

function clamp(value: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, value));
}

/** Whether the model file's vocabulary is whisper's multilingual one (n_vocab >= 51865, the second int32 of the header). */
async function readMultilingual(modelPath: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(modelPath, 'r');
  } catch (error) {
    throw new ShoalError('MODEL_FAILED', `could not open the whisper model ${modelPath}: ${errorMessage(error)}`, { cause: error });
  }
  try {
    const head = Buffer.alloc(8);
    await handle.read(head, 0, 8, 0);
    return head.readInt32LE(4) >= 51_865;
  } finally {
    await handle.close();
  }
}

export class WhisperEngine implements AsyncDisposable {
  private readonly context: WhisperContext;
  private readonly threads: number;
  /** False for the English-only models (.en): they always transcribe English and cannot translate. */
  readonly multilingual: boolean;
  /** Settles when the jobs queued so far have settled (FIFO). */
  private tail: Promise<unknown> = Promise.resolve();
  /** Settles when the native call in flight, if any, has ended. */
  private nativeIdle: Promise<void> = Promise.resolve();
  private disposed = false;

  private constructor(context: WhisperContext, threads: number, multilingual: boolean) {
    this.context = context;
    this.threads = threads;
    this.multilingual = multilingual;
  }

  static async load(modelPath: string, opts: { threads: number; signal?: AbortSignal }): Promise<WhisperEngine> {
    if (!Number.isInteger(opts.threads) || opts.threads < 1) {
      throw new ShoalError('BAD_REQUEST', `whisper threads must be a positive integer, got ${String(opts.threads)}`);
    }
    opts.signal?.throwIfAborted();
    const multilingual = await readMultilingual(modelPath);
    await retainNativeLog();
    recentLog.length = 0;
    let context: WhisperContext;
    try {
      context = await initWhisper({ filePath: modelPath, useGpu: false });
    } catch (error) {
      // The native log lines of the failed load arrive on the event loop after the constructor threw.
      await new Promise((resolve) => setTimeout(resolve, 20));
      const why = recentLog.filter((line) => line !== '').slice(-3).join('; ');
      await releaseNativeLog();
      throw new ShoalError('MODEL_FAILED', `could not load ${modelPath} as a whisper model (whisper.cpp ggml format): ${why || errorMessage(error)}`, { cause: error });
    }
    if (opts.signal?.aborted) {
      await context.release();
      await releaseNativeLog();
      opts.signal.throwIfAborted();
    }
    return new WhisperEngine(context, opts.threads, multilingual);
  }

  transcribe(samples: Float32Array, opts: TranscribeOptions): Promise<Transcript> {
    if (this.disposed) return Promise.reject(new ShoalError('RUNNER_STOPPED', 'the whisper engine was closed'));
    const language = opts.language?.trim().toLowerCase();
    if (language !== undefined && language !== '' && !WHISPER_LANGUAGES.has(language)) {
      return Promise.reject(new ShoalError('BAD_REQUEST', `unknown language '${opts.language}': use an ISO-639-1 code whisper knows (e.g. en, de, fr, es, zh, ja)`, { param: 'language' }));
    }
    if (opts.temperature !== undefined && !(opts.temperature >= 0 && opts.temperature <= 1)) {
      return Promise.reject(new ShoalError('BAD_REQUEST', `temperature must be between 0 and 1, got ${String(opts.temperature)}`, { param: 'temperature' }));
    }
    const job = { ...opts, language: language || undefined };
    // FIFO: each job starts when the previous one has settled; see native() for work an abort left running.
    const run = this.tail.then(() => this.run(samples, job));
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async run(samples: Float32Array, opts: TranscribeOptions): Promise<Transcript> {
    const signal = opts.signal;
    if (signal?.aborted) throw cancelled();
    if (this.disposed) throw new ShoalError('RUNNER_STOPPED', 'the whisper engine was closed');
    const durationS = samples.length / STT_SAMPLE_RATE;
    let language = opts.language;
    const segments: TranscriptSegment[] = [];
    let carried = '';
    for (const [from, to] of windowBounds(samples)) {
      if (signal?.aborted) throw cancelled();
      const offsetS = from / STT_SAMPLE_RATE;
      const prompt = [opts.prompt ?? '', carried].filter((p) => p !== '').join(' ').slice(-CARRY_CHARS * 2);
      const native: NativeOptions = {
        language: language ?? 'auto',
        translate: opts.translate,
        maxThreads: this.threads,
        ...(prompt !== '' ? { prompt } : {}),
        ...(opts.temperature !== undefined && opts.temperature > 0 ? { temperature: opts.temperature, temperatureInc: 0 } : {}),
        ...(opts.wordTimestamps ? { tokenTimestamps: true, maxLen: 1 } : {}),
      };
      const result = await this.native(samples.subarray(from, to), native, signal);
      if (!this.multilingual) language = 'en';
      language ??= result.language && result.language !== '' ? result.language : undefined;
      const limitS = to / STT_SAMPLE_RATE;
      let windowSegments: TranscriptSegment[];
      if (opts.wordTimestamps) {
        windowSegments = wordsToSegments(tokensToWords(result.segments, offsetS, limitS));
      } else {
        windowSegments = result.segments
          .filter((s) => s.text.trim() !== '')
          .map((s) => {
            const startS = clamp(offsetS + s.t0 / 1000, offsetS, limitS);
            return { startS, endS: clamp(offsetS + s.t1 / 1000, startS, limitS), text: s.text };
          });
      }
      segments.push(...windowSegments);
      carried = windowSegments.map((s) => s.text).join('').slice(-CARRY_CHARS);
    }
    return {
      language: language ?? 'en',
      durationS,
      text: segments.map((s) => s.text).join('').trim(),
      segments,
    };
  }

  /** One native call; an abort rejects at once while the call runs on to its end in the background. */
  private async native(window: Float32Array, options: NativeOptions, signal: AbortSignal | undefined): Promise<TranscribeResult> {
    // A call left running by an aborted job must end first (the binding would block on its mutex anyway).
    await this.nativeIdle;
    if (signal?.aborted) throw cancelled();
    const job = this.context.transcribeData(toPcm16(window), options);
    this.nativeIdle = job.promise.then(
      () => undefined,
      () => undefined,
    );
    return new Promise<TranscribeResult>((resolve, reject) => {
      const onAbort = (): void => reject(cancelled());
      signal?.addEventListener('abort', onAbort, { once: true });
      job.promise.then(
        (result) => {
          signal?.removeEventListener('abort', onAbort);
          if (signal?.aborted) reject(cancelled());
          else resolve(result);
        },
        (error: unknown) => {
          signal?.removeEventListener('abort', onAbort);
          reject(new ShoalError('RUNNER_CRASHED', `whisper transcription failed: ${errorMessage(error)}`, { cause: error }));
        },
      );
    });
  }

  async [Symbol.asyncDispose](): Promise<void> {
    if (this.disposed) return;
    this.disposed = true;
    // Wait for what is queued or running natively; release() while whisper_full runs would free its state.
    await this.tail.catch(() => undefined);
    await this.nativeIdle;
    await this.context.release();
    await releaseNativeLog();
  }
}
