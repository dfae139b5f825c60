import assert from 'node:assert/strict';
import { test } from 'node:test';
import { byteTicks, circleLayout, frameFor, linePath, niceTicks } from './chart.js';

test('ticks are round and cover the range', () => {
  assert.deepEqual(niceTicks(0, 10, 4), [0, 5, 10]);
  assert.deepEqual(niceTicks(0, 7.3, 4), [0, 2, 4, 6, 8]);
  assert.deepEqual(niceTicks(0, 0.03, 3), [0, 0.01, 0.02, 0.03]);
  assert.deepEqual(niceTicks(0, 0, 4), [0, 1]);
  const ticks = niceTicks(0, 123_456, 4);
  assert.ok(ticks[0]! <= 0 && ticks[ticks.length - 1]! >= 123_456);
});

test('byte ticks fall on binary units', () => {
  const GiB = 1024 ** 3;
  assert.deepEqual(byteTicks(0, 23.5 * GiB, 4), [0, 10 * GiB, 20 * GiB, 30 * GiB]);
  assert.deepEqual(byteTicks(0, 700, 4), [0, 200, 400, 600, 800]);
});

test('paths break where a sample is missing and y grows upwards', () => {
  const { frame } = frameFor([[{ x: 0, y: 0 }, { x: 10, y: 10 }]], 100, 50, 0, 10);
  assert.equal(linePath([{ x: 0, y: 0 }, { x: 5, y: null }, { x: 10, y: 10 }], frame), 'M0.0,50.0M100.0,0.0');
  assert.equal(linePath([{ x: 0, y: 0 }, { x: 10, y: 10 }], frame), 'M0.0,50.0L100.0,0.0');
});

test('graph nodes: one in the middle, several on a circle starting at the top', () => {
  assert.deepEqual(circleLayout(1, 200, 100, 10), [{ x: 100, y: 50 }]);
  const three = circleLayout(3, 200, 200, 20);
  assert.equal(three.length, 3);
  assert.ok(Math.abs(three[0]!.x - 100) < 1e-9 && Math.abs(three[0]!.y - 20) < 1e-9);
});
