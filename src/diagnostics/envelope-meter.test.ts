import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { InstanceId, NodeId } from '../common/ids.js';
import type { ServingInstance } from '../inference/dispatcher.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import { EnvelopeStore } from './envelope.js';
import { EnvelopeMeter } from './envelope-meter.js';

const SERVED: ServingInstance = { nodeId: 'n1' as NodeId, instanceId: 'i1' as InstanceId, modelId: 'm', backend: 'llama_cpp-cpu', load: 0 };
// The meter reads only the kind.
const GENERATE = { kind: 'generate' } as RunnerTask;
const EMBED = { kind: 'embed' } as RunnerTask;

/** A clock the test moves, and a stream that yields its events as the test releases them. */
function harness() {
  let now = 0;
  const store = new EnvelopeStore();
  const meter = new EnvelopeMeter(store, () => now);
  return {
    store,
    meter,
    at: (ms: number) => void (now = ms),
  };
}

const end = (completionTokens: number): TaskEvent => ({ type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens: 3, completionTokens } });

async function* events(list: TaskEvent[], before?: (i: number) => void): AsyncGenerator<TaskEvent> {
  for (let i = 0; i < list.length; i++) {
    before?.(i);
    yield list[i]!;
  }
}

async function drain(stream: AsyncIterable<TaskEvent>): Promise<TaskEvent[]> {
  const out: TaskEvent[] = [];
  for await (const event of stream) out.push(event);
  return out;
}

describe('the envelope meter', () => {
  test('passes events on unchanged and records TTFT, latency and decode speed at the end', async () => {
    const h = harness();
    const list: TaskEvent[] = [{ type: 'start', promptTokens: 3 }, { type: 'text', text: 'a' }, { type: 'text', text: 'b' }, end(5)];
    // Dispatched at 0, first token at 100, end at 500: 4 tokens after the first in 400 ms.
    const times = [50, 100, 300, 500];
    const stream = h.meter.observe(SERVED, GENERATE, new AbortController().signal, events(list, (i) => h.at(times[i]!)));
    assert.deepEqual(await drain(stream), list);
    assert.deepEqual(h.store.view().envelopes, [
      { modelId: 'm', backend: 'llama_cpp-cpu', nodeId: 'n1', points: [{ inFlight: 1, requests: 1, meanTokensPerS: 10, aggregateTokensPerS: 10, p50TtftMs: 100, p50LatencyMs: 500 }], kneeInFlight: null },
    ]);
  });

  test('in flight is the larger of the reported load and the requests this node has open, plus itself', async () => {
    const h = harness();
    const signal = new AbortController().signal;
    const first = h.meter.observe(SERVED, GENERATE, signal, events([{ type: 'text', text: 'x' }, end(2)]));
    const second = h.meter.observe(SERVED, GENERATE, signal, events([{ type: 'text', text: 'x' }, end(2)]));
    // A report that lags says 0; this node knows of two open: the third is at 3.
    const third = h.meter.observe({ ...SERVED, load: 0 }, GENERATE, signal, events([{ type: 'text', text: 'x' }, end(2)]));
    await Promise.all([drain(first), drain(second), drain(third)]);
    // All closed: a report of 5 others wins now.
    await drain(h.meter.observe({ ...SERVED, load: 5 }, GENERATE, signal, events([{ type: 'text', text: 'x' }, end(2)])));
    assert.deepEqual(h.store.view().envelopes[0]!.points.map((p) => [p.inFlight, p.requests]), [[1, 1], [2, 1], [3, 1], [6, 1]]);
  });

  test('failed, cancelled and aborted requests are not samples and do not stay open', async () => {
    const h = harness();
    const failing = async function* (): AsyncGenerator<TaskEvent> {
      yield { type: 'text', text: 'x' };
      throw new Error('engine died');
    };
    await assert.rejects(drain(h.meter.observe(SERVED, GENERATE, new AbortController().signal, failing())), /engine died/);
    const cancelled = h.meter.observe(SERVED, GENERATE, new AbortController().signal, events([{ type: 'text', text: 'x' }, end(2)]));
    const iterator = cancelled[Symbol.asyncIterator]();
    await iterator.next();
    await iterator.return!();
    const abort = new AbortController();
    h.meter.observe(SERVED, GENERATE, abort.signal, events([end(2)]));
    abort.abort();
    assert.deepEqual(h.store.view().envelopes, []);
    // Nothing stayed open: the next request is at in-flight 1.
    await drain(h.meter.observe(SERVED, GENERATE, new AbortController().signal, events([{ type: 'text', text: 'x' }, end(1)])));
    assert.deepEqual(h.store.view().envelopes[0]!.points.map((p) => [p.inFlight, p.requests, p.meanTokensPerS]), [[1, 1, 0]]);
  });

  test('embeddings and token counts are not measured', () => {
    const h = harness();
    const stream = events([end(0)]);
    assert.equal(h.meter.observe(SERVED, EMBED, new AbortController().signal, stream), stream);
  });
});
