import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Sample } from '../metrics/series.js';
import { completeNewest } from './events.js';

const s = (t: number, nodes: number): Sample => ({ t, nodes }) as Sample;

test('the live cluster sum is the newest point every recently reporting node is in', () => {
  assert.equal(completeNewest([s(1, 2), s(2, 2), s(3, 1)])?.t, 2, 'the newest lacks a node whose sample is not taken yet');
  assert.equal(completeNewest([s(1, 2), s(2, 2), s(3, 2)])?.t, 3);
  assert.equal(completeNewest([s(1, 3), s(2, 2), s(3, 2), s(4, 2)])?.t, 4, 'only the last three points count: a node that left is not waited for');
  assert.equal(completeNewest([s(1, 1)])?.t, 1);
  assert.equal(completeNewest([]), undefined);
});
