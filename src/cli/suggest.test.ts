import assert from 'node:assert/strict';
import { test } from 'node:test';
import { editDistance, nearest } from './suggest.js';

test('editDistance counts insertions, deletions, substitutions and adjacent swaps as one edit each', () => {
  assert.equal(editDistance('models', 'models'), 0);
  assert.equal(editDistance('modls', 'models'), 1);
  assert.equal(editDistance('modelsx', 'models'), 1);
  assert.equal(editDistance('nodels', 'models'), 1);
  assert.equal(editDistance('--verison', '--version'), 1);
  assert.equal(editDistance('', 'ps'), 2);
});

test('nearest suggests a close typo or the one option a prefix names, and nothing for an unrelated word', () => {
  assert.equal(nearest('--apiport', ['--api-port', '--api-key', '--host']), '--api-port');
  assert.equal(nearest('staus', ['status', 'stop', 'ps']), 'status');
  assert.equal(nearest('--cont', ['--context', '--replicas']), '--context');
  assert.equal(nearest('--api', ['--api-port', '--api-key']), null);
  assert.equal(nearest('banana', ['run', 'ps', 'chat']), null);
  assert.equal(nearest('x', []), null);
});
