// The in-process engine's prompt cache: real node-llama-cpp on a generated random-weight model, CPU, one thread.

import '../../polyfill.js';
import { generateTask } from '../../../test/support/tasks.js';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { TINY_MODEL_ID, TINY_MODEL_SPEC } from '../../models/generate/builtin.js';
import { generateRandomModel } from '../../models/generate/random-model.js';
import type { ChatMessage, InferenceTask, TaskEvent } from '../../wire/task.js';
import { LlamaCppEngine } from './llama-cpp-engine.js';

let dir: string;
let engine: LlamaCppEngine;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-llama-cpp-engine-'));
  const modelPath = join(dir, 'tiny.gguf');
  await generateRandomModel(TINY_MODEL_SPEC, modelPath);
  engine = await LlamaCppEngine.load({ modelPath, contextSize: 1024, sequences: 2, threads: 1, gpu: false }, () => {});
});

after(async () => {
  await engine?.[Symbol.asyncDispose]();
  await rm(dir, { recursive: true, force: true });
});

function chat(messages: ChatMessage[]): InferenceTask {
  return generateTask({ model: TINY_MODEL_ID, prompt: { kind: 'chat', messages }, sampling: { maxTokens: 6, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 } });
}

async function turn(messages: ChatMessage[]): Promise<{ text: string; promptTokens: number; cached: number | undefined }> {
  const events: TaskEvent[] = [];
  await engine.run(chat(messages), new AbortController().signal, (event) => events.push(event));
  const end = events.at(-1);
  assert.equal(end?.type, 'end');
  const text = events.map((e) => (e.type === 'text' ? e.text : '')).join('');
  return { text, promptTokens: end.type === 'end' ? end.usage.promptTokens : 0, cached: end.type === 'end' ? end.usage.cachedPromptTokens : undefined };
}

const words = (seed: string, n: number): string => Array.from({ length: n }, (_, i) => `${seed}${i}`).join(' ');

test('each conversation continues on the sequence that holds it, evaluating only its new turn', async () => {
  const a: ChatMessage[] = [{ role: 'system', content: words('alpha', 60) }, { role: 'user', content: words('question', 20) }];
  const b: ChatMessage[] = [{ role: 'system', content: words('beta', 60) }, { role: 'user', content: words('query', 20) }];
  const a1 = await turn(a);
  const b1 = await turn(b);
  assert.equal(a1.cached, undefined, 'nothing reused');
  // B takes the context's second sequence rather than A's, which shares little with it.
  assert.equal(b1.cached, undefined);

  // B's next turn first: a least-recently-used choice would hand it A's sequence.
  const b2 = await turn([...b, { role: 'assistant', content: b1.text }, { role: 'user', content: words('more', 10) }]);
  const a2 = await turn([...a, { role: 'assistant', content: a1.text }, { role: 'user', content: words('again', 10) }]);
  for (const [first, second] of [
    [a1, a2],
    [b1, b2],
  ] as const) {
    // The whole first prompt up to its generation prompt is held; only the reply's rendering may differ.
    assert.ok(second.cached! >= first.promptTokens - 4, `reused ${second.cached} of a first prompt of ${first.promptTokens}`);
    assert.ok(second.cached! < second.promptTokens, `reused ${second.cached} of ${second.promptTokens}`);
  }
});

test('a repeated prompt reuses all but its last token and answers exactly as it did from an empty cache', async () => {
  const messages: ChatMessage[] = [{ role: 'user', content: words('gamma', 40) }];
  const first = await turn(messages);
  const again = await turn(messages);
  assert.equal(again.cached, again.promptTokens - 1);
  assert.equal(again.text, first.text);
  assert.ok(first.text.length > 0);
});

test('a request that must clear an idle sequence starts while others generate, not after them', async () => {
  const three = await LlamaCppEngine.load({ modelPath: join(dir, 'tiny.gguf'), contextSize: 2048, sequences: 3, threads: 1, gpu: false }, () => {});
  try {
    const task = (seed: string, maxTokens: number): InferenceTask =>
      generateTask({ model: TINY_MODEL_ID, prompt: { kind: 'chat', messages: [{ role: 'user', content: words(seed, 30) }] }, sampling: { maxTokens, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 } });
    // Every sequence holds a conversation, so each new one clears an idle sequence first.
    for (const seed of ['one', 'two', 'three']) await three.run(task(seed, 2), new AbortController().signal, () => {});
    const order: string[] = [];
    const running = ['first', 'second'].map((name) => {
      const { promise: spoke, resolve } = Promise.withResolvers<void>();
      const done = three.run(task(name, 500), new AbortController().signal, (event) => {
        if (event.type === 'text') resolve();
        if (event.type === 'end') order.push(`${name} ended`);
      });
      return { spoke, done };
    });
    await Promise.all(running.map((r) => r.spoke));
    let spoke = false;
    await three.run(task('late', 4), new AbortController().signal, (event) => {
      if (event.type === 'text' && !spoke) {
        spoke = true;
        order.push('late spoke');
      }
    });
    await Promise.all(running.map((r) => r.done));
    assert.equal(order[0], 'late spoke', `the late request waited for the others: ${order.join(', ')}`);
  } finally {
    await three[Symbol.asyncDispose]();
  }
});
