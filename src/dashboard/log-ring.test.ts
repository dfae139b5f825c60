import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LOG_PAGE_MAX_BYTES, LOG_PAGE_MAX_LINES, LogPage, LogRing } from './log-ring.js';

const line = (msg: string, extra: Record<string, unknown> = {}): string => `${JSON.stringify({ level: 30, time: 1000, pid: 1, hostname: 'h', msg, ...extra })}\n`;

test('lines are numbered, parsed and paged forward from a sequence number', () => {
  const ring = new LogRing();
  ring.write(line('one', { part: 'api' }));
  ring.write(`${JSON.stringify({ level: 50, time: 2000, msg: 'two', err: { message: 'x' } })}\n`);
  ring.write(line('three'));
  const all = ring.page({ since: 0 });
  assert.deepEqual(all.entries[0], { seq: 1, time: 1000, level: 'info', msg: 'one', fields: { part: 'api' } });
  assert.deepEqual(all.entries[1], { seq: 2, time: 2000, level: 'error', msg: 'two', fields: { err: { message: 'x' } } });
  assert.deepEqual({ firstSeq: all.firstSeq, lastSeq: all.lastSeq, dropped: all.dropped }, { firstSeq: 1, lastSeq: 3, dropped: 0 });
  assert.deepEqual(ring.page({ since: 1, limit: 1 }).entries.map((e) => e.seq), [2]);
  assert.deepEqual(ring.page({ since: 3 }).entries, []);
  assert.deepEqual(ring.page({ limit: 2 }).entries.map((e) => e.msg), ['two', 'three'], 'no since: the newest lines');
  assert.equal(LogPage.safeParse(all).success, true);
});

test('the ring keeps the newest lines within its line budget and says what a reader missed', () => {
  const ring = new LogRing({ maxLines: 3, maxBytes: 1 << 20, maxLineBytes: 1024 });
  for (let i = 1; i <= 10; i += 1) ring.write(line(`m${i}`));
  const page = ring.page({ since: 2 });
  assert.deepEqual(page.entries.map((e) => e.msg), ['m8', 'm9', 'm10']);
  assert.equal(page.firstSeq, 8);
  assert.equal(page.dropped, 5, 'lines 3 to 7 were evicted before they were read');
  assert.equal(ring.page({ since: 7 }).dropped, 0);
  assert.equal(ring.size.lines, 3);
});

test('the ring keeps within its byte budget', () => {
  const one = line('x'.repeat(100));
  const bytes = Buffer.byteLength(one) - 1;
  const ring = new LogRing({ maxLines: 1000, maxBytes: bytes * 4 + 10, maxLineBytes: 1024 });
  for (let i = 0; i < 20; i += 1) ring.write(one);
  assert.equal(ring.size.lines, 4);
  assert.ok(ring.size.bytes <= bytes * 4 + 10);
});

test('a line over the per-line budget is kept, cut, with its level and time', () => {
  const ring = new LogRing({ maxLines: 10, maxBytes: 1 << 20, maxLineBytes: 512 });
  ring.write(`${JSON.stringify({ level: 40, time: 5, msg: 'é'.repeat(2000), big: 'y'.repeat(5000) })}\n`);
  const [entry] = ring.page({ since: 0 }).entries;
  assert.equal(entry!.level, 'warn');
  assert.equal(entry!.time, 5);
  assert.match(entry!.msg, /^é+ \[line of \d+ bytes cut\]$/);
  assert.deepEqual(entry!.fields, {});
  assert.ok(ring.size.bytes <= 512);
});

test('chunks are split into lines; a partial line waits for its end; odd lines still show', () => {
  const ring = new LogRing();
  const whole = line('split');
  ring.write(whole.slice(0, 10));
  assert.equal(ring.lastSeq, 0);
  ring.write(whole.slice(10) + line('next') + '\n  \n');
  ring.write(Buffer.from('not json\n'));
  ring.write('[1,2]\n');
  ring.write(`${JSON.stringify({ level: 'debug', time: -4, msg: { a: 1 } })}\n`);
  const entries = ring.page({ since: 0 }).entries;
  assert.deepEqual(entries.map((e) => e.msg), ['split', 'next', 'not json', '[1,2]', '{"a":1}']);
  assert.equal(entries[4]!.level, 'debug');
  assert.equal(entries[4]!.time, 0, 'a time that is not a Unix time shows as 0');
  assert.equal(LogPage.safeParse(ring.page({ since: 0 })).success, true);
});

test('a page is bounded by lines and bytes', () => {
  const ring = new LogRing({ maxLines: 5000, maxBytes: 64 << 20, maxLineBytes: 8192 });
  for (let i = 0; i < 2000; i += 1) ring.write(line('z'.repeat(4000)));
  const forward = ring.page({ since: 0, limit: 10_000 });
  const tail = ring.page({});
  for (const page of [forward, tail]) {
    assert.ok(page.entries.length <= LOG_PAGE_MAX_LINES);
    assert.ok(page.entries.reduce((n, e) => n + JSON.stringify(e).length, 0) <= LOG_PAGE_MAX_BYTES + 64 * page.entries.length);
    assert.ok(page.entries.length > 0);
  }
  assert.equal(forward.entries[0]!.seq, 1);
  assert.equal(tail.entries.at(-1)!.seq, 2000);
  assert.ok(forward.entries.length < 2000);
});
