import assert from 'node:assert/strict';
import { test } from 'node:test';
import { placeRequest } from './control.js';

test('the body maps to a PlaceRequest field by field, and absent fields stay absent', () => {
  assert.deepEqual(placeRequest({ model: 'org/m' }), { model: 'org/m' });
  assert.deepEqual(placeRequest({ model: 'org/m', replicas: 2, exclude: ['n1'], min_nodes: 3, context_tokens: 4096, parallel: 8, dry_run: true }), {
    model: 'org/m',
    replicas: 2,
    exclude: ['n1'],
    minNodes: 3,
    contextTokens: 4096,
    parallel: 8,
  });
});
