import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_SSE_EVENT_CHARS, SseParser } from './sse.js';

test('events split at any chunk boundary parse the same as whole', () => {
  const stream = 'event: state\ndata: {"a":1}\n\n: keep-alive\n\ndata: one\ndata: two\nid: 7\n\nevent: metrics\r\ndata: x\r\n\r\n';
  const whole = new SseParser().push(stream);
  assert.deepEqual(whole, [
    { event: 'state', data: '{"a":1}', id: null },
    { event: 'message', data: 'one\ntwo', id: '7' },
    { event: 'metrics', data: 'x', id: '7' },
  ]);
  for (let cut = 1; cut < stream.length; cut += 1) {
    const parser = new SseParser();
    const events = [...parser.push(stream.slice(0, cut)), ...parser.push(stream.slice(cut))];
    assert.deepEqual(events, whole, `cut at ${cut}`);
  }
});

test('a CR at the end of one chunk and LF at the start of the next is one line break', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push('data: a\r'), []);
  assert.deepEqual(parser.push('\n\r'), [{ event: 'message', data: 'a', id: null }]);
  assert.deepEqual(parser.push('\ndata: b\n\n'), [{ event: 'message', data: 'b', id: null }]);
});

test('fields: no space after the colon, no colon, retry, and events without data are dropped', () => {
  const parser = new SseParser();
  const events = parser.push('data:tight\n\nevent: empty\n\ndata\n\nretry: 1500\nretry: soon\n\n');
  assert.deepEqual(events, [
    { event: 'message', data: 'tight', id: null },
    { event: 'message', data: '', id: null },
  ]);
  assert.equal(parser.retryMs, 1500);
});

test('an event that never ends is refused past the limit', () => {
  const parser = new SseParser();
  assert.throws(() => parser.push(`data: ${'x'.repeat(MAX_SSE_EVENT_CHARS)}`), /larger than/);
});
