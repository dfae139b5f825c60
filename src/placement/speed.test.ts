import { test } from 'node:test';
import assert from 'node:assert/strict';
import { factsA, MiB } from './fixtures.test-support.js';
import { fullShare } from './memory.js';
import { bytesReadPerToken, CPU_ENGINE_COSTS, NODE_RELAY_S, predictDecode, RPC_HOP_BASE_S, RPC_HOP_PER_LAYER_S } from './speed.js';

const close = (actual: number | null, expected: number, what: string): void => {
  assert.ok(actual !== null && Math.abs(actual - expected) < 1e-3, `${what}: ${actual} vs ${expected}`);
};
const server = CPU_ENGINE_COSTS.llama_server!;
const cpp = CPU_ENGINE_COSTS.llama_cpp!;

/** shoal/tiny's shape: 2 layers of 64 wide, ~0.84 MB of f32. */
function tinyFacts() {
  return factsA({ blockCount: 2, embeddingLength: 64, layerBytes: [300_000, 300_000], embeddingBytes: 120_000, outputBytes: 120_000 });
}

test('bytes read per token: layers + output head; the embedding table only when the head is tied to it', () => {
  const facts = factsA();
  // 3200 MiB layers + 128 MiB head (one embedding row per token is negligible)
  assert.equal(bytesReadPerToken(facts, fullShare(facts)), 3328 * MiB);
  // tied: the head is the 64 MiB embedding table, read in full: 3200 + 128 + 64
  assert.equal(bytesReadPerToken(factsA({ outputTied: true }), fullShare(facts)), 3392 * MiB);
  assert.equal(bytesReadPerToken(facts, { firstLayer: 0, layerCount: 13, holdsOutput: false }), 1300 * MiB);
});

test('a large model is bound by bandwidth: bytes / bandwidth plus small fixed costs', () => {
  const facts = factsA();
  // 3328 MiB = 3,489,660,928 B / 31e9 B/s = 112.570 ms; + 32 × 0.022 + 0.143 + 0.3 ms relay = 113.717 ms → 8.794 tok/s
  const p = predictDecode(facts, [{ share: fullShare(facts), backend: 'llama_server-cpu', memoryBandwidthBytesPerS: 31e9, donor: false }]);
  const read = 3_489_660_928 / 31e9;
  close(p.secondsPerToken, read + 32 * server.perLayerS + server.baseS + NODE_RELAY_S, 'seconds');
  close(p.tokPerS, 8.794, 'tok/s');
  assert.ok(read / p.secondsPerToken! > 0.98, 'the bandwidth term dominates');
  assert.equal(p.unpredictable, null);
  // twice the bandwidth, nearly twice the speed
  const fast = predictDecode(facts, [{ share: fullShare(facts), backend: 'llama_server-cpu', memoryBandwidthBytesPerS: 62e9, donor: false }]);
  assert.ok(fast.tokPerS! / p.tokPerS! > 1.95 && fast.tokPerS! / p.tokPerS! < 2);
});

test('a small model is bound by per-token overheads, not bandwidth', () => {
  const facts = tinyFacts();
  const p = predictDecode(facts, [{ share: fullShare(facts), backend: 'llama_server-cpu', memoryBandwidthBytesPerS: 38.6e9, donor: false }]);
  // 0.72 MB / 38.6 GB/s = 0.019 ms; + 2 × 0.022 + 0.143 + 0.3 = 0.506 ms → ~1976 tok/s, not the ~53,600 of bytes alone
  close(p.secondsPerToken! * 1e3, 0.72e6 / 38.6e6 + 2 * server.perLayerS * 1e3 + server.baseS * 1e3 + NODE_RELAY_S * 1e3, 'ms/token');
  assert.ok(p.tokPerS! > 1800 && p.tokPerS! < 2200, `${p.tokPerS}`);
  // ten times the bandwidth hardly matters here
  const fast = predictDecode(facts, [{ share: fullShare(facts), backend: 'llama_server-cpu', memoryBandwidthBytesPerS: 386e9, donor: false }]);
  assert.ok(fast.tokPerS! / p.tokPerS! < 1.05);
  // more layers cost their synchronisation even with no more bytes
  const deep = factsA({ ...facts, blockCount: 16, layerBytes: new Array<number>(16).fill(600_000 / 16), kvHeadsPerLayer: new Array<number>(16).fill(8) });
  const d = predictDecode(deep, [{ share: fullShare(deep), backend: 'llama_server-cpu', memoryBandwidthBytesPerS: 38.6e9, donor: false }]);
  close((d.secondsPerToken! - p.secondsPerToken!) * 1e3, 14 * server.perLayerS * 1e3, 'per-layer term');
  // node-llama-cpp costs ~4 ms per token more
  const slow = predictDecode(facts, [{ share: fullShare(facts), backend: 'llama_cpp-cpu', memoryBandwidthBytesPerS: 38.6e9, donor: false }]);
  assert.ok(slow.tokPerS! > 200 && slow.tokPerS! < 250, `${slow.tokPerS}`);
  close(slow.secondsPerToken! - p.secondsPerToken!, cpp.baseS - server.baseS + ((cpp.readFactor - 1) * 0.72e6) / 38.6e9, 'engine base');
});

test('split: the parts add up, plus one RPC hop per donor and one for the CPU driver\'s own share', () => {
  const facts = factsA();
  const donor = { share: { firstLayer: 0, layerCount: 13, holdsOutput: false }, backend: 'rpc-cpu', memoryBandwidthBytesPerS: 31e9, donor: true } as const;
  const driver = { share: { firstLayer: 13, layerCount: 19, holdsOutput: true }, backend: 'llama_server-cpu', memoryBandwidthBytesPerS: 31e9, donor: false } as const;
  const single = predictDecode(facts, [{ share: fullShare(facts), backend: 'llama_server-cpu', memoryBandwidthBytesPerS: 31e9, donor: false }]);
  // donor hop = 0.2 + 13 × 0.12 ms RPC + 2 × 0.3 ms round trips + 2 × 4096 × 4 B / 125e6 B/s (0.262 ms) = 2.622 ms;
  // the driver's own hop on loopback = 0.2 + 19 × 0.12 = 2.48 ms
  const p = predictDecode(facts, [donor, driver]);
  close((p.secondsPerToken! - single.secondsPerToken!) * 1e3, 2.622144 + 2.48, 'hops');
  close(RPC_HOP_BASE_S * 1e3 + 13 * RPC_HOP_PER_LAYER_S * 1e3, 1.76, 'donor RPC term');
  assert.ok(p.tokPerS! < single.tokPerS!);
  assert.ok(p.arithmetic.some((line) => /own share/.test(line)));
  // a faster link shrinks only the transfer term: 32,768 B / 10e9 B/s = 0.0033 ms instead of 0.262
  const fastLink = predictDecode(facts, [{ ...donor, linkBytesPerS: 10e9 }, driver]);
  close((p.secondsPerToken! - fastLink.secondsPerToken!) * 1e3, 0.262144 - 0.0032768, 'link term');
});

test('a part on a node that has not measured its bandwidth gets no figure, and says why', () => {
  const facts = factsA();
  const measured = { share: { firstLayer: 13, layerCount: 19, holdsOutput: true }, backend: 'llama_server-cpu', memoryBandwidthBytesPerS: 31e9, donor: false } as const;
  for (const parts of [
    [{ share: fullShare(facts), backend: 'llama_server-cpu', donor: false }],
    // one unmeasured donor is enough: its share's read time is unknown
    [{ share: { firstLayer: 0, layerCount: 13, holdsOutput: false }, backend: 'rpc-cpu', donor: true }, measured],
  ]) {
    const p = predictDecode(facts, parts);
    assert.equal(p.tokPerS, null);
    assert.equal(p.secondsPerToken, null);
    assert.match(p.unpredictable ?? '', /not measured its memory bandwidth/);
  }
});

test('a backend without a measured speed model gets no figure, and says why', () => {
  const facts = factsA();
  for (const parts of [
    [{ share: fullShare(facts), backend: 'llama_server-cuda', memoryBandwidthBytesPerS: 31e9, donor: false }],
    [
      { share: { firstLayer: 0, layerCount: 13, holdsOutput: false }, backend: 'rpc-cuda', donor: true },
      { share: { firstLayer: 13, layerCount: 19, holdsOutput: true }, backend: 'llama_server-cpu', donor: false },
    ],
  ]) {
    const p = predictDecode(facts, parts);
    assert.equal(p.tokPerS, null);
    assert.equal(p.secondsPerToken, null);
    assert.match(p.unpredictable ?? '', /cuda/);
  }
});
