import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { categoryOf, installBreakdown, topLevelName } from './install-breakdown.js';

describe('install breakdown', () => {
  it('names top-level packages only, scoped or not', () => {
    assert.equal(topLevelName('node_modules/zod'), 'zod');
    assert.equal(topLevelName('node_modules/@libp2p/tcp'), '@libp2p/tcp');
    assert.equal(topLevelName('node_modules/a/node_modules/b'), null);
    assert.equal(topLevelName(''), null);
  });

  it('classes lockfile entries as dev, optional or production', () => {
    assert.equal(categoryOf({ dev: true }), 'dev');
    assert.equal(categoryOf({ devOptional: true }), 'dev');
    assert.equal(categoryOf({ optional: true }), 'optional');
    assert.equal(categoryOf({}), 'production');
  });

  it('sums installed sizes per category and lists the largest; packages not installed here are left out', () => {
    const lock = {
      '': {},
      'node_modules/node-llama-cpp': {},
      'node_modules/@node-llama-cpp/linux-x64-cuda': { optional: true },
      'node_modules/@node-llama-cpp/mac-arm64-metal': { optional: true },
      'node_modules/typescript': { dev: true },
      'node_modules/typescript/node_modules/nested': { dev: true },
    };
    const sizes = new Map([
      ['node-llama-cpp', 40],
      ['@node-llama-cpp/linux-x64-cuda', 180],
      ['typescript', 20],
    ]);
    const b = installBreakdown(lock, sizes, 2);
    assert.deepEqual(b.bytesByCategory, { production: 40, optional: 180, dev: 20 });
    assert.deepEqual(b.largest, [
      { name: '@node-llama-cpp/linux-x64-cuda', bytes: 180, category: 'optional' },
      { name: 'node-llama-cpp', bytes: 40, category: 'production' },
    ]);
  });
});
