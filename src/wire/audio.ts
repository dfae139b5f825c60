// How a transcription task's audio travels (wire/task.ts TranscribeTask): 16-bit little-endian mono
// PCM at TRANSCRIBE_SAMPLE_RATE, base64. Half the bytes of float samples, and whisper reads no more.

import { ShoalError } from '../common/errors.js';

/** Float samples in -1..1 as the task's `audio`. */
export function encodeTaskAudio(samples: Float32Array): string {
  const bytes = Buffer.alloc(samples.length * 2);
  for (let i = 0; i < samples.length; i++) bytes.writeInt16LE(Math.max(-32768, Math.min(32767, Math.round((samples[i] as number) * 32767))), i * 2);
  return bytes.toString('base64');
}

/** The task's `audio` as the float samples whisper reads. */
export function decodeTaskAudio(base64: string): Float32Array {
  const bytes = Buffer.from(base64, 'base64');
  if (bytes.length % 2 !== 0) throw new ShoalError('BAD_REQUEST', 'the audio of a transcription is 16-bit PCM: an even number of bytes');
  const samples = new Float32Array(bytes.length / 2);
  for (let i = 0; i < samples.length; i++) samples[i] = bytes.readInt16LE(i * 2) / 32768;
  return samples;
}
