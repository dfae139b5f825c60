import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatBytes, formatDuration, formatNumber, formatPercent, shortId } from './format.js';
import { parseRoute, routeHash } from './route.js';
import type { PlacementErrorView } from './types.js';
import { describePlacementError } from './words.js';

test('numbers people read', () => {
  assert.equal(formatBytes(1536), '1.50 KiB');
  assert.equal(formatBytes(3 * 1024 ** 3), '3.00 GiB');
  assert.equal(formatBytes(null), '–');
  assert.equal(formatNumber(1234.5), '1235');
  assert.equal(formatNumber(12.345), '12.3');
  assert.equal(formatNumber(0.012345), '0.0123');
  assert.equal(formatNumber(0.5), '0.5');
  assert.equal(formatNumber(100), '100');
  assert.equal(formatNumber(2.0001), '2');
  assert.equal(formatPercent(0.456), '46%');
  assert.equal(formatDuration(850), '850 ms');
  assert.equal(formatDuration(2400), '2.4 s');
  assert.equal(formatDuration(185_000), '3m05s');
  assert.equal(shortId('12D3KooWabcdefghijkl'), '…efghijkl');
});

test('hash routes', () => {
  assert.deepEqual(parseRoute(''), { page: 'cluster', params: {} });
  assert.deepEqual(parseRoute('#/logs?node=abc'), { page: 'logs', params: { node: 'abc' } });
  assert.deepEqual(parseRoute('#/nowhere'), { page: 'cluster', params: {} });
  assert.equal(routeHash('metrics', { node: 'all' }), '#/metrics?node=all');
});

test('placement errors in words', () => {
  const words = describePlacementError({ code: 'MEMORY_SHORTFALL', message: 'alpha needs 3 GiB, has 1 GiB' });
  assert.equal(words.title, 'Not enough memory');
  assert.equal(words.detail, 'alpha needs 3 GiB, has 1 GiB');
  // A page left open while its node was upgraded can meet a code it was not built with.
  assert.match(describePlacementError({ code: 'SOMETHING_NEW' as PlacementErrorView['code'], message: 'x' }).title, /SOMETHING_NEW/);
});
