// Server-side voice activity detection for `WS /v1/realtime`: WebRTC's detector (libfvad compiled to
// WebAssembly) classifies each 20 ms frame of the 16 kHz stream, and a pure segmenter turns those
// decisions into turns the way OpenAI's `server_vad` describes them (threshold, prefix padding,
// silence duration).

import assert from 'node:assert/strict';
import initFvad, { type FvadModule } from '@echogarden/fvad-wasm';
import { TRANSCRIBE_SAMPLE_RATE } from '../../../wire/task.js';

/** One frame the detector classifies: 20 ms, one of the lengths libfvad takes. */
export const VAD_FRAME_MS = 20;
export const VAD_FRAME_SAMPLES = (TRANSCRIBE_SAMPLE_RATE * VAD_FRAME_MS) / 1000;
/**
 * Voiced frames in a row before a turn starts: a click or a breath is one or two frames, a syllable
 * longer, so 60 ms keeps noise from starting turns without losing a word (the prefix padding keeps
 * the audio before the turn was recognised).
 */
export const VAD_START_FRAMES = 3;

export interface VadConfig {
  /** OpenAI's 0..1: higher needs louder, clearer speech; mapped onto libfvad's four modes. */
  threshold: number;
  prefixPaddingMs: number;
  silenceDurationMs: number;
}

/** libfvad's aggressiveness for an OpenAI threshold: 0..0.25 mode 0, ... 0.75..1 mode 3 (0.5, the default, is mode 2). */
export function fvadMode(threshold: number): number {
  return Math.min(3, Math.max(0, Math.floor(threshold * 4)));
}

export interface VadState {
  /** Frames classified since the session's first audio. */
  frames: number;
  voicedRun: number;
  silentRun: number;
  speaking: boolean;
}

export const VAD_IDLE: VadState = { frames: 0, voicedRun: 0, silentRun: 0, speaking: false };

export type VadEvent = { type: 'start'; startMs: number } | { type: 'stop'; endMs: number };

/**
 * One frame's decision. A turn starts at the first frame of VAD_START_FRAMES voiced ones, less
 * `prefixPaddingMs` (not before 0), and stops once `silenceDurationMs` of unvoiced frames follow it,
 * at the end of that silence (OpenAI's `audio_end_ms` includes it).
 */
export function stepVad(state: VadState, voiced: boolean, config: VadConfig): { state: VadState; event: VadEvent | null } {
  const frame = state.frames;
  const next: VadState = {
    frames: frame + 1,
    voicedRun: voiced ? state.voicedRun + 1 : 0,
    silentRun: voiced ? 0 : state.silentRun + 1,
    speaking: state.speaking,
  };
  if (!state.speaking && next.voicedRun >= VAD_START_FRAMES) {
    const firstVoiced = frame + 1 - next.voicedRun;
    return { state: { ...next, speaking: true }, event: { type: 'start', startMs: Math.max(0, firstVoiced * VAD_FRAME_MS - config.prefixPaddingMs) } };
  }
  if (state.speaking && next.silentRun * VAD_FRAME_MS >= config.silenceDurationMs) {
    return { state: { ...next, speaking: false }, event: { type: 'stop', endMs: next.frames * VAD_FRAME_MS } };
  }
  return { state: next, event: null };
}

/** Ends a turn without its silence (a commit, a clear, the buffer's limit): the next voiced run starts a new one. */
export function resetVad(state: VadState): VadState {
  return { frames: state.frames, voicedRun: 0, silentRun: 0, speaking: false };
}

let loaded: Promise<FvadModule> | null = null;

/** Compiles the detector once per process; every session then makes its own instance synchronously. */
export function loadFvad(): Promise<FvadModule> {
  loaded ??= initFvad();
  return loaded;
}

/**
 * One session's detector over a 16 kHz stream: `push` takes samples in any chunking and answers one
 * decision per whole 20 ms frame, keeping the remainder for the next push. `dispose` frees its memory
 * in the WebAssembly heap, which every session shares.
 */
export class FrameVad {
  private readonly instance: number;
  private readonly frame: number;
  private readonly pending = new Int16Array(VAD_FRAME_SAMPLES);
  private pendingLength = 0;
  private disposed = false;

  constructor(
    private readonly fvad: FvadModule,
    threshold: number,
  ) {
    this.instance = fvad._fvad_new();
    assert(this.instance !== 0, 'libfvad could not allocate a detector');
    assert(fvad._fvad_set_sample_rate(this.instance, TRANSCRIBE_SAMPLE_RATE) === 0);
    this.frame = fvad._malloc(VAD_FRAME_SAMPLES * 2);
    assert(this.frame !== 0, 'libfvad could not allocate a frame');
    this.setThreshold(threshold);
  }

  setThreshold(threshold: number): void {
    assert(this.fvad._fvad_set_mode(this.instance, fvadMode(threshold)) === 0);
  }

  push(samples: Int16Array): boolean[] {
    const decisions: boolean[] = [];
    let offset = 0;
    while (offset < samples.length) {
      const take = Math.min(VAD_FRAME_SAMPLES - this.pendingLength, samples.length - offset);
      this.pending.set(samples.subarray(offset, offset + take), this.pendingLength);
      this.pendingLength += take;
      offset += take;
      if (this.pendingLength < VAD_FRAME_SAMPLES) break;
      this.fvad.HEAP16.set(this.pending, this.frame >> 1);
      const result = this.fvad._fvad_process(this.instance, this.frame, VAD_FRAME_SAMPLES);
      assert(result >= 0, 'libfvad refused a 20 ms frame');
      decisions.push(result === 1);
      this.pendingLength = 0;
    }
    return decisions;
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.fvad._free(this.frame);
    this.fvad._fvad_free(this.instance);
  }
}
