import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../common/errors.js';
import { ApiKeys } from './auth.js';

const unauthorized = (error: unknown): boolean => error instanceof ShoalError && error.code === 'UNAUTHORIZED';

test('no configured keys lets everyone in', () => {
  assert.doesNotThrow(() => new ApiKeys([]).check({}));
  assert.equal(new ApiKeys(['']).enabled, false);
});

test('a configured key is accepted as a bearer token or x-api-key', () => {
  const keys = new ApiKeys(['k1', 'second-key']);
  assert.doesNotThrow(() => keys.check({ authorization: 'Bearer k1' }));
  assert.doesNotThrow(() => keys.check({ authorization: 'bearer second-key' }));
  assert.doesNotThrow(() => keys.check({ 'x-api-key': 'k1' }));
});

test('a missing or wrong key is UNAUTHORIZED', () => {
  const keys = new ApiKeys(['k1']);
  assert.throws(() => keys.check({}), unauthorized);
  assert.throws(() => keys.check({ authorization: 'Bearer k2' }), unauthorized);
  assert.throws(() => keys.check({ authorization: 'Basic k1' }), unauthorized);
  assert.throws(() => keys.check({ 'x-api-key': 'k1x' }), unauthorized);
});
