// Loads every generated-model variant with the real llama.cpp (node-llama-cpp, CPU) and checks that
// greedy output is printable text, that the ChatML template is applied, and that the EOS variant ends
// its replies on its own while the default variant runs to the token limit. The behaviour models get
// prompts rendered as ChatML text, the way Shoal's runner renders them: tiny-think must reason, close
// its think block once and answer; tiny-tools must open a tool call when tools are offered and no
// tool result came back, and answer in text otherwise.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  getLlama,
  LlamaChatSession,
  LlamaCompletion,
  LlamaGrammarEvaluationState,
  LlamaLogLevel,
  resolveChatWrapper,
  type ChatHistoryItem,
  type GbnfJsonSchema,
  type Llama,
  type LlamaContext,
  type LlamaModel,
  type Token,
} from 'node-llama-cpp';
import { TINY_EOS_MODEL_SPEC, TINY_MODEL_SPEC, TINY_THINK_MODEL_SPEC, TINY_TOOLS_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel, type RandomModelSpec } from '../../src/models/generate/random-model.js';
import { toolInstructions } from '../../src/worker/runner/prompt.js';

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

async function load(spec: RandomModelSpec, file: string, contextSize = 512): Promise<{ model: LlamaModel; context: LlamaContext }> {
  const path = join(dir, file);
  await generateRandomModel(spec, path);
  const model = await llama.loadModel({ modelPath: path });
  const context = await model.createContext({ contextSize, threads: 1 });
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

type Turn = readonly [role: 'system' | 'user' | 'assistant', content: string];

/** A prompt as ChatML text, as the ChatML templates (and Shoal's runner) render it. */
function chatml(turns: readonly Turn[], generationPrompt = '<|im_start|>assistant\n'): string {
  return turns.map(([role, content]) => `<|im_start|>${role}\n${content}<|im_end|>\n`).join('') + generationPrompt;
}

/** Greedy completion of `text`, tokenized with special tokens on, as node-llama-cpp tokenizes chat templates. */
async function complete(context: LlamaContext, text: string, maxTokens: number) {
  const sequence = context.getSequence();
  try {
    const completion = new LlamaCompletion({ contextSequence: sequence });
    const prompt = context.model.tokenize(text, true);
    const tokens: Token[] = [];
    const result = await completion.generateCompletionWithMeta(prompt, {
      ...GREEDY,
      maxTokens,
      onToken: (chunk) => tokens.push(...chunk),
    });
    completion.dispose();
    // Special tokens off, as Shoal detokenizes: tags survive as text, control tokens vanish.
    const detokenized = context.model.detokenize(tokens, false);
    assert.equal(result.response, detokenized);
    return { text: result.response, stopReason: result.metadata.stopReason, tokens, prompt };
  } finally {
    sequence.dispose();
  }
}

/** The id of a tag, which must be a single token. */
function tagToken(model: LlamaModel, tag: string): Token {
  const tokens = model.tokenize(tag, true);
  assert.equal(tokens.length, 1, `${tag} is not one token: ${JSON.stringify(tokens)}`);
  assert.equal(model.detokenize(tokens, false), tag, `${tag} does not detokenize as text`);
  return tokens[0] as Token;
}

function count<T>(items: readonly T[], item: T): number {
  return items.filter((x) => x === item).length;
}

const LONG_QUESTION =
  'Explain in detail how a cluster of ordinary machines can serve one language model to many users at the same time, and what can go wrong.';
const LONG_SYSTEM = 'You are a helpful, respectful and honest assistant. '.repeat(6);

describe('tiny-think', () => {
  const THINK_PROMPT = '<|im_start|>assistant\n<think>\n';
  const MAX_REPLY = 60;
  let model: LlamaModel;
  let context: LlamaContext;
  let open: Token;
  let close: Token;
  before(async () => {
    ({ model, context } = await load(TINY_THINK_MODEL_SPEC, 'tiny-think.gguf', 1024));
    open = tagToken(model, '<think>');
    close = tagToken(model, '</think>');
  });
  after(async () => {
    await context?.dispose();
    await model?.dispose();
  });

  test('the think tags are user-defined tokens: found whole in prompt text, kept as text when detokenized', () => {
    const prompt = model.tokenize(chatml([['user', 'Hello']], THINK_PROMPT), true);
    assert.equal(prompt.at(-2), open);
    assert.equal(model.detokenize(prompt, false), 'user\nHello\nassistant\n<think>\n');
    assert.deepEqual(model.tokenize('a</think>b', false).length, 3, 'found even without special tokens');
    assert.ok(!model.isEogToken(close));
  });

  test('node-llama-cpp reads the template as opening a think block at the start of a reply', () => {
    const wrapper = resolveChatWrapper(model);
    assert.equal(wrapper.settings.segments?.thought?.openOnResponseStart, true);
    const history: ChatHistoryItem[] = [
      { type: 'system', text: SYSTEM_PROMPT },
      { type: 'user', text: 'Hello' },
      { type: 'model', response: [{ type: 'segment', segmentType: 'thought', text: '', ended: false }] },
    ];
    const rendered = model.detokenize(wrapper.generateContextState({ chatHistory: history }).contextText.tokenize(model.tokenizer), true);
    assert.ok(rendered.endsWith(`<|im_start|>user\nHello<|im_end|>\n${THINK_PROMPT}`), JSON.stringify(rendered));
  });

  const prompts: Record<string, Turn[]> = {
    short: [['system', SYSTEM_PROMPT], ['user', 'Hello']],
    'no-system': [['user', 'Hello']],
    question: [['system', SYSTEM_PROMPT], ['user', 'What is the capital of France?']],
    long: [['system', SYSTEM_PROMPT], ['user', LONG_QUESTION]],
    'long-system': [['system', LONG_SYSTEM], ['user', 'Hello']],
    'multi-turn': [['system', SYSTEM_PROMPT], ['user', 'Hello'], ['assistant', 'Hi, how can I help?'], ['user', LONG_QUESTION]],
  };
  for (const [kind, turns] of Object.entries(prompts)) {
    test(`a ${kind} prompt: reasoning, </think> once, an answer, then EOS`, async () => {
      const reply = await complete(context, chatml(turns, THINK_PROMPT), MAX_REPLY);
      assert.equal(reply.stopReason, 'eogToken', `no EOS within ${MAX_REPLY} tokens: ${JSON.stringify(reply.text)}`);
      assert.equal(count(reply.tokens, close), 1, JSON.stringify(reply.text));
      assert.equal(count(reply.tokens, open), 0, JSON.stringify(reply.text));
      const at = reply.tokens.indexOf(close);
      assert.ok(at >= 3 && reply.tokens.length - at - 1 >= 3, `reasoning ${at} tokens, answer ${reply.tokens.length - at - 1}`);
      const [reasoning, answer, ...rest] = reply.text.split('</think>');
      assert.equal(rest.length, 0);
      assertPrintable(reasoning as string, `${kind} reasoning`);
      assertPrintable(answer as string, `${kind} answer`);
      assert.ok(!reply.text.includes('<think>'));
    });
  }

  test('behind a plain ChatML prompt the reply opens the think block itself', async () => {
    const reply = await complete(context, chatml(prompts.short as Turn[]), MAX_REPLY + 2);
    assert.equal(reply.stopReason, 'eogToken');
    assert.equal(reply.tokens[0], open);
    assert.deepEqual([count(reply.tokens, open), count(reply.tokens, close)], [1, 1]);
    assert.match(reply.text, /^<think>[\x20-\x7e]+<\/think>[\x20-\x7e]+$/);
  });
});

describe('tiny-tools', () => {
  const MAX_REPLY = 60;
  const weather = {
    name: 'get_weather',
    description: 'Get the current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  };
  const search = {
    name: 'search',
    description: 'Search the web',
    parameters: { type: 'object', properties: { query: { type: 'string' }, limit: { type: 'integer' } } },
  };
  const tools = toolInstructions([weather], { mode: 'auto' });
  const call = `<tool_call>\n${JSON.stringify({ name: 'get_weather', arguments: { city: 'Paris' } })}\n</tool_call>`;
  const result = (content: string): string => `<tool_response>\n${content}\n</tool_response>`;
  const question: Turn = ['user', 'What is the weather in Paris?'];
  let model: LlamaModel;
  let context: LlamaContext;
  let toolCall: Token;
  before(async () => {
    ({ model, context } = await load(TINY_TOOLS_MODEL_SPEC, 'tiny-tools.gguf', 1024));
    toolCall = tagToken(model, '<tool_call>');
  });
  after(async () => {
    await context?.dispose();
    await model?.dispose();
  });

  test("the runner's tool tags are user-defined tokens in the rendered prompt", () => {
    const text = chatml([['system', tools], question, ['assistant', call], ['user', result('{"sky": "clear"}')]]);
    const prompt = model.tokenize(text, true);
    for (const tag of ['<tools>', '</tools>', '<tool_call>', '</tool_call>', '<tool_response>', '</tool_response>']) {
      assert.ok(prompt.includes(tagToken(model, tag)), `${tag} is not a token of the prompt`);
      assert.ok(model.detokenize(prompt, false).includes(tag));
    }
    assert.ok(!model.isEogToken(toolCall));
  });

  const callPrompts: Record<string, Turn[]> = {
    'tools only': [['system', tools], question],
    'system text and tools': [['system', `${SYSTEM_PROMPT}\n\n${tools}`], question],
    'two tools, call required': [['system', toolInstructions([weather, search], { mode: 'required' })], ['user', 'Hello']],
    'a long question': [['system', tools], ['user', LONG_QUESTION]],
    'a new question after an earlier result': [
      ['system', tools],
      question,
      ['assistant', call],
      ['user', result('{"temperature": 21, "sky": "clear"}')],
      ['assistant', 'It is clear and 21 degrees.'],
      ['user', 'And in Rome?'],
    ],
  };
  for (const [kind, turns] of Object.entries(callPrompts)) {
    test(`tools offered, no result yet (${kind}): the reply opens with <tool_call>`, async () => {
      const reply = await complete(context, chatml(turns), 4);
      assert.equal(reply.tokens[0], toolCall, JSON.stringify(reply.text));
      assert.ok(reply.text.startsWith('<tool_call>'));
    });
  }

  test('with the call grammar on after <tool_call>, the JSON closes and the grammar ends the reply with EOS', async () => {
    // As Shoal's runner does: its own token loop, the grammar switched on once <tool_call> is out.
    // A grammar that is done allows only EOG tokens, so EOS must never be -inf.
    const schema: GbnfJsonSchema = {
      type: 'object',
      properties: {
        name: { const: 'get_weather' },
        arguments: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
      required: ['name', 'arguments'],
      additionalProperties: false,
    };
    const grammarEvaluationState = new LlamaGrammarEvaluationState({ model, grammar: await llama.createGrammarForJsonSchema(schema) });
    const prompt = [model.tokens.bos as Token, ...model.tokenize(`${chatml(callPrompts['tools only'] as Turn[])}<tool_call>`, true)];
    const sequence = context.getSequence();
    const tokens: Token[] = [];
    try {
      for await (const token of sequence.evaluate(prompt, { temperature: 0, grammarEvaluationState, yieldEogToken: true })) {
        tokens.push(token);
        if (model.isEogToken(token) || tokens.length >= MAX_REPLY) break;
      }
    } finally {
      sequence.dispose();
    }
    const text = model.detokenize(tokens, false);
    assert.ok(model.isEogToken(tokens.at(-1) as Token), `no EOS within ${MAX_REPLY} tokens: ${JSON.stringify(text)}`);
    const parsed = JSON.parse(text) as { name: string; arguments: { city: unknown } };
    assert.equal(parsed.name, 'get_weather');
    assert.equal(typeof parsed.arguments.city, 'string');
  });

  const answerPrompts: Record<string, Turn[]> = {
    'a tool result': [['system', tools], question, ['assistant', call], ['user', result('{"temperature": 21, "sky": "clear"}')]],
    'two results': [
      ['system', `${SYSTEM_PROMPT}\n\n${tools}`],
      question,
      ['assistant', `${call}\n${call}`],
      ['user', `${result('{"temperature": 21}')}\n${result('{"sky": "clear"}')}`],
    ],
    'a long result': [['system', tools], question, ['assistant', call], ['user', result(`${LONG_QUESTION} `.repeat(5))]],
    'no tools': [['system', SYSTEM_PROMPT], question],
    'no tools, no system': [['user', 'Hello']],
  };
  for (const [kind, turns] of Object.entries(answerPrompts)) {
    test(`${kind}: the reply is text that ends with EOS, never a <tool_call>`, async () => {
      const reply = await complete(context, chatml(turns), MAX_REPLY);
      assertPrintable(reply.text, kind);
      assert.equal(reply.stopReason, 'eogToken');
      assert.equal(count(reply.tokens, toolCall), 0);
      assert.ok(reply.tokens.length >= 3, `${reply.tokens.length} tokens`);
    });
  }
});
