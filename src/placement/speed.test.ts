import { test } from 'node:test';
import assert from 'node:assert/strict';
import { factsA, MiB } from './fixtures.test-support.js';
import { fullShare } from './memory.js';
import { bytesReadPerToken, DEFAULT_MEMORY_BANDWIDTH_BYTES_PER_S, predictDecode } from './speed.js';

const close = (actual: number, expected: number, what: string): void => {
  assert.ok(Math.abs(actual - expected) < 1e-3, `${what}: ${actual} vs ${expected}`);
};

test('bytes read per token: layers + output head; the embedding table only when the head is tied to it', () => {
  const facts = factsA();
  // 3200 MiB layers + 128 MiB head (one embedding row per token is negligible)
  assert.equal(bytesReadPerToken(facts, fullShare(facts)), 3328 * MiB);
  // tied: the head is the 64 MiB embedding table, read in full: 3200 + 128 + 64
  assert.equal(bytesReadPerToken(factsA({ outputTied: true }), fullShare(facts)), 3392 * MiB);
  assert.equal(bytesReadPerToken(facts, { firstLayer: 0, layerCount: 13, holdsOutput: false }), 1300 * MiB);
});

test('single node: bytes / bandwidth', () => {
  const facts = factsA();
  // 3328 MiB = 3,489,660,928 B / 31e9 B/s = 0.112570 s → 8.883 tok/s
  const p = predictDecode(facts, [{ share: fullShare(facts), memoryBandwidthBytesPerS: 31e9, donor: false }]);
  close(p.secondsPerToken, 3_489_660_928 / 31e9, 'seconds');
  close(p.tokPerS, 8.883, 'tok/s');
  assert.equal(p.assumedBandwidth, false);
  // twice the bandwidth, twice the speed
  const fast = predictDecode(facts, [{ share: fullShare(facts), memoryBandwidthBytesPerS: 62e9, donor: false }]);
  close(fast.tokPerS, 2 * p.tokPerS, 'doubled');
});

test('split: the parts add up, plus one RPC hop per donor', () => {
  const facts = factsA();
  // donor 1300 MiB @ 31 GB/s = 43.972 ms; driver (1900 + 128) MiB @ 31 GB/s = 68.598 ms
  // hop = 2 ms RPC + 2 × 0.3 ms round trips + 2 × 4096 × 4 B / 125e6 B/s (0.262 ms) = 2.862 ms
  // total 115.432 ms → 8.663 tok/s: slower than the same bytes on one node (8.883)
  const p = predictDecode(facts, [
    { share: { firstLayer: 0, layerCount: 13, holdsOutput: false }, memoryBandwidthBytesPerS: 31e9, donor: true },
    { share: { firstLayer: 13, layerCount: 19, holdsOutput: true }, memoryBandwidthBytesPerS: 31e9, donor: false },
  ]);
  close(p.secondsPerToken * 1e3, (3_489_660_928 / 31e9) * 1e3 + 2.862144, 'ms/token');
  close(p.tokPerS, 8.663, 'tok/s');
  // a faster link shrinks only the transfer term: 32,768 B / 10e9 B/s = 0.0033 ms instead of 0.262
  const fastLink = predictDecode(facts, [
    { share: { firstLayer: 0, layerCount: 13, holdsOutput: false }, memoryBandwidthBytesPerS: 31e9, linkBytesPerS: 10e9, donor: true },
    { share: { firstLayer: 13, layerCount: 19, holdsOutput: true }, memoryBandwidthBytesPerS: 31e9, donor: false },
  ]);
  close((p.secondsPerToken - fastLink.secondsPerToken) * 1e3, 0.262144 - 0.0032768, 'link term');
});

test('an unmeasured node assumes the reference bandwidth and says so', () => {
  const facts = factsA();
  const p = predictDecode(facts, [{ share: fullShare(facts), donor: false }]);
  assert.equal(p.assumedBandwidth, true);
  close(p.secondsPerToken, 3_489_660_928 / DEFAULT_MEMORY_BANDWIDTH_BYTES_PER_S, 'default');
});
