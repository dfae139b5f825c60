import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ENVELOPE_IN_FLIGHT_MAX, EnvelopeStore, KNEE_MIN_SAMPLES, type EnvelopeKey, type EnvelopeSample } from './envelope.js';

const KEY: EnvelopeKey = { modelId: 'm', backend: 'llama_cpp-cpu', nodeId: 'n1' };

/** `count` samples at `inFlight`, each at `tokensPerS` with the given ttft and latency. */
function samples(inFlight: number, count: number, tokensPerS: number | null, ttftMs = 100, latencyMs = 1000): EnvelopeSample[] {
  return Array.from({ length: count }, () => ({ inFlight, tokensPerS, ttftMs, latencyMs }));
}

function storeWith(...groups: EnvelopeSample[][]): EnvelopeStore {
  const store = new EnvelopeStore();
  for (const group of groups) for (const sample of group) store.record(KEY, sample);
  return store;
}

describe('performance envelopes', () => {
  test('one point per in-flight level: mean speed, aggregate = mean x level, p50 TTFT and latency', () => {
    const store = storeWith(
      [{ inFlight: 1, tokensPerS: 10, ttftMs: 50, latencyMs: 500 }, { inFlight: 1, tokensPerS: 20, ttftMs: 70, latencyMs: 900 }, { inFlight: 1, tokensPerS: 30, ttftMs: 60, latencyMs: 700 }],
      [{ inFlight: 4, tokensPerS: 8, ttftMs: 200, latencyMs: 2000 }, { inFlight: 4, tokensPerS: null, ttftMs: 300, latencyMs: 3000 }],
    );
    const [envelope] = store.view().envelopes;
    assert.deepEqual(envelope, {
      ...KEY,
      points: [
        { inFlight: 1, requests: 3, meanTokensPerS: 20, aggregateTokensPerS: 20, p50TtftMs: 60, p50LatencyMs: 700 },
        // The sample without a speed counts for the request and the times, not the mean.
        { inFlight: 4, requests: 2, meanTokensPerS: 8, aggregateTokensPerS: 32, p50TtftMs: 200, p50LatencyMs: 2000 },
      ],
      kneeInFlight: null,
    });
  });

  test('the knee is the smallest level past which aggregate throughput stops rising', () => {
    // Aggregates: 1 -> 20, 2 -> 36, 4 -> 36.8 (< 1.05 x 36), 8 -> 36.
    const store = storeWith(samples(1, 3, 20), samples(2, 3, 18), samples(4, 3, 9.2), samples(8, 3, 4.5));
    assert.equal(store.view().envelopes[0]!.kneeInFlight, 2);
  });

  test('no knee while throughput still rises at the highest level', () => {
    const store = storeWith(samples(1, 3, 20), samples(2, 3, 18), samples(4, 3, 15));
    assert.equal(store.view().envelopes[0]!.kneeInFlight, null);
  });

  test('one noisy level does not make a knee when a level above rises again', () => {
    // Aggregates: 1 -> 20, 2 -> 20 (flat), 4 -> 60.
    const store = storeWith(samples(1, 3, 20), samples(2, 3, 10), samples(4, 3, 15));
    assert.equal(store.view().envelopes[0]!.kneeInFlight, null);
  });

  test('levels with too few rated samples are not looked at for the knee', () => {
    const few = KNEE_MIN_SAMPLES - 1;
    const store = storeWith(samples(1, 3, 20), samples(2, few, 5), samples(2, 5, null));
    const envelope = store.view().envelopes[0]!;
    assert.equal(envelope.points.find((p) => p.inFlight === 2)!.requests, few + 5);
    assert.equal(envelope.kneeInFlight, null);
  });

  test('samples per envelope are bounded, the oldest dropped first', () => {
    const store = new EnvelopeStore({ samplesMax: 4, perNodeMax: 8, envelopesMax: 8 });
    for (const sample of [...samples(1, 4, 10), ...samples(2, 3, 10)]) store.record(KEY, sample);
    const points = store.view().envelopes[0]!.points;
    assert.deepEqual(points.map((p) => [p.inFlight, p.requests]), [[1, 1], [2, 3]]);
  });

  test('envelopes per node and in all are bounded, the least recently updated dropped first', () => {
    const store = new EnvelopeStore({ samplesMax: 4, perNodeMax: 2, envelopesMax: 3 });
    const sample = samples(1, 1, 10)[0]!;
    store.record({ ...KEY, modelId: 'a' }, sample);
    store.record({ ...KEY, modelId: 'b' }, sample);
    store.record({ ...KEY, modelId: 'a' }, sample);
    store.record({ ...KEY, modelId: 'c' }, sample);
    assert.deepEqual(store.view().envelopes.map((e) => `${e.nodeId}/${e.modelId}`), ['n1/a', 'n1/c']);
    store.record({ ...KEY, nodeId: 'n2' }, sample);
    store.record({ ...KEY, nodeId: 'n3' }, sample);
    // Full at 3: the stalest of all (n1/a) made room for n3.
    assert.deepEqual(store.view().envelopes.map((e) => `${e.nodeId}/${e.modelId}`), ['n1/c', 'n2/m', 'n3/m']);
  });

  test('an in-flight level past the highest kept counts at the highest', () => {
    const store = storeWith(samples(ENVELOPE_IN_FLIGHT_MAX + 50, 1, 1));
    assert.equal(store.view().envelopes[0]!.points[0]!.inFlight, ENVELOPE_IN_FLIGHT_MAX);
  });
});
