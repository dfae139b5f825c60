import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DisposeStack } from './dispose-stack.js';

test('steps run newest first, each awaited before the next', async () => {
  const stack = new DisposeStack();
  const ran: string[] = [];
  stack.defer(() => ran.push('first'));
  stack.defer(async () => {
    await new Promise((resolve) => setTimeout(resolve, 10));
    ran.push('second');
  });
  stack.defer(() => ran.push('third'));
  await stack.disposeAsync();
  assert.deepEqual(ran, ['third', 'second', 'first']);
});

test('use() registers a disposable in the same order as defer() and returns it', async () => {
  const stack = new DisposeStack();
  const ran: string[] = [];
  const asyncPart = { [Symbol.asyncDispose]: async () => void ran.push('async') };
  const syncPart = { [Symbol.dispose]: () => void ran.push('sync') };
  assert.equal(stack.use(asyncPart), asyncPart);
  stack.defer(() => ran.push('deferred'));
  assert.equal(stack.use(syncPart), syncPart);
  assert.equal(stack.use(null), null);
  assert.equal(stack.use(undefined), undefined);
  await stack.disposeAsync();
  assert.deepEqual(ran, ['sync', 'deferred', 'async']);
});

test('a failing step does not stop the others; the first failure is rethrown after all ran', async () => {
  const stack = new DisposeStack();
  const ran: string[] = [];
  stack.defer(() => ran.push('oldest'));
  stack.defer(() => {
    throw new Error('second to fail');
  });
  stack.defer(() => ran.push('middle'));
  stack.defer(async () => {
    await Promise.resolve();
    throw new Error('first to fail');
  });
  stack.defer(() => ran.push('newest'));
  await assert.rejects(stack.disposeAsync(), /^Error: first to fail$/);
  assert.deepEqual(ran, ['newest', 'middle', 'oldest']);
});

test('a falsy failure is still rethrown', async () => {
  const stack = new DisposeStack();
  stack.defer(() => Promise.reject(undefined));
  await assert.rejects(stack.disposeAsync(), (error) => error === undefined);
});

test('disposing twice runs each step once; deferring after disposal is refused', async () => {
  const stack = new DisposeStack();
  let runs = 0;
  stack.defer(() => runs++);
  await stack.disposeAsync();
  await stack[Symbol.asyncDispose]();
  assert.equal(runs, 1);
  assert.throws(() => stack.defer(() => runs++), /after disposeAsync/);
  assert.throws(() => stack.use({ [Symbol.dispose]: () => runs++ }), /after disposeAsync/);
});
