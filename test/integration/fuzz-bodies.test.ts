import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { anyJson, fuzzParams, mutated } from '../support/fuzz.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { sleep } from '../support/wait.js';

/**
 * Fuzzed bodies from every API family thrown at a real node, some of them abandoned mid-answer:
 * each gets an answer below 500 (or is abandoned), and afterwards every family still serves and
 * no runner slot is left in use.
 */

const MODEL = 'shoal/tiny';
const PARALLEL = 2;
const user = [{ role: 'user', content: 'hi' }];
const tools = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'string' } } } } }];

const SEEDS: Array<{ path: string; body: unknown }> = [
  { path: '/v1/chat/completions', body: { model: MODEL, messages: user, max_tokens: 4, tools, stream: true, stream_options: { include_usage: true } } },
  { path: '/v1/completions', body: { model: MODEL, prompt: 'hi', max_tokens: 4, logprobs: 2 } },
  { path: '/v1/embeddings', body: { model: MODEL, input: ['a', 'b'] } },
  { path: '/v1/audio/speech', body: { model: 'shoal/voice', voice: 'alloy', input: 'hi', response_format: 'pcm', speed: 1.5 } },
  { path: '/v1/responses', body: { model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], max_output_tokens: 4, stream: true } },
  { path: '/v1/messages', body: { model: MODEL, max_tokens: 4, messages: user, tools: [{ name: 'f', input_schema: { type: 'object' } }], stream: true } },
  { path: '/v1/messages/count_tokens', body: { model: MODEL, messages: user } },
  { path: '/api/chat', body: { model: MODEL, messages: user, options: { num_predict: 4 }, format: { type: 'object' } } },
  { path: '/api/generate', body: { model: MODEL, prompt: 'hi', options: { num_predict: 4 }, stream: false } },
  { path: '/api/embed', body: { model: MODEL, input: 'a' } },
  { path: '/api/show', body: { model: MODEL } },
];

let node: TestNode;

before(async () => {
  node = await startTestNode({ args: ['--parallel', String(PARALLEL)] });
});

after(async () => {
  await node?.stop();
});

/** Sends `body` and reads at most `readChunks` chunks of the answer before abandoning it. */
async function send(path: string, body: unknown, readChunks: number): Promise<number | 'abandoned'> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), 30_000);
  try {
    const res = await fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: controller.signal });
    const reader = res.body!.getReader();
    for (let i = 0; ; i += 1) {
      if (i >= readChunks) {
        controller.abort(); // a client that walks away mid-answer
        return 'abandoned';
      }
      const { done } = await reader.read();
      if (done) break;
    }
    return res.status;
  } finally {
    clearTimeout(timer);
  }
}

describe('fuzzed bodies at a real node', { timeout: 300_000 }, () => {
  test('every fuzzed body is answered below 500 or abandoned, and nothing leaks a slot', async () => {
    const cases = fc.sample(
      fc.record({
        seed: fc.constantFrom(...SEEDS),
        arbitrary: fc.oneof({ arbitrary: fc.constant(true), weight: 1 }, { arbitrary: fc.constant(false), weight: 3 }),
        readChunks: fc.oneof({ arbitrary: fc.constant(Number.POSITIVE_INFINITY), weight: 3 }, { arbitrary: fc.nat({ max: 3 }), weight: 1 }),
      }).chain((c) => (c.arbitrary ? anyJson : mutated(c.seed.body)).map((body) => ({ ...c, body }))),
      fuzzParams(150),
    );
    const failures: string[] = [];
    const statuses = new Map<string, number>();
    // A few at a time, more than --parallel, so some queue.
    for (let i = 0; i < cases.length; i += PARALLEL * 2) {
      await Promise.all(
        cases.slice(i, i + PARALLEL * 2).map(async (c) => {
          const status = await send(c.seed.path, c.body, c.readChunks);
          statuses.set(String(status), (statuses.get(String(status)) ?? 0) + 1);
          if (status !== 'abandoned' && status >= 500) failures.push(`${c.seed.path} answered ${status} to ${JSON.stringify(c.body).slice(0, 300)}`);
        }),
      );
    }
    assert.deepEqual(failures, []);
    console.log(`# measured: ${cases.length} fuzzed bodies, answers ${JSON.stringify(Object.fromEntries(statuses))}`);

    // Every slot comes back, and every family still answers.
    let inFlight = -1;
    for (let tries = 0; tries < 100; tries += 1) {
      const health = (await (await fetch(`${node.url}/healthz`)).json()) as { models: { id: string; inFlight: number; queued: number }[] };
      const model = health.models.find((m) => m.id === MODEL);
      inFlight = (model?.inFlight ?? 0) + (model?.queued ?? 0);
      if (inFlight === 0) break;
      await sleep(100);
    }
    assert.equal(inFlight, 0, 'a request left a runner slot in use');
    for (const seed of SEEDS) {
      const body = JSON.parse(JSON.stringify(seed.body, (key, value: unknown) => (key === 'stream' ? false : value))) as unknown;
      assert.equal(await send(seed.path, body, Number.POSITIVE_INFINITY), 200, `${seed.path} no longer serves`);
    }
    // More at once than --parallel: each needs a slot, so a leaked one would hang them.
    const burst = await Promise.all(Array.from({ length: PARALLEL * 2 }, () => send('/v1/chat/completions', { model: MODEL, messages: user, max_tokens: 2 }, Number.POSITIVE_INFINITY)));
    assert.deepEqual(burst, new Array<number>(PARALLEL * 2).fill(200));
  });
});
