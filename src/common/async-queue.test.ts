import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AsyncQueue } from './async-queue.js';

async function drain<T>(queue: AsyncQueue<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of queue) out.push(item);
  return out;
}

test('items pushed before and after the consumer starts arrive in order, then the end', async () => {
  const queue = new AsyncQueue<number>();
  queue.push(1);
  const result = drain(queue);
  queue.push(2);
  await Promise.resolve();
  queue.push(3);
  queue.end();
  queue.push(4);
  assert.deepEqual(await result, [1, 2, 3]);
});

test('a failure is delivered after the items already pushed', async () => {
  const queue = new AsyncQueue<string>();
  queue.push('a');
  queue.fail(new Error('boom'));
  const seen: string[] = [];
  await assert.rejects(async () => {
    for await (const item of queue) seen.push(item);
  }, /boom/);
  assert.deepEqual(seen, ['a']);
});

test('a consumer that stops early tells the producer once, and later pushes are dropped', async () => {
  let abandoned = 0;
  const queue = new AsyncQueue<number>(() => (abandoned += 1));
  queue.push(1);
  queue.push(2);
  for await (const item of queue) {
    assert.equal(item, 1);
    break;
  }
  queue.push(3);
  assert.equal(abandoned, 1);
  assert.equal(queue.ended, true);
  const again = queue[Symbol.asyncIterator]();
  assert.deepEqual(await again.next(), { value: undefined, done: true });
  await again.return!();
  assert.equal(abandoned, 1);
});

test('a consumer that finishes normally does not count as abandoning', async () => {
  let abandoned = 0;
  const queue = new AsyncQueue<number>(() => (abandoned += 1));
  queue.push(1);
  queue.end();
  assert.deepEqual(await drain(queue), [1]);
  assert.equal(abandoned, 0);
});

test('a failure wakes a waiting consumer, and only the first ending counts', async () => {
  const queue = new AsyncQueue<string>();
  const result = drain(queue);
  queue.fail(new Error('first'));
  queue.end();
  queue.fail(new Error('second'));
  await assert.rejects(result, /first/);
  assert.equal(queue.ended, true);
});
