import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NodeRecorder, RunnerRecorder } from './recorder.js';
import { NodeMoment, RECORDER_TEXT_MAX_CHARS } from '../wire/diagnostics.js';

test('a runner recorder keeps its newest entries, counts what fell out and fills unset fields with null', () => {
  let now = 0;
  const recorder = new RunnerRecorder(() => now, 3);
  for (const phase of ['loading', 'ready', 'queued', 'prefill'] as const) {
    now += 10;
    recorder.record({ phase, requestId: phase === 'queued' || phase === 'prefill' ? 'r1' : null });
  }
  assert.deepEqual(recorder.entries().map((e) => [e.atMs, e.phase]), [[20, 'ready'], [30, 'queued'], [40, 'prefill']]);
  assert.equal(recorder.dropped, 1);
  assert.deepEqual(recorder.entries()[2], { atMs: 40, phase: 'prefill', requestId: 'r1', promptTokens: null, completionTokens: null, rssBytes: null, detail: null });
});

test('a node recorder cuts long texts and tells its listeners', () => {
  const recorder = new NodeRecorder(() => 5, 2);
  const heard: string[] = [];
  const off = recorder.onMoment((m) => heard.push(m.kind));
  const moment = recorder.record('election', 'x'.repeat(RECORDER_TEXT_MAX_CHARS * 2), { term: 3 });
  assert.equal(moment.text.length, RECORDER_TEXT_MAX_CHARS);
  off();
  recorder.record('join', 'n2 joined');
  assert.deepEqual(heard, ['election']);
  assert.deepEqual(recorder.entries().map((m) => m.kind), ['election', 'join']);
});

test('moment data is cut to what the wire schema allows, so one long reason cannot make the node unreadable', () => {
  const recorder = new NodeRecorder(() => 1);
  const moment = recorder.record('runner-crash', 'crashed', { reason: 'e'.repeat(RECORDER_TEXT_MAX_CHARS * 3), ['k'.repeat(100)]: 1 });
  assert.equal(NodeMoment.safeParse(moment).success, true);
  assert.equal((moment.data.reason as string).length, RECORDER_TEXT_MAX_CHARS);
});
