import { test } from 'node:test';
import assert from 'node:assert/strict';
import { factsA, GiB, MiB } from './fixtures.test-support.js';
import { dealLayers, proportionalSplit, tensorSplitWeights } from './split.js';

test('dealLayers: largest remainder, proportional, at least one layer each', () => {
  const cases: Array<{ layers: number; weights: number[]; expected: number[] }> = [
    // 32 × 1728/4206.3 = 13.15, 32 × 2478.3/4206.3 = 18.85 → 13 + 18, the spare layer to .85 → 13, 19
    { layers: 32, weights: [1728, 2478.3], expected: [13, 19] },
    { layers: 10, weights: [1, 1], expected: [5, 5] },
    // 10 × 1/3 = 3.33 each → 3, 3, 3; the spare goes to the first on a tie
    { layers: 10, weights: [1, 1, 1], expected: [4, 3, 3] },
    // a node with no room still gets one layer (taken from the richest)
    { layers: 8, weights: [0, 100], expected: [1, 7] },
    // 12 × [1, 2, 3]/6 = 2, 4, 6 exactly
    { layers: 12, weights: [1, 2, 3], expected: [2, 4, 6] },
  ];
  for (const c of cases) {
    const counts = dealLayers(c.layers, c.weights);
    assert.deepEqual(counts, c.expected, `${c.layers} over ${c.weights.join('/')}`);
    assert.equal(counts.reduce((a, b) => a + b, 0), c.layers);
  }
  assert.throws(() => dealLayers(2, [1, 1, 1]), RangeError);
});

test('model A over a 2 GiB donor and a 3 GiB driver: layers in proportion to room after fixed costs', () => {
  const facts = factsA();
  // Fixed costs (+ 64 MiB margin each):
  //   donor:  floor 256 MiB                                       → room 2048 − 64 − 256        = 1728 MiB
  //   driver: 192 MiB emb+head, 19.2 MiB overhead, 62.5 MiB logits,
  //           256 MiB floor = 529.7 MiB                            → room 3072 − 64 − 529.7      = 2478.3 MiB
  // One layer = 100 MiB + 10 MiB overhead + 16 MiB KV (4 KiB/token × 4096) = 126 MiB; 32 need 4032 MiB ≤ 4206.3.
  // Deal: 32 × 1728/4206.3 = 13.15 → 13; 32 × 2478.3/4206.3 = 18.85 → 19.
  const result = proportionalSplit(facts, [{ freeBytes: 2 * GiB }, { freeBytes: 3 * GiB }], { contextTokens: 4096, sequences: 1 });
  assert.ok(result.ok, result.ok ? '' : result.reason);
  const [donor, driver] = result.parts;
  assert.deepEqual(donor!.share, { firstLayer: 0, layerCount: 13, holdsOutput: false });
  assert.deepEqual(driver!.share, { firstLayer: 13, layerCount: 19, holdsOutput: true });
  // donor 13 × 126 = 1638 MiB + 256 floor = 1894 MiB; driver 19 × 126 + 529.7 = 2923.7 MiB
  assert.equal(donor!.estimate.totalBytes, 1894 * MiB);
  assert.ok(Math.abs(driver!.estimate.totalBytes / MiB - 2923.7) < 0.01);
  // --tensor-split 13,20: the driver counts the output as one more layer.
  assert.deepEqual(tensorSplitWeights(result.parts), [13, 20]);
});

test('the repair moves a layer off a node that rounding pushed over', () => {
  // Uneven layers: the donor's proportional share lands on the big layers. 8 layers, the first four
  // 300 MiB, the rest 10 MiB; equal free memory → 4 + 4, so the donor would carry all four big ones.
  const facts = factsA({ blockCount: 8, layerBytes: [300, 300, 300, 300, 10, 10, 10, 10].map((m) => m * MiB), kvHeadsPerLayer: new Array<number>(8).fill(8) });
  const nodes = [{ freeBytes: 1.3 * GiB }, { freeBytes: 1.3 * GiB }];
  const result = proportionalSplit(facts, nodes, { contextTokens: 512, sequences: 1 });
  assert.ok(result.ok, result.ok ? '' : result.reason);
  assert.ok(result.parts[0]!.share.layerCount < 4, 'the donor gave up a big layer');
  assert.equal(result.parts[0]!.share.layerCount + result.parts[1]!.share.layerCount, 8);
  assert.ok(result.parts.every((p) => p.admitted));
});

test('a split that cannot fit says so and returns its best attempt', () => {
  const facts = factsA();
  const result = proportionalSplit(facts, [{ freeBytes: GiB }, { freeBytes: GiB }], { contextTokens: 4096, sequences: 1 });
  assert.equal(result.ok, false);
  assert.equal(result.parts.length, 2);
  assert.ok(result.parts.some((p) => !p.admitted));
  const tooMany = proportionalSplit(factsA({ blockCount: 2, layerBytes: [MiB, MiB], kvHeadsPerLayer: [8, 8] }), [{ freeBytes: GiB }, { freeBytes: GiB }, { freeBytes: GiB }], {
    contextTokens: 256,
    sequences: 1,
  });
  assert.equal(tooMany.ok, false);
  assert.match(tooMany.ok ? '' : tooMany.reason, /2 layers, fewer than the 3 nodes/);
});

/** llama.cpp's layer → device rule (llama-model.cpp, load_tensors), transcribed with float32 arithmetic. */
function llamaCppDevices(weights: readonly number[], layers: number): number[] {
  const f = Math.fround;
  const splits: number[] = [];
  let sum = f(0);
  for (const w of weights) {
    sum = f(sum + f(w));
    splits.push(sum);
  }
  const normalized = splits.map((s) => f(s / sum));
  const act = layers + 1; // -ngl 99: every layer plus the output
  const device = (il: number): number => {
    const x = f(f(il) / act);
    const index = normalized.findIndex((s) => s > x); // std::upper_bound
    return index < 0 ? normalized.length - 1 : index;
  };
  return Array.from({ length: layers + 1 }, (_, il) => device(il));
}

test('--tensor-split weights put exactly the planned layers on each device, and the output on the driver', () => {
  const cases: Array<{ layers: number; counts: number[] }> = [
    { layers: 32, counts: [13, 19] },
    { layers: 44, counts: [13, 13, 18] },
    { layers: 80, counts: [7, 23, 31, 19] },
    { layers: 61, counts: [1, 1, 59] },
    { layers: 126, counts: [42, 41, 43] },
    { layers: 5, counts: [1, 1, 1, 1, 1] },
  ];
  for (const { layers, counts } of cases) {
    let first = 0;
    const parts = counts.map((layerCount, i) => {
      const share = { firstLayer: first, layerCount, holdsOutput: i === counts.length - 1 };
      first += layerCount;
      return { share };
    });
    const devices = llamaCppDevices(tensorSplitWeights(parts), layers);
    const expected = counts.flatMap((n, d) => new Array<number>(n).fill(d));
    assert.deepEqual(devices.slice(0, layers), expected, `layers of ${counts.join(',')}`);
    assert.equal(devices[layers], counts.length - 1, `output of ${counts.join(',')} on the driver`);
  }
});
