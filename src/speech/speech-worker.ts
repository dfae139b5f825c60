// The speech worker thread: eSpeak NG (WebAssembly) synthesizes, the resampler and encoder turn its
// samples into the asked format, and each piece goes to the node as soon as it is encoded. Synthesis
// is synchronous inside eSpeak NG, so it runs here rather than on the node's event loop; a cancel
// arrives through shared memory, which eSpeak NG's per-chunk callback reads.

import { parentPort, workerData } from 'node:worker_threads';
import init from '@echogarden/espeak-ng-emscripten';
import { errorMessage } from '../common/errors.js';
import { createEncoder } from './encoders.js';
import { Resampler } from './resample.js';
import type { FromSpeechWorker, SpeechJob, SpeechWorkerData } from './worker-protocol.js';

/** Where the packaged eSpeak NG data puts its voice variants in the module's virtual file system. */
const VARIANTS_DIR = '/usr/share/espeak-ng-data/voices/!v';

const port = parentPort!;
const cancel = new Int32Array((workerData as SpeechWorkerData).cancel);
const espeak = await init();
const engine = new espeak.eSpeakNGWorker();
const post = (message: FromSpeechWorker, transfer: ArrayBuffer[] = []): void => port.postMessage(message, transfer);

post({
  type: 'ready',
  catalog: {
    voices: engine.list_voices().map((v) => ({ identifier: v.identifier, languages: v.languages.map((l) => ({ name: l.name, priority: l.priority })) })),
    variants: espeak.FS.readdir(VARIANTS_DIR).filter((name) => name !== '.' && name !== '..'),
  },
});

// Jobs come one at a time: the node sends the next when this one has answered.
port.on('message', (job: SpeechJob) => {
  void run(job).catch((error: unknown) => post({ type: 'failed', id: job.id, code: 'INTERNAL', message: `speech synthesis failed: ${errorMessage(error)}` }));
});

async function run(job: SpeechJob): Promise<void> {
  const started = performance.now();
  const encoder = await createEncoder(job.format, job.sampleRate);
  const resampler = new Resampler(engine.samplerate, job.sampleRate);
  const maxInputSamples = job.maxAudioS * engine.samplerate;
  let inputSamples = 0;
  // Set inside eSpeak NG's callback, so typed wide: TypeScript would narrow an initialized literal.
  let outcome = 'done' as 'done' | 'cancelled' | 'too long';
  const send = (bytes: Uint8Array): void => {
    if (bytes.length > 0) post({ type: 'chunk', id: job.id, bytes }, [bytes.buffer as ArrayBuffer]);
  };
  if (engine.set_voice(job.voice) !== 0) throw new Error(`eSpeak NG could not load voice '${job.voice}'`);
  engine.set_rate(job.wordsPerMinute);
  engine.synthesize(job.text, (samples) => {
    if (Atomics.load(cancel, 0) === job.id) outcome = 'cancelled';
    else if ((inputSamples += samples.length) > maxInputSamples) outcome = 'too long';
    else send(encoder.write(resampler.push(samples)));
    return outcome !== 'done';
  });
  if (outcome === 'cancelled') return post({ type: 'cancelled', id: job.id });
  if (outcome === 'too long') {
    return post({ type: 'failed', id: job.id, code: 'BAD_REQUEST', message: `the input makes more than ${job.maxAudioS} s of audio: split it into shorter requests` });
  }
  send(encoder.write(resampler.flush()));
  send(encoder.end());
  post({ type: 'done', id: job.id, audioS: inputSamples / engine.samplerate, synthesisMs: performance.now() - started });
}
