import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ERROR_CODES, ShoalError } from '../../common/errors.js';
import { assertOpenAIShape } from '../../../test/support/openai-schema.js';
import { parseBody } from '../validation.js';
import { toOpenAIError } from './errors.js';
import { chatRequestToTask, completionRequestToTask, COMPLETIONS_DEFAULT_MAX_TOKENS } from './normalize.js';
import { ChatCompletionRequest, CompletionRequest } from './schemas.js';
import { chatChunkBody, chatCompletionBody, chatUsageChunkBody, completionBody, modelBody, type ResponseMeta } from './serialize.js';

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
    model: 'shoal/tiny',
    prompt: {
      kind: 'chat',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hello' },
        { role: 'assistant', content: '' },
      ],
    },
    sampling: { maxTokens: null, temperature: 1, topP: 1, seed: null },
    stop: ['END'],
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
  assert.deepEqual(task.sampling, { maxTokens: 3, temperature: 0, topP: 0.5, seed: 42 });
  assert.deepEqual(task.stop, ['a', 'b']);
});

test('completion requests default max_tokens to OpenAI’s 16 and accept a one-element prompt array', () => {
  const task = completionRequestToTask(parseBody(CompletionRequest, { model: 'm', prompt: ['Once'] }));
  assert.deepEqual(task.prompt, { kind: 'text', text: 'Once' });
  assert.equal(task.sampling.maxTokens, COMPLETIONS_DEFAULT_MAX_TOKENS);
});

test('n other than 1, echo and tools are refused by name', () => {
  const n = () => parseBody(ChatCompletionRequest, { model: 'm', messages: [{ role: 'user', content: 'x' }], n: 2 });
  assert.throws(n, (e: unknown) => e instanceof ShoalError && e.param === 'n');
  const echo = () => parseBody(CompletionRequest, { model: 'm', prompt: 'x', echo: true });
  assert.throws(echo, (e: unknown) => e instanceof ShoalError && e.param === 'echo');
  const tools = () => parseBody(ChatCompletionRequest, { model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [] });
  assert.throws(tools, (e: unknown) => e instanceof ShoalError && e.code === 'UNSUPPORTED_PARAMETER' && e.param === 'tools');
});

test('response bodies validate against OpenAI’s schemas', () => {
  assertOpenAIShape('CreateChatCompletionResponse', chatCompletionBody(meta, 'hi', 'stop', usage));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatChunkBody(meta, { role: 'assistant', content: '' }, null, false));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatChunkBody(meta, { content: 'x' }, null, true));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatChunkBody(meta, {}, 'length', true));
  assertOpenAIShape('CreateChatCompletionStreamResponse', chatUsageChunkBody(meta, usage));
  assertOpenAIShape('CreateCompletionResponse', completionBody({ ...meta, id: 'cmpl-1' }, 'text', 'stop', usage));
  assertOpenAIShape('Model', modelBody('shoal/tiny', 1));
  assert.deepEqual(chatUsageChunkBody(meta, usage).usage, { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 });
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
