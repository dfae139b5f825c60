import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Ring } from './ring.js';

/** Every sequence of pushes and shifts up to a length, against a plain array that drops from the front. */
test('a ring behaves as an array capped at its capacity, for every operation sequence up to 9 steps', () => {
  for (let capacity = 1; capacity <= 4; capacity += 1) {
    // Each step is a push (of its step number) or a shift: 2^9 sequences per capacity.
    for (let mask = 0; mask < 1 << 9; mask += 1) {
      const ring = new Ring<number>(capacity);
      const model: number[] = [];
      for (let step = 0; step < 9; step += 1) {
        if ((mask >> step) & 1) {
          const evicted = ring.push(step);
          model.push(step);
          const expected = model.length > capacity ? model.shift() : undefined;
          assert.equal(evicted, expected);
        } else {
          assert.equal(ring.shift(), model.shift());
        }
        assert.equal(ring.size, model.length);
        assert.deepEqual(ring.toArray(), model);
        assert.deepEqual([...ring], model);
        assert.equal(ring.oldest(), model[0]);
        assert.equal(ring.newest(), model.at(-1));
        for (let i = -model.length - 1; i <= model.length; i += 1) assert.equal(ring.at(i), model.at(i), `at(${i})`);
      }
    }
  }
});

test('clear empties the ring and it fills again', () => {
  const ring = new Ring<string>(2);
  ring.push('a');
  ring.push('b');
  ring.push('c');
  ring.clear();
  assert.equal(ring.size, 0);
  assert.deepEqual(ring.toArray(), []);
  ring.push('d');
  assert.deepEqual(ring.toArray(), ['d']);
  assert.equal(ring.at(0.5), undefined);
});

test('a ring needs a positive integer capacity', () => {
  for (const bad of [0, -1, 1.5, Number.NaN]) assert.throws(() => new Ring(bad), RangeError);
});
