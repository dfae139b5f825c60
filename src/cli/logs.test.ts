import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatEntry, sseEvents } from './logs.js';

async function collect(chunks: string[]): Promise<{ event: string; data: string }[]> {
  const encoder = new TextEncoder();
  const body = (async function* () {
    for (const c of chunks) yield encoder.encode(c);
  })();
  const out: { event: string; data: string }[] = [];
  for await (const e of sseEvents(body)) out.push(e);
  return out;
}

test('SSE events are parsed across chunk boundaries, with comments and retry lines skipped', async () => {
  const stream = 'retry: 2000\n\n: heartbeat\n\nevent: log\ndata: {"a":1}\n\nevent: gap\r\ndata: x\r\ndata: y\r\n\r\ndata: plain\n\n';
  const expected = [{ event: 'log', data: '{"a":1}' }, { event: 'gap', data: 'x\ny' }, { event: 'message', data: 'plain' }];
  assert.deepEqual(await collect([stream]), expected);
  // Every split point, including between the CR and LF of a CRLF.
  for (let i = 1; i < stream.length; i += 1) assert.deepEqual(await collect([stream.slice(0, i), stream.slice(i)]), expected, `split at ${i}`);
  assert.deepEqual(await collect(['event: log\ndata: unfinished']), [], 'an event without its blank line is not complete');
});

test('entries print readably; control characters from the log are shown, not obeyed', () => {
  const line = formatEntry({ seq: 1, time: Date.UTC(2025, 0, 2, 3, 4, 5, 6), level: 'warn', msg: 'evil \u001b[2J\r\nforged', fields: { part: 'api', modelId: 'x\ny', n: 3 } }, false);
  assert.match(line, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} WARN {2}\[api\] evil \\x1b\[2J\\r\\nforged modelId=x\\ny n=3$/);
  assert.equal(line.includes('\u001b'), false);
  const withErr = formatEntry({ seq: 2, time: 0, level: 'error', msg: 'failed', fields: { err: { message: 'boom', stack: 'Error: boom\n    at f (x.js:1)' } } }, true);
  assert.ok(withErr.endsWith('\u001b[31mERROR\u001b[0m failed\n    Error: boom\n        at f (x.js:1)'), withErr);
});
