// A conversation's second, longer turn finds its first turn in the engine's KV cache, and every API
// family says so in its own usage field, read through the official clients: OpenAI chat and
// completions `prompt_tokens_details.cached_tokens`, Responses `input_tokens_details.cached_tokens`
// (both inside the prompt count), Anthropic `cache_read_input_tokens` (outside `input_tokens`).
// Once per engine: the in-process one counts its reused prefix, llama-server reports its own count
// (skipped without a built llama-server: this file never starts a build).

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { findEngine } from '../../src/doctor/engines.js';
import { assertOpenAIShape } from '../support/openai-schema.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

const MODEL = 'shoal/tiny';
const FIRST = 'Tell me about the sea, the ships on it and the people who sail them.';
const NEXT = 'And what about the harbours where those ships come home at night?';

const serverBinary = await findEngine('llama-server');
const ENGINES = [
  { engine: 'llama_cpp', skip: false },
  { engine: 'llama_server', skip: serverBinary === null ? 'no llama-server in the engine cache (shoal doctor --fix builds it)' : false },
] as const;

/** Reused tokens must be a real share of the first turn, and never the whole new prompt. */
function assertReused(cached: number, prompt: number, firstPrompt: number, family: string): void {
  assert.ok(cached >= firstPrompt / 2, `${family}: ${cached} of the first turn's ${firstPrompt} prompt tokens came from the cache`);
  assert.ok(cached < prompt, `${family}: ${cached} cached of a ${prompt}-token prompt that has new text at its end`);
}

for (const { engine, skip } of ENGINES) describe(`a second turn reports the prompt tokens it found in the cache (${engine})`, { skip }, () => {
  let node: TestNode;
  let openai: OpenAI;
  let anthropic: Anthropic;

  before(async () => {
    node = await startTestNode({ args: ['--engine', engine] });
    openai = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: node.url, apiKey: 'unused', maxRetries: 0 });
  });
  after(async () => node?.stop());

  test('OpenAI chat completions, whole and streamed', async () => {
    const first = await openai.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 12, messages: [{ role: 'user', content: FIRST }] });
    const history: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: 'user', content: FIRST },
      { role: 'assistant', content: first.choices[0]!.message.content ?? '' },
      { role: 'user', content: NEXT },
    ];
    const second = await openai.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 12, messages: history });
    assertOpenAIShape('CreateChatCompletionResponse', second);
    assertReused(second.usage!.prompt_tokens_details!.cached_tokens!, second.usage!.prompt_tokens, first.usage!.prompt_tokens, 'chat');

    const third = [...history, { role: 'assistant' as const, content: second.choices[0]!.message.content ?? '' }, { role: 'user' as const, content: 'Thanks.' }];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of await openai.chat.completions.create({ model: MODEL, temperature: 0, max_tokens: 4, messages: third, stream: true, stream_options: { include_usage: true } })) {
      assertOpenAIShape('CreateChatCompletionStreamResponse', chunk);
      if (chunk.usage) usage = chunk.usage;
    }
    assertReused(usage!.prompt_tokens_details!.cached_tokens!, usage!.prompt_tokens, second.usage!.prompt_tokens, 'streamed chat');
  });

  test('OpenAI completions', async () => {
    const first = await openai.completions.create({ model: MODEL, temperature: 0, max_tokens: 8, prompt: FIRST });
    const second = await openai.completions.create({ model: MODEL, temperature: 0, max_tokens: 8, prompt: `${FIRST}${first.choices[0]!.text} ${NEXT}` });
    assertOpenAIShape('CreateCompletionResponse', second);
    assertReused(second.usage!.prompt_tokens_details!.cached_tokens!, second.usage!.prompt_tokens, first.usage!.prompt_tokens, 'completions');
  });

  test('OpenAI Responses, continued by previous_response_id', async () => {
    const first = await openai.responses.create({ model: MODEL, temperature: 0, max_output_tokens: 12, input: FIRST });
    const second = await openai.responses.create({ model: MODEL, temperature: 0, max_output_tokens: 12, input: NEXT, previous_response_id: first.id });
    assertOpenAIShape('Response', second);
    assertReused(second.usage!.input_tokens_details.cached_tokens, second.usage!.input_tokens, first.usage!.input_tokens, 'responses');
    assert.equal(first.usage!.input_tokens_details.cache_write_tokens, 0);
  });

  test('Anthropic Messages, whole and streamed: input_tokens and the cache read add up to the counted prompt', async () => {
    const first = await anthropic.messages.create({ model: MODEL, max_tokens: 12, messages: [{ role: 'user', content: FIRST }] });
    const messages: Anthropic.MessageParam[] = [
      { role: 'user', content: FIRST },
      { role: 'assistant', content: first.content },
      { role: 'user', content: NEXT },
    ];
    const counted = await anthropic.messages.countTokens({ model: MODEL, messages });
    const second = await anthropic.messages.create({ model: MODEL, max_tokens: 12, messages });
    assert.equal(second.usage.cache_creation_input_tokens, 0);
    assert.equal(second.usage.input_tokens + second.usage.cache_read_input_tokens!, counted.input_tokens);
    assert.ok(second.usage.input_tokens > 0, 'the new turn is evaluated afresh');
    assertReused(second.usage.cache_read_input_tokens!, counted.input_tokens, first.usage.input_tokens + first.usage.cache_read_input_tokens!, 'anthropic');

    const third: Anthropic.MessageParam[] = [...messages, { role: 'assistant', content: second.content }, { role: 'user', content: 'Thanks.' }];
    const thirdCounted = await anthropic.messages.countTokens({ model: MODEL, messages: third });
    const stream = anthropic.messages.stream({ model: MODEL, max_tokens: 4, messages: third });
    let started: Anthropic.Usage | undefined;
    // A copy: the SDK's accumulator later updates this very object from message_delta.
    for await (const event of stream) if (event.type === 'message_start') started = { ...event.message.usage };
    const final = await stream.finalMessage();
    // The start counts the whole prompt as input; the final message_delta moves the reused part.
    assert.equal(started!.input_tokens, thirdCounted.input_tokens);
    assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens!, thirdCounted.input_tokens);
    assertReused(final.usage.cache_read_input_tokens!, thirdCounted.input_tokens, counted.input_tokens, 'streamed anthropic');
  });
});
