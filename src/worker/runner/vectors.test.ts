import assert from 'node:assert/strict';
import { test } from 'node:test';
import { unitLength } from './vectors.js';

test('vectors are scaled to unit length; a zero vector stays zero', () => {
  assert.deepEqual(unitLength([3, 4]), [0.6, 0.8]);
  assert.deepEqual(unitLength([0, 0]), [0, 0]);
});
