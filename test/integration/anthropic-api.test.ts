import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import Ajv2020Module from 'ajv/dist/2020.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

// CommonJS: under NodeNext the default import is `module.exports`, so the class is its `.default`.
const Ajv2020 = Ajv2020Module.default;

const MODEL = 'shoal/tiny';
const THINK_MODEL = 'shoal/tiny-think';

/** The sampling fields Anthropic's API takes but this SDK version's types no longer list; the SDK sends them as given. */
type Params = Anthropic.MessageCreateParamsNonStreaming & { temperature?: number; top_p?: number; top_k?: number };

function greedy(content: string, extra: Partial<Params> = {}): Params {
  return { model: MODEL, max_tokens: 24, temperature: 0, messages: [{ role: 'user', content }], ...extra };
}

function textOf(message: Anthropic.Message): string {
  return message.content.flatMap((block) => (block.type === 'text' ? [block.text] : [])).join('');
}

/**
 * The whole prompt: Anthropic's `input_tokens` leaves out what was read from the cache, and a
 * repeated or continued conversation finds its prefix in the engine's cache.
 */
function promptOf(usage: Anthropic.Usage): number {
  return usage.input_tokens + (usage.cache_read_input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0);
}

function usageOf(message: Anthropic.Message): { prompt: number; output_tokens: number } {
  return { prompt: promptOf(message.usage), output_tokens: message.usage.output_tokens };
}

function sdk(node: TestNode, apiKey = 'x'): Anthropic {
  return new Anthropic({ baseURL: node.url, apiKey, maxRetries: 0 });
}

/** Streams a request through the SDK, returning the concatenated text deltas and the accumulated message. */
async function streamed(client: Anthropic, params: Params): Promise<{ text: string; final: Anthropic.Message; types: string[] }> {
  const stream = client.messages.stream(params);
  let text = '';
  const types: string[] = [];
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') text += event.delta.text;
  }
  return { text, final: await stream.finalMessage(), types };
}

async function expectApiError(promise: Promise<unknown>, status: number, type: string, message?: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof Anthropic.APIError, `expected an APIError, got ${String(error)}`);
    assert.equal(error.status, status);
    assert.equal(error.type, type);
    assert.deepEqual(Object.keys(error.error as object), ['type', 'error']);
    if (message) assert.match(error.message, message);
    return true;
  });
}

async function postRaw(node: TestNode, path: string, body: string): Promise<{ status: number; json: { type: string; error: { type: string; message: string } } }> {
  const res = await fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: res.status, json: (await res.json()) as { type: string; error: { type: string; message: string } } };
}

describe('Anthropic Messages API on a real node', () => {
  let node: TestNode;
  let client: Anthropic;

  before(async () => {
    node = await startTestNode();
    client = sdk(node);
  });
  after(async () => {
    await node?.stop();
  });

  test('a non-stream message has text, usage and stop_reason max_tokens', async () => {
    const message = await client.messages.create(greedy('Hello there, how are you?'));
    assert.match(message.id, /^msg_/);
    assert.equal(message.type, 'message');
    assert.equal(message.role, 'assistant');
    assert.equal(message.model, MODEL);
    assert.equal(message.content.length, 1);
    assert.equal(message.content[0]!.type, 'text');
    assert.ok(textOf(message).length > 0, 'non-empty text');
    assert.equal(message.stop_reason, 'max_tokens');
    assert.equal(message.stop_sequence, null);
    assert.equal(message.usage.output_tokens, 24);
    assert.ok(message.usage.input_tokens > 5, 'the templated prompt is counted');
  });

  test('stream text deltas concatenate to the non-stream text, with equal usage', async () => {
    const params = greedy('Tell me a story about the sea.', { max_tokens: 40 });
    const whole = await client.messages.create(params);
    const live = await streamed(client, params);
    assert.equal(live.text, textOf(whole));
    assert.deepEqual(live.final.content, whole.content);
    assert.equal(live.final.stop_reason, 'max_tokens');
    assert.deepEqual(usageOf(live.final), usageOf(whole));
    assert.equal(live.types[0], 'message_start');
    assert.deepEqual(live.types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  });

  test('the raw stream uses Anthropic’s event names and order, ping after the first block starts', async () => {
    const res = await fetch(`${node.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
      body: JSON.stringify({ ...greedy('Hi', { max_tokens: 5 }), stream: true }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const frames = (await res.text()).split('\n\n').filter((frame) => frame !== '');
    const names = frames.map((frame) => {
      const [eventLine, dataLine, ...rest] = frame.split('\n');
      assert.deepEqual(rest, []);
      const name = /^event: (\w+)$/.exec(eventLine!)![1]!;
      const data = JSON.parse(dataLine!.replace(/^data: /, '')) as { type: string; index?: number };
      assert.equal(data.type, name, 'the event line names the data’s type');
      if (data.index !== undefined) assert.equal(data.index, 0);
      return name;
    });
    assert.deepEqual(names.slice(0, 3), ['message_start', 'content_block_start', 'ping']);
    const deltas = names.slice(3, -3);
    assert.ok(deltas.length > 0 && deltas.every((name) => name === 'content_block_delta'), names.join(' '));
    assert.deepEqual(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  });

  test('system and multi-turn history reach the prompt; count_tokens equals input_tokens', async () => {
    const messages: Anthropic.MessageParam[] = [
      { role: 'user', content: 'What is the capital of France?' },
      { role: 'assistant', content: [{ type: 'text', text: 'Paris.' }] },
      { role: 'user', content: [{ type: 'text', text: 'And of Italy?' }] },
    ];
    const system = [{ type: 'text' as const, text: 'You answer in one word.' }];
    const bare = await client.messages.create(greedy('And of Italy?', { max_tokens: 8 }));
    const full = await client.messages.create({ ...greedy('', { max_tokens: 8 }), system, messages });
    assert.ok(promptOf(full.usage) > promptOf(bare.usage) + 10, `${promptOf(full.usage)} vs ${promptOf(bare.usage)}`);
    assert.notEqual(textOf(full), textOf(bare));
    const counted = await client.messages.countTokens({ model: MODEL, system, messages });
    assert.deepEqual(counted, { input_tokens: promptOf(full.usage) });
    const plain = await client.messages.countTokens({ model: MODEL, messages: [{ role: 'user', content: 'And of Italy?' }] });
    assert.equal(plain.input_tokens, promptOf(bare.usage));
  });

  test('a stop sequence ends the answer before it, streamed or not', async () => {
    const base = await client.messages.create(greedy('Write something long.', { max_tokens: 48 }));
    const text = textOf(base);
    const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 3);
    assert.equal(stop.length, 3);
    const expected = text.slice(0, text.indexOf(stop));
    const params = greedy('Write something long.', { max_tokens: 48, stop_sequences: [stop, 'zzzz-never'] });
    const stopped = await client.messages.create(params);
    assert.equal(textOf(stopped), expected);
    assert.equal(stopped.stop_reason, 'stop_sequence');
    assert.equal(stopped.stop_sequence, stop);
    const live = await streamed(client, params);
    assert.equal(live.text, expected);
    assert.equal(live.final.stop_reason, 'stop_sequence');
    assert.equal(live.final.stop_sequence, stop);
    assert.deepEqual(usageOf(live.final), usageOf(stopped));
  });

  test('a forced tool call validates against its input_schema, and the tool_result round trip answers', async () => {
    const tool: Anthropic.Tool = {
      name: 'get_weather',
      description: 'Current weather for a city',
      input_schema: {
        type: 'object',
        // A bound on the string keeps a random-weight model from writing it until max_tokens.
        properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer' } },
        required: ['city', 'days'],
      },
    };
    const ask: Anthropic.MessageParam = { role: 'user', content: 'What is the weather in Paris for the next 2 days?' };
    const params: Params = { ...greedy('', { max_tokens: 200 }), messages: [ask], tools: [tool], tool_choice: { type: 'tool', name: 'get_weather' } };
    const call = await client.messages.create(params);
    assert.equal(call.stop_reason, 'tool_use');
    const uses = call.content.filter((block) => block.type === 'tool_use');
    assert.equal(uses.length, 1);
    const use = uses[0]!;
    assert.equal(use.name, 'get_weather');
    const validate = new Ajv2020().compile(tool.input_schema);
    assert.ok(validate(use.input), `input ${JSON.stringify(use.input)} violates the schema: ${JSON.stringify(validate.errors)}`);

    const live = await streamed(client, params);
    const [streamedUse] = live.final.content;
    assert.ok(streamedUse?.type === 'tool_use');
    assert.equal(streamedUse.name, use.name);
    assert.deepEqual(streamedUse.input, use.input, 'streamed input_json_delta chunks rebuild the same input');
    assert.equal(live.final.stop_reason, 'tool_use');

    const followUp = (result: string) => ({
      ...greedy('', { max_tokens: 16 }),
      tools: [tool],
      messages: [
        ask,
        { role: 'assistant' as const, content: call.content },
        { role: 'user' as const, content: [{ type: 'tool_result' as const, tool_use_id: use.id, content: result }] },
      ],
    });
    const answer = await client.messages.create(followUp('Sunny, 25 degrees.'));
    assert.notEqual(answer.stop_reason, 'tool_use');
    assert.ok(textOf(answer).length > 0, 'the model answers after the tool result');
    const longer = await client.messages.countTokens({ model: MODEL, tools: [tool], messages: followUp('Sunny, 25 degrees, light wind from the west.').messages });
    assert.ok(longer.input_tokens > promptOf(answer.usage), 'the tool result is part of the prompt');
  });

  test('aborting the SDK stream ends the generation', async () => {
    const stream = client.messages.stream({ ...greedy('go on forever'), max_tokens: 100_000 });
    const settled = stream.done().catch((error: unknown) => error);
    for await (const event of stream) {
      if (event.type === 'content_block_delta') break;
    }
    stream.abort();
    assert.ok((await settled) instanceof Anthropic.APIUserAbortError);
    const deadline = Date.now() + 1000;
    let inFlight = -1;
    while (Date.now() < deadline) {
      const health = (await (await fetch(`${node.url}/healthz`)).json()) as { models: { inFlight: number }[] };
      inFlight = health.models[0]!.inFlight;
      if (inFlight === 0) break;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.equal(inFlight, 0, 'the sequence is released within 1 s of the abort');
    const after = await client.messages.create(greedy('still there?', { max_tokens: 4 }));
    assert.equal(after.usage.output_tokens, 4);
  });

  test('an unknown model is a 404 not_found_error', async () => {
    await expectApiError(client.messages.create({ ...greedy('hi'), model: 'nobody/nothing' }), 404, 'not_found_error', /nobody\/nothing/);
    await expectApiError(client.messages.countTokens({ model: 'nobody/nothing', messages: [{ role: 'user', content: 'hi' }] }), 404, 'not_found_error');
  });

  test('bad requests are 400 invalid_request_error naming the field', async () => {
    const noMax = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] } as unknown as Params;
    await expectApiError(client.messages.create(noMax), 400, 'invalid_request_error', /max_tokens/);
    await expectApiError(client.messages.create(greedy('hi', { top_k: 5 })), 400, 'invalid_request_error', /top_k/);
    await expectApiError(client.messages.create(greedy('hi', { temperature: 1.5 })), 400, 'invalid_request_error', /temperature/);
    const badJson = await postRaw(node, '/v1/messages', '{"model": "shoal/tiny", "messages": [');
    assert.equal(badJson.status, 400);
    assert.equal(badJson.json.type, 'error');
    assert.equal(badJson.json.error.type, 'invalid_request_error');
  });

  test('unknown paths under /v1/messages answer 404 in Anthropic’s shape', async () => {
    const res = await postRaw(node, '/v1/messages/batches', '{}');
    assert.equal(res.status, 404);
    assert.deepEqual(Object.keys(res.json), ['type', 'error']);
    assert.equal(res.json.error.type, 'not_found_error');
  });
});

describe('Anthropic API with --api-key', () => {
  let node: TestNode;

  before(async () => {
    node = await startTestNode({ args: ['--api-key', 'secret'] });
  });
  after(async () => {
    await node?.stop();
  });

  test('a wrong key is a 401 authentication_error; the right x-api-key is let in', async () => {
    await expectApiError(sdk(node, 'wrong').messages.create(greedy('hi', { max_tokens: 2 })), 401, 'authentication_error');
    const res = await fetch(`${node.url}/v1/messages`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(greedy('hi')) });
    assert.equal(res.status, 401);
    const message = await sdk(node, 'secret').messages.create(greedy('hi', { max_tokens: 2 }));
    assert.equal(message.usage.output_tokens, 2);
  });
});

describe('Anthropic API with a reasoning model', () => {
  let node: TestNode;

  before(async () => {
    node = await startTestNode({ args: ['--default-model', THINK_MODEL] });
  });
  after(async () => {
    await node?.stop();
  });

  test('thinking arrives as thinking blocks, never as <think> tags in the answer, streamed or not', async () => {
    const params: Params = { ...greedy('Why is the sky blue?', { max_tokens: 256 }), model: THINK_MODEL, thinking: { type: 'enabled', budget_tokens: 1024 } };
    const message = await sdk(node).messages.create(params);
    const thinking = message.content.filter((block) => block.type === 'thinking');
    assert.ok(thinking.length > 0, `thinking blocks present: ${JSON.stringify(message.content)}`);
    assert.ok(thinking.every((block) => block.thinking.length > 0 && block.signature === ''));
    assert.equal(message.content[0]!.type, 'thinking', 'thinking comes first');
    const text = textOf(message);
    assert.ok(!text.includes('<think>') && !text.includes('</think>'), `no tags in ${JSON.stringify(text)}`);
    const live = await streamed(sdk(node), params);
    assert.deepEqual(live.final.content, message.content);
  });
});
