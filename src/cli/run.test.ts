import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backendsOption, parseSize } from './run.js';

test('--memory-budget sizes: binary and decimal units, bare bytes, clear errors', () => {
  assert.equal(parseSize('memory-budget', '6GiB'), 6 * 2 ** 30);
  assert.equal(parseSize('memory-budget', '512mib'), 512 * 2 ** 20);
  assert.equal(parseSize('memory-budget', '2.5G'), 2.5e9);
  assert.equal(parseSize('memory-budget', '1000000'), 1_000_000);
  assert.throws(() => parseSize('memory-budget', '6 parsecs'), /--memory-budget must be a size such as 6GiB/);
  assert.throws(() => parseSize('memory-budget', '0'), /more than 0/);
  assert.throws(() => parseSize('memory-budget', '-1G'), /must be a size/);
});

test('--backends / SHOAL_BACKENDS: a list of backend tags, or nothing; anything else refused with what a tag is', () => {
  assert.equal(backendsOption(undefined), null);
  assert.equal(backendsOption('  '), null);
  assert.deepEqual(backendsOption('llama_cpp-cuda, rpc-cuda'), ['llama_cpp-cuda', 'rpc-cuda']);
  assert.throws(() => backendsOption('llama_cpp-cuda,gpu-fast'), /'gpu-fast' is not a backend tag: use <engine>-<compute>/);
});
