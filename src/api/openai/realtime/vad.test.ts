import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FrameVad, fvadMode, loadFvad, stepVad, VAD_FRAME_SAMPLES, VAD_IDLE, type VadConfig, type VadEvent, type VadState } from './vad.js';

const config: VadConfig = { threshold: 0.5, prefixPaddingMs: 100, silenceDurationMs: 200 };

function run(decisions: boolean[], c = config): { events: { frame: number; event: VadEvent }[]; state: VadState } {
  let state = VAD_IDLE;
  const events: { frame: number; event: VadEvent }[] = [];
  decisions.forEach((voiced, frame) => {
    const next = stepVad(state, voiced, c);
    state = next.state;
    if (next.event) events.push({ frame, event: next.event });
  });
  return { events, state };
}

const frames = (pattern: string): boolean[] => [...pattern].map((c) => c === 'x');

test('a turn starts at the first of three voiced frames, less the prefix padding, and stops after the silence, which it includes', () => {
  // 20 silent frames (400 ms), 10 voiced from 400 ms, then silence: the stop comes at the 10th silent frame (200 ms).
  const { events, state } = run(frames(`${'.'.repeat(20)}${'x'.repeat(10)}${'.'.repeat(15)}`));
  assert.deepEqual(events, [
    { frame: 22, event: { type: 'start', startMs: 400 - 100 } },
    { frame: 39, event: { type: 'stop', endMs: 40 * 20 } },
  ]);
  assert.equal(state.speaking, false);
  assert.equal(state.frames, 45);
});

test('clicks shorter than three frames start nothing, and short pauses inside a turn do not end it', () => {
  assert.deepEqual(run(frames('..xx..x.xx...x..')).events, []);
  const { events } = run(frames(`xxxx${'.'.repeat(9)}xxxx${'.'.repeat(10)}`));
  assert.deepEqual(
    events.map((e) => e.event.type),
    ['start', 'stop'],
  );
  assert.equal(events[0]!.event.type === 'start' && events[0]!.event.startMs, 0, 'the padding stops at the first audio');
});

test("OpenAI's threshold maps onto libfvad's four modes", () => {
  assert.deepEqual(
    [0, 0.2, 0.25, 0.5, 0.74, 0.75, 1].map(fvadMode),
    [0, 0, 1, 2, 2, 3, 3],
  );
});

test('the WebRTC detector hears a voiced sound and not silence, one decision per whole 20 ms frame whatever the chunking', async () => {
  const vad = new FrameVad(await loadFvad(), 0.5);
  try {
    const silence = new Int16Array(16_000);
    const decisions = [...vad.push(silence.subarray(0, 1000)), ...vad.push(silence.subarray(1000, 1001)), ...vad.push(silence.subarray(1001))];
    assert.equal(decisions.length, 16_000 / VAD_FRAME_SAMPLES);
    assert.ok(decisions.every((d) => !d));
    // A vowel-like sound: a 140 Hz voice with its harmonics, louder in the formant bands.
    const vowel = Int16Array.from({ length: 16_000 }, (_, i) => {
      let sum = 0;
      for (let h = 1; h <= 20; h++) sum += Math.sin((2 * Math.PI * 140 * h * i) / 16_000) * (h === 5 || h === 8 || h === 17 ? 1 : 0.3) / h ** 0.5;
      return Math.round(sum * 2500);
    });
    const heard = vad.push(vowel);
    assert.ok(heard.filter(Boolean).length > heard.length * 0.8, `voiced frames: ${heard.filter(Boolean).length} of ${heard.length}`);
  } finally {
    vad.dispose();
  }
});
