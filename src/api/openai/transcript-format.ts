// A transcript (the serving node's `transcript` event, src/wire/task.ts) in the shapes of OpenAI's
// /v1/audio/transcriptions `response_format`. Pure.

import type { Transcript } from '../../wire/task.js';

export const TRANSCRIPT_FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const;
export type TranscriptFormat = (typeof TRANSCRIPT_FORMATS)[number];

/**
 * Per-segment fields of verbose_json that whisper.cpp (through the binding) does not report; they are
 * sent with these neutral values so clients that read them keep working.
 */
export const NOT_COMPUTED_SEGMENT_FIELDS = { tokens: [] as number[], temperature: 0, avg_logprob: 0, compression_ratio: 1, no_speech_prob: 0 } as const;

/** Seconds as `HH:MM:SS,mmm` (srt) or `HH:MM:SS.mmm` (vtt); hours grow past 99 rather than wrap. */
export function formatTimestamp(seconds: number, separator: ',' | '.'): string {
  const totalMs = Math.max(0, Math.round(seconds * 1000));
  const ms = totalMs % 1000;
  const totalS = Math.floor(totalMs / 1000);
  const s = totalS % 60;
  const m = Math.floor(totalS / 60) % 60;
  const h = Math.floor(totalS / 3600);
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${two(h)}:${two(m)}:${two(s)}${separator}${String(ms).padStart(3, '0')}`;
}

/** Seconds rounded to the millisecond, as a JSON number. */
function seconds(value: number): number {
  return Math.round(value * 1000) / 1000;
}

/** Subtitle cue text: one line, no blank lines (a blank line would end the cue). */
function cueText(text: string): string {
  return text.trim().replace(/\s*\n\s*/g, ' ');
}

export function formatTranscript(
  t: Transcript,
  format: TranscriptFormat,
  opts: { granularities: ReadonlyArray<'segment' | 'word'>; task: 'transcribe' | 'translate' },
): { contentType: string; body: string } {
  switch (format) {
    case 'json':
      return { contentType: 'application/json', body: JSON.stringify({ text: t.text }) };
    case 'text':
      return { contentType: 'text/plain; charset=utf-8', body: `${t.text}\n` };
    case 'srt': {
      const cues = t.segments.map((s, i) => `${i + 1}\n${formatTimestamp(s.startS, ',')} --> ${formatTimestamp(s.endS, ',')}\n${cueText(s.text)}\n`);
      return { contentType: 'application/x-subrip; charset=utf-8', body: cues.join('\n') };
    }
    case 'vtt': {
      const cues = t.segments.map((s) => `${formatTimestamp(s.startS, '.')} --> ${formatTimestamp(s.endS, '.')}\n${cueText(s.text)}\n`);
      return { contentType: 'text/vtt; charset=utf-8', body: ['WEBVTT\n', ...cues].join('\n') };
    }
    case 'verbose_json': {
      const wantSegments = opts.granularities.length === 0 || opts.granularities.includes('segment');
      const wantWords = opts.granularities.includes('word');
      const body: Record<string, unknown> = {
        task: opts.task,
        language: t.language,
        duration: seconds(t.durationS),
        text: t.text,
      };
      if (wantSegments) {
        body['segments'] = t.segments.map((s, id) => ({
          id,
          // whisper's seek: the segment's window start in 10 ms mel frames.
          seek: Math.floor(s.startS / 30) * 3000,
          start: seconds(s.startS),
          end: seconds(s.endS),
          text: s.text,
          ...NOT_COMPUTED_SEGMENT_FIELDS,
          tokens: [],
        }));
      }
      if (wantWords) {
        body['words'] = t.segments.flatMap((s) => (s.words ?? []).map((w) => ({ word: w.word, start: seconds(w.startS), end: seconds(w.endS) })));
      }
      return { contentType: 'application/json', body: JSON.stringify(body) };
    }
  }
}
