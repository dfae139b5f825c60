import assert from 'node:assert/strict';
import { test } from 'node:test';
import { attributeRows, envelopeCurves, filterTimeline, formatOffset, MIN_BAR_FRACTION, recorderText, timelineKinds, timelinePath, tracePath, waterfall } from './observability.js';
import type { PerformanceEnvelope, Span, TimelineEntry } from './types.js';

function entry(atMs: number, nodeId: string, kind: string, text = kind): TimelineEntry {
  return { atMs, localAtMs: atMs, nodeId, nodeName: nodeId.toUpperCase(), source: kind === 'decode' ? 'runner' : 'node', instanceId: null, modelId: null, kind, text };
}

function span(spanId: string, parentId: string | null, nodeId: string, startMs: number, endMs: number, name = spanId): Span {
  return { spanId, parentId, traceId: 't1', nodeId, name, startMs, endMs, attributes: {} };
}

test('the timeline filters by node and kind and lists the newest first, ties in arrival order reversed', () => {
  const entries = [entry(100, 'a', 'start'), entry(300, 'b', 'join'), entry(200, 'a', 'decode'), entry(300, 'a', 'join', 'second at 300')];
  assert.deepEqual(
    filterTimeline(entries, { nodeId: null, kind: null }).map((e) => e.text),
    ['second at 300', 'join', 'decode', 'start'],
  );
  assert.deepEqual(
    filterTimeline(entries, { nodeId: 'a', kind: null }).map((e) => e.atMs),
    [300, 200, 100],
  );
  assert.deepEqual(
    filterTimeline(entries, { nodeId: null, kind: 'join' }).map((e) => e.nodeId),
    ['a', 'b'],
  );
  assert.deepEqual(filterTimeline(entries, { nodeId: 'b', kind: 'start' }), []);
  assert.deepEqual(timelineKinds(entries), ['decode', 'join', 'start']);
  assert.equal(entries[0]!.atMs, 100, 'the input is left as it was');
});

test('the timeline path asks from the window start, or for everything kept', () => {
  assert.equal(timelinePath(60_000, 1_000_000, 20), 'diagnostics/cluster/timeline?limit=20&sinceMs=940000');
  assert.equal(timelinePath(null, 1_000_000, 20), 'diagnostics/cluster/timeline?limit=20');
});

test('clock offsets read with their sign and unit; an unknown one says so', () => {
  assert.equal(formatOffset(null), 'unknown');
  assert.equal(formatOffset(0.2), '±0 ms');
  assert.equal(formatOffset(12.4), '+12 ms');
  assert.equal(formatOffset(-1500), '\u22121.5 s');
  assert.equal(formatOffset(180_000), '+3 min');
});

test('a trace id is one path segment', () => {
  assert.equal(tracePath('ab/c?d'), 'traces/ab%2Fc%3Fd');
});

test('attributes and recorder entries read as text', () => {
  assert.deepEqual(attributeRows({ b: 2, a: 'x', c: null, d: false }), [
    ['a', 'x'],
    ['b', '2'],
    ['c', 'null'],
    ['d', 'false'],
  ]);
  const text = recorderText({ atMs: 0, phase: 'decode', requestId: 'chatcmpl-0123456789abcdef', promptTokens: 12, completionTokens: null, rssBytes: 2048, detail: 'first token' }, (b) => `${b} B`);
  assert.equal(text, 'decode · req …89abcdef · 12 in / – out tokens · rss 2048 B · first token');
  assert.equal(recorderText({ atMs: 0, phase: 'ready', requestId: null, promptTokens: null, completionTokens: null, rssBytes: null, detail: null }, String), 'ready');
});

test('the waterfall places bars relative to the trace start, per node, the API node first', () => {
  const trace = {
    apiNodeId: 'api',
    startedAtMs: 1000,
    durationMs: 100,
    spans: [
      span('decode', 'queue', 'serve', 1040, 1090),
      span('http', null, 'api', 1000, 1100),
      span('queue', 'route', 'serve', 1020, 1040),
      span('route', 'http', 'api', 1010, 1020),
      // Not ended yet: the narrowest bar.
      span('respond', 'http', 'api', 1095, 0),
    ],
  };
  const w = waterfall(trace);
  assert.equal(w.startMs, 1000);
  assert.equal(w.totalMs, 100);
  assert.deepEqual(
    w.lanes.map((l) => [l.nodeId, l.bars.map((b) => b.span.spanId)]),
    [
      ['api', ['http', 'route', 'respond']],
      ['serve', ['queue', 'decode']],
    ],
  );
  const bars = new Map(w.lanes.flatMap((l) => l.bars).map((b) => [b.span.spanId, b]));
  assert.deepEqual([bars.get('http')!.left, bars.get('http')!.width, bars.get('http')!.depth], [0, 1, 0]);
  assert.deepEqual([bars.get('queue')!.left, bars.get('queue')!.width, bars.get('queue')!.depth], [0.2, 0.2, 2]);
  assert.deepEqual([bars.get('decode')!.offsetMs, bars.get('decode')!.durationMs, bars.get('decode')!.depth], [40, 50, 3]);
  assert.deepEqual([bars.get('respond')!.width, bars.get('respond')!.durationMs], [MIN_BAR_FRACTION, 0]);
  for (const bar of bars.values()) assert.ok(bar.left >= 0 && bar.left + bar.width <= 1 + 1e-9, `${bar.span.spanId} stays inside the row`);
  assert.deepEqual(
    w.ticks.map((t) => [t.ms, t.fraction]),
    [
      [0, 0],
      [50, 0.5],
      [100, 1],
    ],
  );
});

test('a span starting before the trace widens the waterfall; a parent cycle ends the depth count', () => {
  const w = waterfall({ apiNodeId: 'api', startedAtMs: 1000, durationMs: 10, spans: [span('a', 'b', 'api', 990, 1000), span('b', 'a', 'api', 1000, 1010)] });
  assert.equal(w.startMs, 990);
  assert.equal(w.totalMs, 20);
  assert.deepEqual(
    w.lanes[0]!.bars.map((b) => [b.span.spanId, b.left, b.depth]),
    [
      ['a', 0, 1],
      ['b', 0.5, 1],
    ],
  );
  const empty = waterfall({ apiNodeId: 'api', startedAtMs: 5, durationMs: 0, spans: [] });
  assert.deepEqual([empty.totalMs, empty.lanes, empty.ticks], [0, [], [{ ms: 0, fraction: 0 }]]);
});

test('an envelope becomes two curves by in-flight count with its knee', () => {
  const envelope: PerformanceEnvelope = {
    modelId: 'shoal/tiny',
    backend: 'llama_cpp-cpu',
    nodeId: 'n1',
    kneeInFlight: 2,
    points: [
      { inFlight: 3, requests: 4, meanTokensPerS: 10, aggregateTokensPerS: 30, p50TtftMs: null, p50LatencyMs: null },
      { inFlight: 1, requests: 9, meanTokensPerS: 20, aggregateTokensPerS: 20, p50TtftMs: 5, p50LatencyMs: 50 },
      { inFlight: 2, requests: 6, meanTokensPerS: 14, aggregateTokensPerS: 28, p50TtftMs: 6, p50LatencyMs: 70 },
    ],
  };
  const c = envelopeCurves(envelope);
  assert.deepEqual(
    c.aggregate.map((p) => [p.x, p.y]),
    [
      [1, 20],
      [2, 28],
      [3, 30],
    ],
  );
  assert.deepEqual(
    c.mean.map((p) => p.y),
    [20, 14, 10],
  );
  assert.deepEqual([c.x0, c.x1], [0, 3.5]);
  assert.deepEqual(c.xTicks, [0, 1, 2, 3]);
  assert.equal(c.knee?.inFlight, 2);
  assert.equal(envelopeCurves({ ...envelope, kneeInFlight: null }).knee, null);
  assert.deepEqual(envelopeCurves({ ...envelope, points: [], kneeInFlight: null }).xTicks, [0, 1], 'no points still has an axis');
});
