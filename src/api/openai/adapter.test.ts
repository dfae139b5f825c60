import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_CODES, ShoalError } from '../../common/errors.js';
import { assertOpenAIShape } from '../../../test/support/openai-schema.js';
import { parseBody } from '../validation.js';
import { toOpenAIError } from './errors.js';
import { chatRequestToTask, completionRequestToTask, COMPLETIONS_DEFAULT_MAX_TOKENS } from './normalize.js';
import { ChatCompletionRequest, CompletionRequest } from './schemas.js';
import type { CollectedAnswer } from '../collect.js';
import { chatChunkBody, chatCompletionBody, chatUsageChunkBody, completionBody, embeddingBase64, embeddingsBody, modelBody, type ResponseMeta } from './serialize.js';

function answer(fields: Partial<CollectedAnswer>): CollectedAnswer {
  return { text: '', reasoning: '', toolCalls: [], logprobs: null, vectors: [], transcript: null, stopSequence: null, finishReason: 'stop', usage: { promptTokens: 10, completionTokens: 5 }, ...fields };
}

const meta: ResponseMeta = { id: 'chatcmpl-1', model: 'shoal/tiny', created: 1_700_000_000 };
const usage = { promptTokens: 10, completionTokens: 5 };

test('chat requests normalize to one task: roles, content parts, defaults, stop', () => {
  const body = parseBody(ChatCompletionRequest, {
    model: 'shoal/tiny',
    messages: [
      { role: 'developer', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'hel' }, { type: 'text', text: 'lo' }] },
      { role: 'assistant', content: null },
    ],
    stop: 'END',
  });
  assert.deepEqual(chatRequestToTask(body), {
    kind: 'generate',
    model: 'shoal/tiny',
    prompt: {
      kind: 'chat',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: '' },
      ],
    },
    sampling: { maxTokens: null, temperature: 1, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 },
    stop: ['END'],
    tools: [],
    toolChoice: { mode: 'auto' },
    format: { kind: 'text' },
    logprobs: null,
  });
});

test('max_completion_tokens wins over max_tokens; explicit sampling is kept', () => {
  const body = parseBody(ChatCompletionRequest, {
    model: 'm',
    messages: [{ role: 'user', content: 'x' }],
    max_tokens: 9,
    max_completion_tokens: 3,
    temperature: 0,
    top_p: 0.5,
    seed: 42,
    stop: ['a', 'b'],
  });
  const task = chatRequestToTask(body);
  assert.deepEqual(task.sampling, { maxTokens: 3, temperature: 0, topP: 0.5, seed: 42, presencePenalty: 0, frequencyPenalty: 0 });
  assert.deepEqual(task.stop, ['a', 'b']);
});

test('completion requests default max_tokens to OpenAI’s 16 and accept a one-element prompt array', () => {
  const task = completionRequestToTask(parseBody(CompletionRequest, { model: 'm', prompt: ['Once'] }));
  assert.deepEqual(task.prompt, { kind: 'text', text: 'Once' });
  assert.equal(task.sampling.maxTokens, COMPLETIONS_DEFAULT_MAX_TOKENS);
});

test('n other than 1, echo and logit_bias are refused by name', () => {
  const n = () => parseBody(ChatCompletionRequest, { model: 'm', messages: [{ role: 'user', content: 'x' }], n: 2 });
  assert.throws(n, (e: unknown) => e instanceof ShoalError && e.param === 'n');
  const echo = () => parseBody(CompletionRequest, { model: 'm', prompt: 'x', echo: true });
  assert.throws(echo, (e: unknown) => e instanceof ShoalError && e.param === 'echo');
  const bias = () => parseBody(ChatCompletionRequest, { model: 'm', messages: [{ role: 'user', content: 'x' }], logit_bias: {} });
  assert.throws(bias, (e: unknown) => e instanceof ShoalError && e.code === 'UNSUPPORTED_PARAMETER' && e.param === 'logit_bias');
});

test('response bodies validate against OpenAI’s schemas', () => {
  assertOpenAIShape('CreateChatCompletionResponse', chatCompletionBody(meta, answer({ text: 'hi' })));
  const withCall = chatCompletionBody(meta, answer({ toolCalls: [{ id: 'call_1', name: 'f', arguments: '{}' }], finishReason: 'tool_calls', reasoning: 'hmm' }));
  assertOpenAIShape('CreateChatCompletionResponse', withCall);
  assert.equal(withCall.choices[0]!.message.content, null, 'a reply that is only tool calls has null content');
  assert.equal(withCall.choices[0]!.message.reasoning_content, 'hmm');
  const withLogprobs = chatCompletionBody(meta, answer({ text: 'a', logprobs: [{ token: 'a', logprob: -0.5, bytes: [97], top: [{ token: 'a', logprob: -0.5, bytes: [97] }] }] }));
  assertOpenAIShape('CreateChatCompletionResponse', withLogprobs);
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatChunkBody(meta, { tool_calls: [{ index: 0, id: 'c', type: 'function', function: { name: 'f', arguments: '' } }] }, null, false));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatChunkBody(meta, {}, 'tool_calls', false));
  assertOpenAIShape('CreateEmbeddingResponse', embeddingsBody('m', [[0.5, -1]], 'float', 3));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatChunkBody(meta, { role: 'assistant', content: '' }, null, false));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatChunkBody(meta, { content: 'x' }, null, true));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatChunkBody(meta, {}, 'length', true));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatUsageChunkBody(meta, usage));
  assertOpenAIShape('CreateCompletionResponse', completionBody({ ...meta, id: 'cmpl-1' }, 'text', 'stop', usage));
  assertOpenAIShape('Model', modelBody('shoal/tiny', 1));
  assert.deepEqual(chatUsageChunkBody(meta, usage).usage, { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 0 } });
});

test("a reused prompt prefix is OpenAI's cached_tokens, inside prompt_tokens, in every usage the chat and completions bodies carry", () => {
  const cached = { promptTokens: 40, completionTokens: 5, cachedPromptTokens: 31 };
  const expected = { prompt_tokens: 40, completion_tokens: 5, total_tokens: 45, prompt_tokens_details: { cached_tokens: 31 } };
  const whole = chatCompletionBody(meta, answer({ text: 'a', usage: cached }));
  assertOpenAIShape('CreateChatCompletionResponse', whole);
  assert.deepEqual(whole.usage, expected);
  const chunk = chatUsageChunkBody(meta, cached);
  assertOpenAIShape('CreateChatCompletionStreamResponse', chunk);
  assert.deepEqual(chunk.usage, expected);
  const completion = completionBody({ ...meta, id: 'cmpl-1' }, 'text', 'stop', cached);
  assertOpenAIShape('CreateCompletionResponse', completion);
  assert.deepEqual(completion.usage, expected);
});

test('every error code maps to a valid OpenAI error with a 4xx/5xx status', () => {
  for (const code of ERROR_CODES) {
    const mapped = toOpenAIError(new ShoalError(code, `message for ${code}`, { param: 'x' }));
    assertOpenAIShape('ErrorResponse', mapped.body);
    assert.ok(mapped.status >= 400 && mapped.status < 600, code);
    assert.equal(mapped.body.error.message, `message for ${code}`);
    assert.equal(mapped.body.error.param, 'x');
  }
  assert.equal(toOpenAIError(new ShoalError('MODEL_NOT_FOUND', 'x')).status, 404);
  assert.equal(toOpenAIError(new ShoalError('PAYLOAD_TOO_LARGE', 'x')).status, 413);
  assert.equal(toOpenAIError(new ShoalError('MODEL_LOADING', 'x')).status, 503);
  assert.equal(toOpenAIError(new ShoalError('QUEUE_FULL', 'x')).status, 429);
});

test('base64 embeddings are float32 little-endian, as OpenAI sends them', () => {
  const encoded = embeddingBase64([1, -2.5]);
  const bytes = Buffer.from(encoded, 'base64');
  assert.deepEqual([bytes.readFloatLE(0), bytes.readFloatLE(4)], [1, -2.5]);
});

test('tools, tool_choice, response_format and logprobs normalize into the task', () => {
  const body = parseBody(ChatCompletionRequest, {
    model: 'm',
    messages: [
      { role: 'user', content: 'x' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'result' },
    ],
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'integer' } } } } }],
    tool_choice: { type: 'function', function: { name: 'f' } },
    response_format: { type: 'json_schema', json_schema: { name: 'out', schema: { type: 'object' } } },
    logprobs: true,
    top_logprobs: 3,
    presence_penalty: 0.5,
  });
  const task = chatRequestToTask(body);
  assert.deepEqual(task.toolChoice, { mode: 'tool', name: 'f' });
  assert.deepEqual(task.format, { kind: 'json_schema', schema: { type: 'object' } });
  assert.deepEqual(task.logprobs, { top: 3 });
  assert.equal(task.sampling.presencePenalty, 0.5);
  assert.deepEqual(task.prompt.kind === 'chat' && task.prompt.messages.slice(1), [
    { role: 'assistant', content: '', toolCalls: [{ id: 'c1', name: 'f', arguments: '{"a":1}' }] },
    { role: 'tool', toolCallId: 'c1', content: 'result' },
  ]);
});

test('a tool_choice naming an unknown tool, or top_logprobs without logprobs, is a 400 naming the field', () => {
  const unknown = () =>
    chatRequestToTask(parseBody(ChatCompletionRequest, { model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }));
  assert.throws(unknown, (e: unknown) => e instanceof ShoalError && e.param === 'tool_choice');
  const top = () => chatRequestToTask(parseBody(ChatCompletionRequest, { model: 'm', messages: [{ role: 'user', content: 'x' }], top_logprobs: 2 }));
  assert.throws(top, (e: unknown) => e instanceof ShoalError && e.param === 'top_logprobs');
});

test('image_url parts of user messages become the message images, in order, typed by their bytes', () => {
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2]).toString('base64');
  const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 3, 4]).toString('base64');
  const chat = (content: unknown) => chatRequestToTask(parseBody(ChatCompletionRequest, { model: 'm', messages: [{ role: 'system', content: 's' }, { role: 'user', content }] }));
  const task = chat([
    { type: 'text', text: 'what ' },
    { type: 'image_url', image_url: { url: `data:image/png;base64,${png}`, detail: 'high' } },
    { type: 'text', text: 'is this?' },
    // Declared PNG, but the bytes are a JPEG: the bytes decide.
    { type: 'image_url', image_url: { url: `data:image/png;base64,${jpeg}` } },
  ]);
  assert.deepEqual(task.prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: 's' },
      { role: 'user', content: 'what is this?', images: [{ mediaType: 'image/png', data: png }, { mediaType: 'image/jpeg', data: jpeg }] },
    ],
  });
  // Text-only content keeps no images field.
  assert.deepEqual(chat([{ type: 'text', text: 'hi' }]).prompt, { kind: 'chat', messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'hi' }] });

  const refused = (content: unknown, code: string, param: string, message: RegExp, role = 'user') => {
    assert.throws(
      () => chatRequestToTask(parseBody(ChatCompletionRequest, { model: 'm', messages: [{ role, content }] })),
      (error: unknown) => error instanceof ShoalError && error.code === code && error.param === param && message.test(error.message),
      `${code} ${param}`,
    );
  };
  const image = (url: string) => [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url } }];
  refused(image('https://example.com/a.png'), 'BAD_REQUEST', 'messages[0].content[1].image_url.url', /does not fetch remote images; send the image inline as a data URL/);
  refused(image(`data:image/png;base64,${Buffer.from('plain text').toString('base64')}`), 'BAD_REQUEST', 'messages[0].content[1].image_url.url', /not an image/);
  refused(image(`data:image/png;base64,${Buffer.alloc(8 * 1024 * 1024 + 1, 0x89).toString('base64')}`), 'PAYLOAD_TOO_LARGE', 'messages[0].content[1].image_url.url', /limit per image/);
  refused(Array.from({ length: 17 }, () => ({ type: 'image_url', image_url: { url: `data:image/png;base64,${png}` } })), 'BAD_REQUEST', 'messages[0].content[16].image_url.url', /at most 16 images/);
  refused([{ type: 'image_url', image_url: { url: `data:image/png;base64,${png}`, detail: 'max' } }], 'BAD_REQUEST', 'messages[0].content[0].image_url.detail', /invalid/);
  refused([{ type: 'image_url', image_url: { url: `data:image/png;base64,${png}`, size: 1 } }], 'UNSUPPORTED_PARAMETER', 'messages[0].content[0].image_url.size', /unsupported parameter/);
  refused([{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }], 'BAD_REQUEST', 'messages[0].content[0].type', /text or image_url/);
  // Only user messages carry images.
  refused(image(`data:image/png;base64,${png}`), 'BAD_REQUEST', 'messages[0].content', /text parts/, 'system');
  refused(image(`data:image/png;base64,${png}`), 'BAD_REQUEST', 'messages[0].content', /text parts/, 'assistant');
});
