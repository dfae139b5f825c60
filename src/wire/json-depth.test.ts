import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_JSON_DEPTH, jsonDepthExceeds } from './json-depth.js';

const nested = (depth: number): string => '{"a":'.repeat(depth - 1) + '[]' + '}'.repeat(depth - 1);

test('jsonDepthExceeds counts arrays and objects and ignores brackets inside strings', () => {
  assert.equal(jsonDepthExceeds(nested(MAX_JSON_DEPTH)), false);
  assert.equal(jsonDepthExceeds(nested(MAX_JSON_DEPTH + 1)), true);
  assert.equal(jsonDepthExceeds(nested(5000)), true);
  assert.equal(jsonDepthExceeds(JSON.stringify({ text: '[[[[{{{{"\\\\"[[[[' })), false);
  assert.equal(jsonDepthExceeds('[[[', 2), true);
  assert.equal(jsonDepthExceeds('[[]]', 2), false);
  assert.equal(jsonDepthExceeds(JSON.stringify({ s: '\\"[[[' }), 1), false);
});
