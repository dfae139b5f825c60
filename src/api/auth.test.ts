import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../common/errors.js';
import { ApiKeys, apiKeyDigest } from './auth.js';

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

test("a WebSocket upgrade may carry the key as OpenAI's browser realtime client does, in a subprotocol", () => {
  const keys = new ApiKeys(['k1']);
  assert.doesNotThrow(() => keys.check({ 'sec-websocket-protocol': 'realtime, openai-insecure-api-key.k1' }));
  assert.throws(() => keys.check({ 'sec-websocket-protocol': 'realtime, openai-insecure-api-key.k2' }), unauthorized);
  assert.throws(() => keys.check({ 'sec-websocket-protocol': 'realtime, openai-insecure-api-key.' }), unauthorized);
});

test('a missing or wrong key is UNAUTHORIZED', () => {
  const keys = new ApiKeys(['k1']);
  assert.throws(() => keys.check({}), unauthorized);
  assert.throws(() => keys.check({ authorization: 'Bearer k2' }), unauthorized);
  assert.throws(() => keys.check({ authorization: 'Basic k1' }), unauthorized);
  assert.throws(() => keys.check({ 'x-api-key': 'k1x' }), unauthorized);
});

test("the cluster's keys, held as digests, are accepted besides the node's own and follow every change", () => {
  let cluster: readonly string[] = [];
  const keys = new ApiKeys(['node-key'], () => cluster);
  assert.doesNotThrow(() => keys.check({ authorization: 'Bearer node-key' }));
  assert.throws(() => keys.check({ authorization: 'Bearer cluster-key' }), unauthorized);
  cluster = [apiKeyDigest('cluster-key')];
  assert.doesNotThrow(() => keys.check({ authorization: 'Bearer cluster-key' }));
  assert.doesNotThrow(() => keys.check({ 'x-api-key': 'node-key' }), 'the node key still works');
  cluster = [];
  assert.throws(() => keys.check({ authorization: 'Bearer cluster-key' }), unauthorized, 'a removed key stops working at once');
});

test('cluster keys alone turn the check on', () => {
  const keys = new ApiKeys([], () => [apiKeyDigest('only')]);
  assert.equal(keys.enabled, true);
  assert.throws(() => keys.check({}), unauthorized);
  assert.doesNotThrow(() => keys.check({ authorization: 'Bearer only' }));
});
