import '../../polyfill.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RwLock } from './lock.js';

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('readers share the lock; a writer runs alone, after the readers before it', async () => {
  const lock = new RwLock();
  const order: string[] = [];
  const release = Promise.withResolvers<void>();
  const readA = lock.shared(async () => {
    order.push('a in');
    await release.promise;
    order.push('a out');
  });
  const readB = lock.shared(async () => {
    order.push('b in');
    await release.promise;
    order.push('b out');
  });
  const write = lock.exclusive(async () => {
    order.push('write');
  });
  await tick();
  assert.deepEqual(order, ['a in', 'b in']);
  release.resolve();
  await Promise.all([readA, readB, write]);
  assert.deepEqual(order, ['a in', 'b in', 'a out', 'b out', 'write']);
});

test('a waiting writer holds back readers that come after it, and a failure releases the lock', async () => {
  const lock = new RwLock();
  const order: string[] = [];
  const release = Promise.withResolvers<void>();
  const first = lock.shared(async () => {
    await release.promise;
    order.push('first read');
  });
  const write = lock.exclusive(async () => {
    order.push('write');
    throw new Error('boom');
  });
  const later = lock.shared(async () => {
    order.push('later read');
  });
  await tick();
  assert.deepEqual(order, []);
  release.resolve();
  await first;
  await assert.rejects(write, /boom/);
  await later;
  assert.deepEqual(order, ['first read', 'write', 'later read']);
});
