import assert from 'node:assert/strict';
import { test } from 'node:test';
import '../polyfill.js';
import { EffectChain } from './effect-chain.js';

interface Append {
  idx: number;
}

/** A core that numbers records after its last one, and a disk that asserts contiguity like the log store. */
function cluster(options: { failFirstAppend: boolean }) {
  const disk: number[] = [];
  let failNext = options.failFirstAppend;
  const core = { last: 0 };
  const next = (): Append[] => [{ idx: ++core.last }];
  let releaseRebuild: () => void = () => {};
  const rebuildStarted = Promise.withResolvers<void>();
  const failures: unknown[] = [];
  const chain = new EffectChain<Append>({
    run: async (effect) => {
      await Promise.resolve();
      if (failNext) {
        failNext = false;
        throw new Error('ENOSPC');
      }
      assert.equal(effect.idx, disk.length + 1, `idx ${effect.idx} appended where ${disk.length + 1} is next`);
      disk.push(effect.idx);
    },
    failed: async (_effect, error) => {
      failures.push(error);
      rebuildStarted.resolve();
      // Reloading the core from disk takes a while (it reads the store).
      await new Promise<void>((resolve) => (releaseRebuild = resolve));
      core.last = disk.length;
    },
    rejected: (error) => failures.push(error),
  });
  return { chain, disk, core, next, failures, rebuildStarted: rebuildStarted.promise, releaseRebuild: () => releaseRebuild() };
}

test('effects run in the order their calls were made', async () => {
  const c = cluster({ failFirstAppend: false });
  for (let i = 0; i < 5; i++) c.chain.feed(c.next);
  await c.chain.close();
  assert.deepEqual(c.disk, [1, 2, 3, 4, 5]);
});

test('a failed effect drops what was queued after it and calls made during the rebuild reach the rebuilt core', async () => {
  const c = cluster({ failFirstAppend: true });
  c.chain.feed(c.next); // idx 1: refused by the disk
  c.chain.feed(c.next); // idx 2: numbered after a record the disk never got, dropped
  await c.rebuildStarted;
  // The old core still believes it holds idx 1 and 2; a call now must wait for the rebuilt one.
  c.chain.feed(c.next);
  c.chain.feed(c.next);
  assert.equal(c.core.last, 2, 'the calls waited for the rebuild');
  c.releaseRebuild();
  await c.chain.close();
  assert.equal(c.failures.length, 1);
  assert.deepEqual(c.disk, [1, 2], 'the disk got contiguous records from the rebuilt core');
});

test('a core call that throws is reported and the chain carries on', async () => {
  const c = cluster({ failFirstAppend: false });
  c.chain.feed(() => {
    throw new Error('bad message');
  });
  c.chain.feed(c.next);
  await c.chain.close();
  assert.equal(c.failures.length, 1);
  assert.deepEqual(c.disk, [1]);
});
