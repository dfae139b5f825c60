import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Span as SpanSchema, Trace as TraceSchema } from '../wire/diagnostics.js';
import type { TaskEvent } from '../wire/task.js';
import { clockOffsetMs, DECODE_BATCH_MS, DECODE_BATCH_TOKENS, MAX_SERVING_SPANS, RequestTrace, ServingPhases, SpanSet, type SpanClock } from './spans.js';

function fakeClock(start = 1000, prefix = 's'): SpanClock & { at: number } {
  let n = 0;
  const clock = {
    at: start,
    now: () => clock.at,
    spanId: () => `${prefix}${(n++).toString(16).padStart(4, '0')}`,
  };
  return clock;
}

const start: TaskEvent = { type: 'start', promptTokens: 7 };
const token: TaskEvent = { type: 'text', text: 'x' };
const end = (completionTokens: number): TaskEvent => ({ type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens: 7, completionTokens } });

test('queue, prefill and decode batches follow the event stream, back to back', () => {
  const clock = fakeClock();
  const spans = new SpanSet('t1', 'node-b', clock, MAX_SERVING_SPANS);
  const phases = new ServingPhases(spans, 'parent');
  clock.at += 5;
  phases.observe(start);
  clock.at += 20;
  // 70 tokens 1 ms apart: batches of DECODE_BATCH_TOKENS, the first starting at the first token.
  for (let i = 0; i < 70; i++) {
    phases.observe(token);
    clock.at += 1;
  }
  phases.observe(end(70));
  const all = spans.all();
  assert.deepEqual(all.map((s) => s.name), ['queue', 'prefill', 'decode', 'decode', 'decode']);
  const [queue, prefill, ...decode] = all;
  assert.deepEqual([queue!.startMs, queue!.endMs], [1000, 1005]);
  assert.deepEqual([prefill!.startMs, prefill!.endMs], [1005, 1025]);
  assert.equal(prefill!.attributes.promptTokens, 7);
  assert.deepEqual(decode.map((d) => d.attributes.tokens), [DECODE_BATCH_TOKENS, DECODE_BATCH_TOKENS, 70 - 2 * DECODE_BATCH_TOKENS]);
  assert.equal(decode[0]!.startMs, prefill!.endMs, 'decode starts with the first token');
  assert.equal(decode[1]!.startMs, decode[0]!.endMs, 'batches are back to back');
  assert.equal(decode[2]!.attributes.completionTokens, 70);
  assert.equal(decode[2]!.attributes.finishReason, 'length');
  for (const span of all) {
    assert.equal(span.parentId, 'parent');
    assert.equal(span.nodeId, 'node-b');
    assert.equal(span.attributes.unfinished, undefined, `${span.name} was closed by the stream`);
    SpanSchema.parse(span);
  }
});

test('a decode batch also closes after DECODE_BATCH_MS, however few tokens it has', () => {
  const clock = fakeClock();
  const spans = new SpanSet('t1', 'n', clock, MAX_SERVING_SPANS);
  const phases = new ServingPhases(spans, null);
  phases.observe(start);
  phases.observe(token);
  clock.at += DECODE_BATCH_MS;
  phases.observe(token);
  clock.at += 1;
  phases.observe(token);
  phases.observe(end(3));
  assert.deepEqual(spans.all().filter((s) => s.name === 'decode').map((s) => s.attributes.tokens), [2, 1]);
});

test('past the span cap the last decode span runs on and counts every token', () => {
  const clock = fakeClock();
  const spans = new SpanSet('t1', 'n', clock, 5);
  const phases = new ServingPhases(spans, null);
  phases.observe(start);
  const tokens = DECODE_BATCH_TOKENS * 10;
  for (let i = 0; i < tokens; i++) phases.observe(token);
  phases.observe(end(tokens));
  const all = spans.all();
  assert.equal(all.length, 5);
  const decode = all.filter((s) => s.name === 'decode');
  assert.equal(decode.reduce((sum, s) => sum + Number(s.attributes.tokens), 0), tokens);
  assert.equal(decode.at(-1)!.attributes.totalTokens, tokens);
});

test('a failed stream ends its open spans with the reason; an unclosed span is marked unfinished', () => {
  const clock = fakeClock();
  const spans = new SpanSet('t1', 'n', clock, MAX_SERVING_SPANS);
  const phases = new ServingPhases(spans, null);
  phases.observe(start);
  phases.observe(token);
  clock.at += 3;
  phases.fail('INSTANCE_LOST');
  const decode = spans.all().find((s) => s.name === 'decode')!;
  assert.equal(decode.attributes.error, 'INSTANCE_LOST');
  assert.equal(decode.endMs - decode.startMs, 3);
  const other = new SpanSet('t2', 'n', clock, 4);
  other.start('left-open', null);
  clock.at += 2;
  assert.equal(other.all()[0]!.attributes.unfinished, true);
});

test('the clock offset estimate cancels the time the serving node spent, and keeps its spans inside the exchange', () => {
  // The serving node's clock runs 5000 ms ahead; each transit takes 2 ms; it works 100 ms.
  const sentMs = 10_000;
  const report = { receivedAtMs: sentMs + 2 + 5000, sentAtMs: sentMs + 2 + 100 + 5000 };
  const receivedMs = sentMs + 2 + 100 + 2;
  assert.equal(clockOffsetMs(sentMs, receivedMs, report), 5000);
  // Unequal transits (1 ms there, 3 ms back) err by half the difference, still inside the exchange.
  const skewed = clockOffsetMs(sentMs, sentMs + 104, { receivedAtMs: sentMs + 1 + 5000, sentAtMs: sentMs + 101 + 5000 });
  assert.equal(skewed, 4999);
  assert.ok(sentMs + 1 + 5000 - skewed >= sentMs && sentMs + 101 + 5000 - skewed <= sentMs + 104);
});

test("a request trace takes a serving node's spans onto its own clock and assembles a valid trace", () => {
  const clock = fakeClock(50_000);
  const trace = new RequestTrace('a'.repeat(32), 'node-a', 'POST /v1/chat/completions', clock, { method: 'POST' });
  trace.modelId = 'shoal/tiny';
  const route = trace.spans.start('route', trace.rootId);
  clock.at += 1;
  trace.spans.end(route, { target: 'node-b' });
  const dataPlane = trace.spans.start('data-plane', trace.rootId);
  const sentMs = clock.at;
  const remoteClock = fakeClock(sentMs + 1 + 7000, 'r');
  const remote = new SpanSet('ignored', 'claims-to-be-c', remoteClock, MAX_SERVING_SPANS);
  const phases = new ServingPhases(remote, dataPlane);
  remoteClock.at += 4;
  phases.observe(start);
  remoteClock.at += 4;
  phases.observe(token);
  phases.observe(end(1));
  const report = { spans: remote.all(), receivedAtMs: sentMs + 1 + 7000, sentAtMs: remoteClock.at };
  clock.at = sentMs + 1 + 8 + 1;
  trace.addRemote('node-b', report, sentMs, clock.at);
  trace.spans.end(dataPlane);
  trace.responded();
  trace.responded();
  clock.at += 2;
  const whole = TraceSchema.parse(trace.finish(200));
  assert.equal(whole.status, 200);
  assert.deepEqual(whole.nodes, ['node-a', 'node-b']);
  assert.equal(whole.offsets['node-b'], 7000);
  assert.equal(whole.spanCount, whole.spans.length);
  const byName = new Map(whole.spans.map((s) => [s.name, s]));
  const queue = byName.get('queue')!;
  assert.equal(queue.nodeId, 'node-b', 'named for the node that was called');
  assert.equal(queue.traceId, whole.traceId);
  assert.equal(queue.parentId, dataPlane);
  assert.ok(queue.startMs >= byName.get('data-plane')!.startMs && byName.get('decode')!.endMs <= byName.get('data-plane')!.endMs, 'serving spans sit inside the data-plane span');
  assert.equal(byName.get('http')!.attributes.status, 200);
  assert.equal(byName.get('respond')!.attributes.events, 2);
  assert.equal(byName.get('http')!.endMs - byName.get('http')!.startMs, whole.durationMs);
  assert.ok(whole.spans.every((s, i) => i === 0 || s.startMs >= whole.spans[i - 1]!.startMs), 'in start order');
});

test('a trace keeps at most its cap of spans and says how many it dropped', () => {
  const clock = fakeClock();
  const trace = new RequestTrace('b'.repeat(32), 'n', 'POST /x', clock);
  for (let i = 0; i < 300; i++) trace.spans.start('decode', trace.rootId);
  const whole = trace.finish(200);
  assert.equal(whole.spans.length, 256);
  assert.equal(whole.spans.find((s) => s.name === 'http')!.attributes.droppedSpans, 300 - 255);
});
