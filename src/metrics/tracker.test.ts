import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TaskEvent } from '../wire/task.js';
import { RequestTracker, type Outcome, type TaskKind } from './tracker.js';

const start = (promptTokens = 5): TaskEvent => ({ type: 'start', promptTokens });
const text = (t = 'x'): TaskEvent => ({ type: 'text', text: t });
const end = (completionTokens: number): TaskEvent => ({ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 5, completionTokens } });

function tracker(options: { max?: number; random?: () => number } = {}) {
  const ended: [TaskKind, Outcome][] = [];
  const ttfts: number[] = [];
  let generated = 0;
  let prompt = 0;
  const t = new RequestTracker({
    maxTtftsPerTake: options.max ?? 100,
    random: options.random ?? (() => 0),
    observer: { ended: (k, o) => ended.push([k, o]), firstToken: (ms) => ttfts.push(ms), generated: (n) => (generated += n), prompt: (n) => (prompt += n) },
  });
  return { t, ended, ttfts, totals: () => ({ generated, prompt }) };
}

test('a request waits until its first event and is in flight until its end', () => {
  const { t, ended } = tracker();
  const r = t.arrive('generate', 100);
  assert.deepEqual(t.counters(), { inFlight: 1, waiting: 1, generatedTokens: 0, promptTokens: 0 });
  t.observe(r, start(7), 150);
  assert.deepEqual(t.counters(), { inFlight: 1, waiting: 0, generatedTokens: 0, promptTokens: 7 });
  t.observe(r, text(), 180);
  t.observe(r, end(1), 190);
  assert.deepEqual(t.counters(), { inFlight: 0, waiting: 0, generatedTokens: 1, promptTokens: 7 });
  assert.deepEqual(ended, [['generate', 'ok']]);
});

test('TTFT is arrival to the first text, reasoning or tool call; the start event does not count', () => {
  for (const first of [text(), { type: 'reasoning', text: 'hm' } as TaskEvent, { type: 'tool_call', index: 0, id: 'c', name: 'f' } as TaskEvent]) {
    const { t } = tracker();
    const r = t.arrive('generate', 1000);
    t.observe(r, start(), 1040);
    t.observe(r, first, 1100);
    t.observe(r, text(), 1300);
    assert.deepEqual(t.takeTtfts(), [100], first.type);
    assert.deepEqual(t.takeTtfts(), [], 'taken once');
  }
});

test('embeddings and counts have no TTFT but are in flight and counted', () => {
  const { t, ended, ttfts } = tracker();
  const e = t.arrive('embed', 0);
  const c = t.arrive('count', 0);
  t.observe(e, start(3), 10);
  t.observe(e, { type: 'embeddings', vectors: [[1]] }, 20);
  t.observe(e, end(0), 30);
  t.observe(c, start(3), 10);
  t.observe(c, end(0), 20);
  assert.deepEqual(ttfts, []);
  assert.deepEqual(t.takeTtfts(), []);
  assert.deepEqual(ended, [['embed', 'ok'], ['count', 'ok']]);
  assert.equal(t.counters().inFlight, 0);
});

test('generated tokens count content events live and the end tops them up to the usage', () => {
  const { t, totals } = tracker();
  const r = t.arrive('generate', 0);
  t.observe(r, start(), 1);
  t.observe(r, text('a'), 2);
  t.observe(r, text(''), 3);
  t.observe(r, { type: 'tool_call', index: 0, id: 'c', name: 'f' }, 4);
  t.observe(r, { type: 'tool_call_delta', index: 0, arguments: '{}' }, 5);
  assert.equal(t.counters().generatedTokens, 2, 'empty text and the tool call header are not counted');
  t.observe(r, end(9), 6);
  assert.equal(t.counters().generatedTokens, 9);
  assert.equal(totals().generated, 9);
  const s = t.arrive('generate', 0);
  for (let i = 0; i < 4; i += 1) t.observe(s, text(), 1);
  t.observe(s, end(3), 2);
  assert.equal(t.counters().generatedTokens, 13, 'a counter never goes back when events outnumber tokens');
});

test('finish is idempotent and events after the end are ignored', () => {
  const { t, ended } = tracker();
  const r = t.arrive('generate', 0);
  t.finish(r, 'cancelled');
  t.finish(r, 'error');
  t.observe(r, text(), 5);
  t.observe(r, end(4), 6);
  assert.deepEqual(ended, [['generate', 'cancelled']]);
  assert.deepEqual(t.counters(), { inFlight: 0, waiting: 0, generatedTokens: 0, promptTokens: 0 });
  assert.deepEqual(t.takeTtfts(), []);
});

test('a refused request is counted and never in flight', () => {
  const { t, ended } = tracker();
  t.refuse('generate');
  assert.deepEqual(ended, [['generate', 'refused']]);
  assert.equal(t.counters().inFlight, 0);
});

test('TTFTs between takes are bounded; beyond the bound the reservoir keeps a uniform subset', () => {
  const values: number[] = [];
  let i = 0;
  // A fixed sequence of "random" picks makes the reservoir's choice checkable.
  const picks = [0.1, 0.9, 0.5, 0.0, 0.99];
  const { t } = tracker({ max: 3, random: () => picks[i++ % picks.length]! });
  for (let k = 0; k < 8; k += 1) {
    const r = t.arrive('generate', 0);
    t.observe(r, text(), k + 1);
    values.push(k + 1);
  }
  const kept = t.takeTtfts();
  assert.equal(kept.length, 3);
  for (const v of kept) assert.ok(values.includes(v));
  // Algorithm R by hand: seen=4 pick 0.1 -> slot 0; seen=5 0.9 -> 4 (dropped); seen=6 0.5 -> 3 (dropped);
  // seen=7 0.0 -> slot 0; seen=8 0.99 -> 7 (dropped).
  assert.deepEqual(kept, [7, 2, 3]);
});
