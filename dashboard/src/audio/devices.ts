// The browser's side of the chat page's audio: the microphone through an AudioWorklet (chunks of
// floats at the device's rate, handed to the page's pure resampler), and playback through Web Audio.
// Web Audio rather than an <audio> element for playback: the dashboard's CSP allows media only from the
// node itself, and a blob: URL is not that; decoded buffers also let voice mode queue reply chunks
// without gaps.

import { PlaybackClock } from '../lib/audio.js';
import { microphoneProblem } from '../lib/speech.js';

/** A failure to open the microphone, in words that say what to do. */
export class MicrophoneError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MicrophoneError';
  }
}

export interface Microphone {
  /** The device's rate: the chunks' sample rate. */
  readonly sampleRate: number;
  stop(): void;
}

const WORKLET_URL = new URL('./capture-worklet.js', import.meta.url);

export async function openMicrophone(onChunk: (samples: Float32Array, sampleRate: number) => void): Promise<Microphone> {
  if (!window.isSecureContext || !navigator.mediaDevices?.getUserMedia) throw new MicrophoneError(microphoneProblem('insecure', ''));
  let stream: MediaStream;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true } });
  } catch (error) {
    const e = error as { name?: string; message?: string };
    throw new MicrophoneError(microphoneProblem(e.name ?? 'Error', e.message ?? String(error)));
  }
  const context = new AudioContext();
  try {
    await context.audioWorklet.addModule(WORKLET_URL);
    const source = context.createMediaStreamSource(stream);
    const capture = new AudioWorkletNode(context, 'shoal-capture', { numberOfInputs: 1, numberOfOutputs: 1, channelCount: 1, channelCountMode: 'explicit' });
    capture.port.onmessage = (message: MessageEvent<Float32Array>) => onChunk(message.data, context.sampleRate);
    // A node only runs when something pulls it: a silent gain to the speakers does, without echoing the user.
    const mute = context.createGain();
    mute.gain.value = 0;
    source.connect(capture).connect(mute).connect(context.destination);
    if (context.state === 'suspended') await context.resume();
    return {
      sampleRate: context.sampleRate,
      stop() {
        capture.port.onmessage = null;
        source.disconnect();
        capture.disconnect();
        for (const track of stream.getTracks()) track.stop();
        void context.close().catch(() => undefined);
      },
    };
  } catch (error) {
    for (const track of stream.getTracks()) track.stop();
    void context.close().catch(() => undefined);
    throw new MicrophoneError(`the page could not process the microphone's audio (${error instanceof Error ? error.message : String(error)})`);
  }
}

/**
 * Plays decoded audio: whole files (a spoken reply) or a stream of PCM chunks (voice mode), each
 * scheduled right after the one before. `onIdle` runs when the last scheduled sound has ended.
 */
export class Player {
  private context: AudioContext | null = null;
  private readonly clock = new PlaybackClock();
  private readonly playing = new Set<AudioBufferSourceNode>();

  constructor(private readonly onIdle: () => void = () => undefined) {}

  private audio(): AudioContext {
    this.context ??= new AudioContext();
    if (this.context.state === 'suspended') void this.context.resume();
    return this.context;
  }

  private start(buffer: AudioBuffer): void {
    const context = this.audio();
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    source.onended = () => {
      this.playing.delete(source);
      if (this.playing.size === 0) this.onIdle();
    };
    this.playing.add(source);
    source.start(this.clock.schedule(context.currentTime, buffer.duration));
  }

  /** An encoded file (wav, mp3): resolves with its duration once decoded and queued. */
  async playFile(bytes: ArrayBuffer): Promise<number> {
    const buffer = await this.audio().decodeAudioData(bytes);
    this.start(buffer);
    return buffer.duration;
  }

  /** Mono float samples at `sampleRate`, queued after whatever is playing. */
  playSamples(samples: Float32Array, sampleRate: number): void {
    if (samples.length === 0) return;
    const buffer = this.audio().createBuffer(1, samples.length, sampleRate);
    buffer.copyToChannel(samples as Float32Array<ArrayBuffer>, 0);
    this.start(buffer);
  }

  get busy(): boolean {
    return this.playing.size > 0;
  }

  /** Silences everything queued (talking over a reply, the stop button). */
  stop(): void {
    for (const source of this.playing) {
      source.onended = null;
      try {
        source.stop();
      } catch {
        // not started yet
      }
    }
    const had = this.playing.size > 0;
    this.playing.clear();
    this.clock.reset();
    if (had) this.onIdle();
  }

  close(): void {
    this.stop();
    void this.context?.close().catch(() => undefined);
    this.context = null;
  }
}
