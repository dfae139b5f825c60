import assert from 'node:assert/strict';
import { test } from 'node:test';
import { matchModelName } from './model-name.js';

const IDS = ['shoal/tiny-eos', 'acme/x:Q8_0', 'acme/y:Q4_K_M', 'acme/y:Q8_0', 'local/my-model', 'other/tiny-eos:Q4_0'];

test('the exact id wins, then a repo without its quant when one quant is known', () => {
  assert.deepEqual(matchModelName('acme/y:Q8_0', IDS), { kind: 'found', id: 'acme/y:Q8_0' });
  assert.deepEqual(matchModelName('acme/x', IDS), { kind: 'found', id: 'acme/x:Q8_0' });
  assert.deepEqual(matchModelName('acme/y', IDS), { kind: 'ambiguous', choices: ['acme/y:Q4_K_M', 'acme/y:Q8_0'] });
});

test('a name without its owner matches when it is unique; case only matters when something matches exactly', () => {
  assert.deepEqual(matchModelName('my-model', IDS), { kind: 'found', id: 'local/my-model' });
  assert.deepEqual(matchModelName('tiny-eos', IDS), { kind: 'ambiguous', choices: ['other/tiny-eos:Q4_0', 'shoal/tiny-eos'] });
  assert.deepEqual(matchModelName('ACME/X:q8_0', IDS), { kind: 'found', id: 'acme/x:Q8_0' });
  assert.deepEqual(matchModelName('acme/z', IDS), { kind: 'none' });
  assert.deepEqual(matchModelName('x', IDS), { kind: 'found', id: 'acme/x:Q8_0' });
});
