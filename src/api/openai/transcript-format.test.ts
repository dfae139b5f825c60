import { test } from 'node:test';
import assert from 'node:assert/strict';
import { formatTimestamp, formatTranscript, TRANSCRIPT_FORMATS } from './transcript-format.js';
import type { Transcript } from '../../wire/task.js';

const T: Transcript = {
  language: 'en',
  durationS: 3725.4567,
  text: 'Hello there. General Kenobi!',
  segments: [
    { startS: 0, endS: 1.5, text: ' Hello there.', words: [{ word: 'Hello', startS: 0, endS: 0.6 }, { word: 'there.', startS: 0.7, endS: 1.5 }] },
    { startS: 3723.25, endS: 3725.4567, text: ' General\nKenobi!', words: [{ word: 'General', startS: 3723.25, endS: 3724 }, { word: 'Kenobi!', startS: 3724.1, endS: 3725.4567 }] },
  ],
};

const NEUTRAL = { tokens: [], temperature: 0, avg_logprob: 0, compression_ratio: 1, no_speech_prob: 0 };
const opts = { granularities: [] as Array<'segment' | 'word'>, task: 'transcribe' as const };

test('timestamps: hours, minutes, seconds and milliseconds, comma for srt and dot for vtt', () => {
  assert.equal(formatTimestamp(0, ','), '00:00:00,000');
  assert.equal(formatTimestamp(1.5, ','), '00:00:01,500');
  assert.equal(formatTimestamp(1.5, '.'), '00:00:01.500');
  assert.equal(formatTimestamp(59.9996, '.'), '00:01:00.000');
  assert.equal(formatTimestamp(3725.4567, ','), '01:02:05,457');
  assert.equal(formatTimestamp(360_000.001, '.'), '100:00:00.001');
  assert.equal(formatTimestamp(-1, ','), '00:00:00,000');
});

test('json and text', () => {
  assert.deepEqual(formatTranscript(T, 'json', opts), { contentType: 'application/json', body: '{"text":"Hello there. General Kenobi!"}' });
  assert.deepEqual(formatTranscript(T, 'text', opts), { contentType: 'text/plain; charset=utf-8', body: 'Hello there. General Kenobi!\n' });
});

test('srt', () => {
  const { contentType, body } = formatTranscript(T, 'srt', opts);
  assert.equal(contentType, 'application/x-subrip; charset=utf-8');
  assert.equal(body, '1\n00:00:00,000 --> 00:00:01,500\nHello there.\n\n2\n01:02:03,250 --> 01:02:05,457\nGeneral Kenobi!\n');
});

test('vtt', () => {
  const { contentType, body } = formatTranscript(T, 'vtt', opts);
  assert.equal(contentType, 'text/vtt; charset=utf-8');
  assert.equal(body, 'WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nHello there.\n\n01:02:03.250 --> 01:02:05.457\nGeneral Kenobi!\n');
});

test('verbose_json: segments by default, words when asked, both when both are asked', () => {
  const segments = [
    { id: 0, seek: 0, start: 0, end: 1.5, text: ' Hello there.', ...NEUTRAL },
    { id: 1, seek: 372_000, start: 3723.25, end: 3725.457, text: ' General\nKenobi!', ...NEUTRAL },
  ];
  const words = [
    { word: 'Hello', start: 0, end: 0.6 },
    { word: 'there.', start: 0.7, end: 1.5 },
    { word: 'General', start: 3723.25, end: 3724 },
    { word: 'Kenobi!', start: 3724.1, end: 3725.457 },
  ];
  const head = { task: 'transcribe', language: 'en', duration: 3725.457, text: 'Hello there. General Kenobi!' };

  const plain = formatTranscript(T, 'verbose_json', opts);
  assert.equal(plain.contentType, 'application/json');
  assert.deepEqual(JSON.parse(plain.body), { ...head, segments });
  assert.deepEqual(Object.keys(JSON.parse(plain.body) as object), ['task', 'language', 'duration', 'text', 'segments']);

  assert.deepEqual(JSON.parse(formatTranscript(T, 'verbose_json', { granularities: ['segment'], task: 'transcribe' }).body), { ...head, segments });
  assert.deepEqual(JSON.parse(formatTranscript(T, 'verbose_json', { granularities: ['word'], task: 'translate' }).body), { ...head, task: 'translate', words });
  assert.deepEqual(JSON.parse(formatTranscript(T, 'verbose_json', { granularities: ['word', 'segment'], task: 'transcribe' }).body), { ...head, segments, words });
});

test('an empty transcript in every format', () => {
  const empty: Transcript = { language: 'en', durationS: 2, text: '', segments: [] };
  const bodies = Object.fromEntries(TRANSCRIPT_FORMATS.map((f) => [f, formatTranscript(empty, f, { granularities: ['word'], task: 'transcribe' }).body]));
  assert.deepEqual(bodies, {
    json: '{"text":""}',
    text: '\n',
    srt: '',
    verbose_json: '{"task":"transcribe","language":"en","duration":2,"text":"","words":[]}',
    vtt: 'WEBVTT\n',
  });
});
