import assert from 'node:assert/strict';
import { test } from 'node:test';
import { FromRunner, ToRunner } from './protocol.js';

const task = {
  kind: 'generate',
  model: 'shoal/tiny',
  prompt: { kind: 'chat', messages: [{ role: 'user', content: 'hi' }] },
  sampling: { maxTokens: 8, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 },
  stop: [],
  tools: [],
  toolChoice: { mode: 'auto' },
  format: { kind: 'text' },
  logprobs: null,
};
const facts = { architecture: 'llama', sizeBytes: 1000, fileType: 'F32', parameterCount: 200000, hasChatTemplate: true };

test('every node-to-runner message round-trips through JSON and the schema', () => {
  const messages = [
    { type: 'load', config: { modelPath: '/m.gguf', contextSize: 512, sequences: 4, threads: 2, gpu: false } },
    { type: 'load', config: { modelPath: '/m.gguf', contextSize: 512, sequences: 4, threads: 2, gpu: 'auto' } },
    { type: 'run', id: 'r1', task },
    { type: 'run', id: 'r2', task: { ...task, prompt: { kind: 'text', text: 'Once' } } },
    { type: 'run', id: 'r3', task: { kind: 'embed', model: 'm', inputs: ['a', 'b'], truncate: true, normalize: true } },
    { type: 'run', id: 'r4', task: { kind: 'count', model: 'm', prompt: { kind: 'text', text: 'x' }, tools: [] } },
    { type: 'cancel', id: 'r1' },
    { type: 'shutdown' },
  ];
  for (const message of messages) {
    assert.deepEqual(ToRunner.parse(JSON.parse(JSON.stringify(message))), message);
  }
});

test('every runner-to-node message round-trips through JSON and the schema', () => {
  const messages = [
    { type: 'ready', contextSize: 4096, sequences: 8, trainContextSize: 4096, gpu: false, model: facts },
    { type: 'ready', contextSize: 4096, sequences: 8, trainContextSize: 4096, gpu: 'cuda', model: facts },
    { type: 'fatal', message: 'no such file' },
    { type: 'event', id: 'r1', event: { type: 'start', promptTokens: 12 } },
    { type: 'event', id: 'r1', event: { type: 'text', text: 'hel' } },
    { type: 'event', id: 'r1', event: { type: 'tool_call', index: 0, id: 'call_1', name: 'f' } },
    { type: 'event', id: 'r1', event: { type: 'embeddings', vectors: [[0.5, 1]] } },
    { type: 'event', id: 'r1', event: { type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens: 12, completionTokens: 8 } } },
    { type: 'event', id: 'r1', event: { type: 'end', finishReason: 'stop', stopSequence: 'END', usage: { promptTokens: 12, completionTokens: 3 } } },
    { type: 'failed', id: 'r1', code: 'CANCELLED', message: 'the request was cancelled' },
    { type: 'log', level: 'warn', message: 'hello' },
  ];
  for (const message of messages) {
    assert.deepEqual(FromRunner.parse(JSON.parse(JSON.stringify(message))), message);
  }
});

test('unknown fields, unknown types and out-of-range values are refused', () => {
  assert.equal(ToRunner.safeParse({ type: 'shutdown', now: true }).success, false, 'strict objects');
  assert.equal(ToRunner.safeParse({ type: 'explode' }).success, false);
  assert.equal(ToRunner.safeParse({ type: 'cancel', id: '' }).success, false, 'empty id');
  assert.equal(ToRunner.safeParse({ type: 'cancel', id: 'x'.repeat(65) }).success, false, 'id too long');
  assert.equal(
    ToRunner.safeParse({ type: 'load', config: { modelPath: '/m', contextSize: 0, sequences: 1, threads: 1, gpu: false } }).success,
    false,
    'zero context',
  );
  assert.equal(
    ToRunner.safeParse({ type: 'load', config: { modelPath: '/m', contextSize: 8, sequences: 1, threads: 1, gpu: 'rocm' } }).success,
    false,
    'unknown gpu',
  );
  assert.equal(ToRunner.safeParse({ type: 'run', id: 'r', task: { ...task, sampling: { ...task.sampling, temperature: 3 } } }).success, false);
  // llama.cpp's samplers travel in the task, within their ranges.
  const samplers = { topK: 1, minP: 0.5, repeatPenalty: 1.2, repeatLastN: -1 };
  const run = ToRunner.parse({ type: 'run', id: 'r', task: { ...task, sampling: { ...task.sampling, ...samplers } } });
  assert.ok(run.type === 'run' && run.task.kind === 'generate');
  assert.deepEqual(run.task.sampling, { ...task.sampling, ...samplers });
  for (const bad of [{ topK: -1 }, { topK: 1.5 }, { minP: 1.1 }, { repeatPenalty: 0 }, { repeatLastN: -2 }]) {
    assert.equal(ToRunner.safeParse({ type: 'run', id: 'r', task: { ...task, sampling: { ...task.sampling, ...bad } } }).success, false, JSON.stringify(bad));
  }
  assert.equal(FromRunner.safeParse({ type: 'failed', id: 'r', code: 'NOPE', message: '' }).success, false, 'unknown error code');
  assert.equal(FromRunner.safeParse({ type: 'event', id: 'r', event: { type: 'end', finishReason: 'done', stopSequence: null, usage: { promptTokens: 1, completionTokens: 1 } } }).success, false);
});
