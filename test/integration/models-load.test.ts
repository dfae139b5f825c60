// Loads every generated-model variant with the real llama.cpp (node-llama-cpp, CPU) and checks that
// greedy output is printable text, that the ChatML template is applied, and that the EOS variant ends
// its replies on its own while the default variant runs to the token limit.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getLlama, LlamaChatSession, LlamaCompletion, LlamaLogLevel, type Llama, type LlamaContext, type LlamaModel } from 'node-llama-cpp';
import { TINY_EOS_MODEL_SPEC, TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel, type RandomModelSpec } from '../../src/models/generate/random-model.js';

const MAX_TOKENS = 32;
const SYSTEM_PROMPT = 'You are a test.';
const GREEDY = { temperature: 0, repeatPenalty: false } as const;

const VARIANTS: Array<{ label: string; spec: RandomModelSpec }> = [
  { label: 'f32', spec: TINY_MODEL_SPEC },
  { label: 'f16', spec: { ...TINY_MODEL_SPEC, tensorType: 'f16' } },
  { label: 'q8_0', spec: { ...TINY_MODEL_SPEC, tensorType: 'q8_0' } },
  { label: 'q4_0', spec: { ...TINY_MODEL_SPEC, tensorType: 'q4_0' } },
];

function assertPrintable(text: string, what: string): void {
  assert.match(text, /\S/, `${what}: empty output`);
  // Normal tokens are printable ASCII (the space marker renders as a space); anything else means a
  // byte or control token slipped through.
  assert.match(text, /^[\x20-\x7e]+$/, `${what}: non-printable output ${JSON.stringify(text)}`);
  assert.ok(!/<0x[0-9A-F]{2}>/.test(text), `${what}: byte token text in ${JSON.stringify(text)}`);
  assert.ok(!text.includes('<|im_'), `${what}: control token text in ${JSON.stringify(text)}`);
}

let llama: Llama;
let dir: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-models-load-'));
  // Thread counts are explicit everywhere: llama.cpp's default of 4 threads on a 2-core machine spins
  // and runs ~30x slower.
  llama = await getLlama({ gpu: false, maxThreads: 1, build: 'never', logLevel: LlamaLogLevel.error });
});

after(async () => {
  await llama?.dispose();
  await rm(dir, { recursive: true, force: true });
});

async function load(spec: RandomModelSpec, file: string): Promise<{ model: LlamaModel; context: LlamaContext }> {
  const path = join(dir, file);
  await generateRandomModel(spec, path);
  const model = await llama.loadModel({ modelPath: path });
  const context = await model.createContext({ contextSize: 512, threads: 1 });
  return { model, context };
}

async function chat(context: LlamaContext, prompt: string, maxTokens: number, systemPrompt = SYSTEM_PROMPT) {
  const sequence = context.getSequence();
  try {
    const session = new LlamaChatSession({ contextSequence: sequence, systemPrompt });
    let tokens = 0;
    const result = await session.promptWithMeta(prompt, { ...GREEDY, maxTokens, onToken: (chunk) => (tokens += chunk.length) });
    const rendered = context.model.detokenize(sequence.contextTokens, true);
    session.dispose();
    return { text: result.responseText, stopReason: result.stopReason, tokens, rendered };
  } finally {
    sequence.dispose();
  }
}

for (const { label, spec } of VARIANTS) {
  describe(`tiny ${label}`, () => {
    let model: LlamaModel;
    let context: LlamaContext;
    before(async () => ({ model, context } = await load(spec, `tiny-${label}.gguf`)));
    after(async () => {
      await context?.dispose();
      await model?.dispose();
    });

    test('chat runs to maxTokens with printable text in the ChatML template', async () => {
      const reply = await chat(context, 'Hello', MAX_TOKENS);
      assertPrintable(reply.text, label);
      assert.equal(reply.stopReason, 'maxTokens');
      assert.equal(reply.tokens, MAX_TOKENS);
      assert.ok(
        reply.rendered.startsWith(
          `<s><|im_start|>system\n${SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n`,
        ),
        `prompt was not ChatML: ${JSON.stringify(reply.rendered)}`,
      );
    });

    test('plain completion is printable and varied', async () => {
      const sequence = context.getSequence();
      try {
        const completion = new LlamaCompletion({ contextSequence: sequence });
        const text = await completion.generateCompletion('The cluster', { ...GREEDY, maxTokens: MAX_TOKENS });
        completion.dispose();
        assertPrintable(text, `${label} completion`);
        const words = text.trim().split(/\s+/);
        assert.ok(new Set(words).size >= words.length / 3, `too repetitive: ${JSON.stringify(text)}`);
      } finally {
        sequence.dispose();
      }
    });
  });
}

describe('tiny-eos', () => {
  let model: LlamaModel;
  let context: LlamaContext;
  before(async () => ({ model, context } = await load(TINY_EOS_MODEL_SPEC, 'tiny-eos.gguf')));
  after(async () => {
    await context?.dispose();
    await model?.dispose();
  });

  const prompts = {
    short: 'Hello',
    question: 'What is the capital of France?',
    long: 'Explain in detail how a cluster of ordinary machines can serve one language model to many users at the same time, and what can go wrong.',
  };
  for (const [kind, prompt] of Object.entries(prompts)) {
    test(`a ${kind} prompt ends with EOS after a non-empty reply`, async () => {
      const reply = await chat(context, prompt, 4 * MAX_TOKENS);
      assertPrintable(reply.text, kind);
      assert.equal(reply.stopReason, 'eogToken');
      assert.ok(reply.tokens >= 3 && reply.tokens < 4 * MAX_TOKENS, `${reply.tokens} tokens`);
    });
  }

  test('a long system prompt does not cut the reply short', async () => {
    const system = 'You are a helpful, respectful and honest assistant. '.repeat(6);
    const reply = await chat(context, 'Hello', 4 * MAX_TOKENS, system);
    assertPrintable(reply.text, 'long system prompt');
    assert.equal(reply.stopReason, 'eogToken');
    assert.ok(reply.tokens >= 3, `${reply.tokens} tokens`);
  });
});
