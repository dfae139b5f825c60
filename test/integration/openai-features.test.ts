import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Ajv } from 'ajv';
import OpenAI, { APIError } from 'openai';
import { assertOpenAIShape } from '../support/openai-schema.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

const MODEL = 'shoal/tiny';
// Bounded strings: a random-weight model never closes a string on its own accord.
const WEATHER_PARAMS = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer' }, unit: { enum: ['c', 'f'] } },
  required: ['city', 'days', 'unit'],
  additionalProperties: false,
};
const TOOLS: OpenAI.Chat.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: WEATHER_PARAMS } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { enum: ['utc', 'cet'] } }, required: ['zone'] } } },
];

const ajv = new Ajv({ strict: false });

let node: TestNode;
let client: OpenAI;

before(async () => {
  node = await startTestNode();
  client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(async () => node?.stop());

describe('tool calls', () => {
  test('a named tool_choice produces a call whose arguments validate against the schema', async () => {
    const res = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'What is the weather in Oslo?' }], tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 0, max_tokens: 200,
    });
    assertOpenAIShape('CreateChatCompletionResponse', res);
    const choice = res.choices[0]!;
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.content, null);
    const call = choice.message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    assert.equal(call.function.name, 'get_weather');
    assert.match(call.id, /^call_/);
    const args = JSON.parse(call.function.arguments) as unknown;
    assert.ok(ajv.validate(WEATHER_PARAMS, args), ajv.errorsText());
  });

  test('streamed tool-call deltas add up to the non-streamed call', async () => {
    const params = {
      model: MODEL, messages: [{ role: 'user' as const, content: 'Time please' }], tools: TOOLS, tool_choice: 'required' as const, temperature: 0, max_tokens: 200,
    };
    const whole = await client.chat.completions.create(params);
    const wholeCall = whole.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    let name = '';
    let args = '';
    let finish: string | null = null;
    let deltas = 0;
    for await (const chunk of await client.chat.completions.create({ ...params, stream: true })) {
      assertOpenAIShape('CreateChatCompletionStreamResponse', chunk);
      for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
        assert.equal(call.index, 0);
        name += call.function?.name ?? '';
        args += call.function?.arguments ?? '';
        deltas += 1;
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(name, wholeCall.function.name);
    assert.equal(args, wholeCall.function.arguments);
    assert.ok(deltas > 2, 'arguments arrive in several deltas');
    assert.equal(finish, 'tool_calls');
  });

  test('a tool result sent back gets a text answer', async () => {
    const first = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'get_weather' } }, temperature: 0, max_tokens: 200,
    });
    const call = first.choices[0]!.message.tool_calls![0]!;
    const second = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'user', content: 'Weather in Oslo?' },
        first.choices[0]!.message,
        { role: 'tool', tool_call_id: call.id, content: '{"temp_c": 3}' },
      ],
      tools: TOOLS, tool_choice: 'none', temperature: 0, max_tokens: 8,
    });
    assert.equal(second.choices[0]!.finish_reason, 'length');
    assert.ok(second.choices[0]!.message.content!.length > 0);
    const without = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Weather in Oslo?' }], tools: TOOLS, tool_choice: 'none', temperature: 0, max_tokens: 1,
    });
    assert.ok(second.usage!.prompt_tokens > without.usage!.prompt_tokens + 10, 'the call and its result are in the prompt');
  });

  test('tool_choice naming an unknown tool is a 400', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } }),
      (error: unknown) => error instanceof APIError && error.status === 400 && error.param === 'tool_choice',
    );
  });
});

describe('structured output', () => {
  test('json_schema output parses and validates', async () => {
    const schema = {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer' }, tags: { type: 'array', items: { enum: ['a', 'b'] }, maxItems: 3 } },
      required: ['name', 'age', 'tags'],
      additionalProperties: false,
    };
    const res = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Describe a person' }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } }, temperature: 0, max_tokens: 300,
    });
    assert.equal(res.choices[0]!.finish_reason, 'stop');
    const value = JSON.parse(res.choices[0]!.message.content!) as unknown;
    assert.ok(ajv.validate(schema, value), ajv.errorsText());
  });

  test('json_object output parses', async () => {
    const res = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'another one' }], response_format: { type: 'json_object' }, temperature: 0, max_tokens: 300,
    });
    assert.equal(res.choices[0]!.finish_reason, 'stop');
    assert.equal(typeof JSON.parse(res.choices[0]!.message.content!), 'object');
  });
});

describe('sampling extras', () => {
  test('logprobs cover every generated token, with the requested alternatives', async () => {
    const res = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'hi' }], logprobs: true, top_logprobs: 3, temperature: 0, max_tokens: 6,
    });
    assertOpenAIShape('CreateChatCompletionResponse', res);
    const content = res.choices[0]!.logprobs!.content!;
    assert.equal(content.length, res.usage!.completion_tokens);
    assert.equal(content.map((c) => c.token).join(''), res.choices[0]!.message.content);
    for (const entry of content) {
      assert.equal(entry.top_logprobs.length, 3);
      assert.ok(entry.logprob <= 0);
      // Greedy: the chosen token is the most likely one.
      assert.equal(entry.top_logprobs[0]!.token, entry.token);
    }
  });

  test('frequency and presence penalties change greedy output', async () => {
    const base = { model: MODEL, messages: [{ role: 'user' as const, content: 'hi' }], temperature: 0, max_tokens: 20 };
    const plain = await client.chat.completions.create(base);
    const penalized = await client.chat.completions.create({ ...base, frequency_penalty: 2, presence_penalty: 1 });
    assert.notEqual(penalized.choices[0]!.message.content, plain.choices[0]!.message.content);
  });
});

describe('embeddings', () => {
  test('float and base64 agree, and a batch equals one-by-one', async () => {
    const batch = await client.embeddings.create({ model: MODEL, input: ['hello world', 'the sea'] });
    assertOpenAIShape('CreateEmbeddingResponse', batch);
    assert.equal(batch.data.length, 2);
    const dims = batch.data[0]!.embedding.length;
    assert.ok(dims > 0);
    assert.equal(batch.data[1]!.embedding.length, dims);
    assert.ok(batch.usage.prompt_tokens > 0);
    const single = await client.embeddings.create({ model: MODEL, input: 'the sea' });
    assert.deepEqual(single.data[0]!.embedding, batch.data[1]!.embedding);
    const raw = await fetch(`${node.url}/v1/embeddings`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, input: 'the sea', encoding_format: 'base64' }),
    });
    const b64 = ((await raw.json()) as { data: { embedding: string }[] }).data[0]!.embedding;
    const bytes = Buffer.from(b64, 'base64');
    const decoded = Array.from({ length: bytes.length / 4 }, (_, i) => bytes.readFloatLE(i * 4));
    single.data[0]!.embedding.forEach((v, i) => assert.ok(Math.abs(v - decoded[i]!) < 1e-6));
  });
});

describe('API keys', () => {
  test('a node with --api-key answers 401 without the key and serves with it', async () => {
    await using locked = await startTestNode({ args: ['--api-key', 'secret'] });
    const noKey = await fetch(`${locked.url}/v1/models`);
    assert.equal(noKey.status, 401);
    assertOpenAIShape('ErrorResponse', await noKey.json());
    const wrong = new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(wrong.models.list(), (e: unknown) => e instanceof APIError && e.status === 401);
    const right = new OpenAI({ baseURL: `${locked.url}/v1`, apiKey: 'secret', maxRetries: 0 });
    assert.equal((await right.models.list()).data[0]!.id, MODEL);
    assert.equal((await fetch(`${locked.url}/healthz`)).status, 200, 'health stays open');
  });
});

describe('reasoning and eager tool use', () => {
  test('a reasoning model’s think block arrives as reasoning_content, never in the answer', async () => {
    await using thinker = await startTestNode({ args: ['--default-model', 'shoal/tiny-think'] });
    const c = new OpenAI({ baseURL: `${thinker.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const params = { model: 'shoal/tiny-think', messages: [{ role: 'user' as const, content: 'Why is the sky blue?' }], temperature: 0, max_tokens: 200 };
    const res = await c.chat.completions.create(params);
    assertOpenAIShape('CreateChatCompletionResponse', res);
    const message = res.choices[0]!.message as OpenAI.Chat.ChatCompletionMessage & { reasoning_content?: string };
    assert.ok(message.reasoning_content && message.reasoning_content.length > 0, 'reasoning is reported');
    assert.ok(message.content && message.content.length > 0, 'an answer follows');
    for (const text of [message.content, message.reasoning_content]) assert.doesNotMatch(text, /<\/?think>/);
    assert.equal(res.choices[0]!.finish_reason, 'stop');
    let reasoning = '';
    let content = '';
    for await (const chunk of await c.chat.completions.create({ ...params, stream: true })) {
      const delta = chunk.choices[0]?.delta as { content?: string; reasoning_content?: string } | undefined;
      reasoning += delta?.reasoning_content ?? '';
      content += delta?.content ?? '';
    }
    assert.equal(reasoning, message.reasoning_content);
    assert.equal(content, message.content);
  });

  test('with tool_choice auto, a tool-eager model calls a tool and answers once the result is back', async () => {
    // In-process only: a call in Shoal's own convention (this template renders no tools) is
    // grammar-constrained from its first token by the llama_cpp engine; llama-server's chat endpoint
    // takes no lazy grammar, so there the random-weight model's arguments run free.
    await using eager = await startTestNode({ args: ['--default-model', 'shoal/tiny-tools', '--engine', 'llama_cpp'] });
    const c = new OpenAI({ baseURL: `${eager.url}/v1`, apiKey: 'x', maxRetries: 0 });
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Weather in Oslo?' }];
    const first = await c.chat.completions.create({ model: 'shoal/tiny-tools', messages, tools: TOOLS, temperature: 0, max_tokens: 200 });
    assert.equal(first.choices[0]!.finish_reason, 'tool_calls');
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    const schema = TOOLS.find((t) => t.type === 'function' && t.function.name === call.function.name)!;
    assert.ok(ajv.validate((schema as OpenAI.Chat.ChatCompletionFunctionTool).function.parameters!, JSON.parse(call.function.arguments)), ajv.errorsText());
    const second = await c.chat.completions.create({
      model: 'shoal/tiny-tools',
      messages: [...messages, first.choices[0]!.message, { role: 'tool', tool_call_id: call.id, content: '{"temp_c": 3}' }],
      tools: TOOLS, temperature: 0, max_tokens: 60,
    });
    assert.notEqual(second.choices[0]!.finish_reason, 'tool_calls');
    assert.ok(second.choices[0]!.message.content!.length > 0);
  });
});
