// The composer's microphone button: records (Web Audio, resampled to 16 kHz as it comes), uploads a WAV
// to POST /v1/audio/transcriptions with the running speech-to-text model, and hands the text to the
// message box. A WAV rather than MediaRecorder's webm/opus (which the node decodes too): one capture
// path for this and voice mode, no lossy codec between the microphone and whisper, and the length
// limit counted in samples.

import { useEffect, useRef, useState, type ReactNode } from 'react';
import { errorMessage } from '../../../src/common/errors.js';
import { inferenceForm } from '../api.js';
import { MicrophoneError, openMicrophone, type Microphone } from '../audio/devices.js';
import { encodeWav, MAX_RECORDING_S, RECORDING_SAMPLE_RATE, StreamResampler, concatSamples } from '../lib/audio.js';
import type { ModelPick } from '../lib/speech.js';

type Phase = { kind: 'idle' } | { kind: 'opening' } | { kind: 'recording'; startedAt: number } | { kind: 'transcribing' };

export interface DictateProps {
  model: ModelPick;
  disabled: boolean;
  /** The transcript; '' when the model heard no words. */
  onText: (text: string) => void;
  /** A problem to show (null clears it). */
  onProblem: (problem: string | null) => void;
}

export function Dictate({ model, disabled, onText, onProblem }: DictateProps): ReactNode {
  const [phase, setPhase] = useState<Phase>({ kind: 'idle' });
  const [seconds, setSeconds] = useState(0);
  const mic = useRef<Microphone | null>(null);
  const chunks = useRef<Float32Array[]>([]);
  const samples = useRef(0);
  const abort = useRef<AbortController | null>(null);

  useEffect(
    () => () => {
      mic.current?.stop();
      abort.current?.abort();
    },
    [],
  );

  useEffect(() => {
    if (phase.kind !== 'recording') return;
    const timer = setInterval(() => setSeconds(Math.floor((performance.now() - phase.startedAt) / 1000)), 250);
    return () => clearInterval(timer);
  }, [phase]);

  const finish = async (): Promise<void> => {
    const recorded = concatSamples(chunks.current);
    chunks.current = [];
    mic.current?.stop();
    mic.current = null;
    if (model.model === null) {
      setPhase({ kind: 'idle' });
      return;
    }
    if (recorded.length < RECORDING_SAMPLE_RATE / 10) {
      setPhase({ kind: 'idle' });
      onProblem('the recording is too short to transcribe: hold on a little longer before stopping');
      return;
    }
    setPhase({ kind: 'transcribing' });
    const form = new FormData();
    form.append('model', model.model);
    form.append('response_format', 'json');
    form.append('file', new Blob([encodeWav(recorded, RECORDING_SAMPLE_RATE) as Uint8Array<ArrayBuffer>], { type: 'audio/wav' }), 'recording.wav');
    const controller = new AbortController();
    abort.current = controller;
    try {
      const res = await inferenceForm('v1/audio/transcriptions', form, controller.signal);
      const body = (await res.json()) as { text?: unknown };
      onText(typeof body.text === 'string' ? body.text.trim() : '');
    } catch (e) {
      if (!controller.signal.aborted) onProblem(`the recording could not be transcribed: ${errorMessage(e)}`);
    } finally {
      abort.current = null;
      setPhase({ kind: 'idle' });
    }
  };

  const start = async (): Promise<void> => {
    if (model.model === null) {
      onProblem(model.reason);
      return;
    }
    onProblem(null);
    setPhase({ kind: 'opening' });
    chunks.current = [];
    samples.current = 0;
    setSeconds(0);
    try {
      let resampler: StreamResampler | null = null;
      mic.current = await openMicrophone((chunk, rate) => {
        resampler ??= new StreamResampler(rate, RECORDING_SAMPLE_RATE);
        const out = resampler.push(chunk);
        chunks.current.push(out);
        samples.current += out.length;
        if (samples.current >= MAX_RECORDING_S * RECORDING_SAMPLE_RATE) {
          onProblem(`recordings stop at ${MAX_RECORDING_S / 60} minutes: this one was sent as it was then`);
          void finish();
        }
      });
      setPhase({ kind: 'recording', startedAt: performance.now() });
    } catch (e) {
      setPhase({ kind: 'idle' });
      onProblem(e instanceof MicrophoneError ? e.message : `the microphone could not be opened: ${errorMessage(e)}`);
    }
  };

  const title = model.model === null ? `Dictation is off: ${model.reason}` : `Record a message and transcribe it with ${model.model}`;
  switch (phase.kind) {
    case 'recording':
      return (
        <button type="button" className="danger mic-button" aria-label="Stop dictation" title="Stop and transcribe" onClick={() => void finish()} data-recording={seconds}>
          ■ {seconds} s
        </button>
      );
    case 'transcribing':
    case 'opening':
      return (
        <button type="button" className="mic-button" disabled aria-label={phase.kind === 'opening' ? 'Opening the microphone' : 'Transcribing'} data-transcribing={phase.kind === 'transcribing' || undefined}>
          {phase.kind === 'opening' ? 'Mic…' : 'Transcribing…'}
        </button>
      );
    case 'idle':
      return (
        <span className="attach" title={title}>
          <button type="button" className="mic-button" aria-label="Dictate" title={title} disabled={disabled} onClick={() => void start()} data-dictate>
            ● Record
          </button>
        </span>
      );
  }
}
