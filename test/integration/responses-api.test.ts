import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import AjvModule from 'ajv';
import OpenAI, { APIError } from 'openai';
import { assertOpenAIShape } from '../support/openai-schema.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

// ajv is CommonJS; under NodeNext its class is the module's `.default`.
const Ajv = AjvModule.default;

const MODEL = 'shoal/tiny';
const THINK_MODEL = 'shoal/tiny-think';

type Params = OpenAI.Responses.ResponseCreateParamsNonStreaming;
type Response = OpenAI.Responses.Response;
type StreamEvent = OpenAI.Responses.ResponseStreamEvent;

const TEXT_EVENT_ORDER = ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added'];
const TEXT_END_ORDER = ['response.output_text.done', 'response.content_part.done', 'response.output_item.done'];

/** Arguments the forced call must produce: enums keep a random-weight model's answer short and checkable. */
const WEATHER_TOOL: OpenAI.Responses.FunctionTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string', enum: ['Paris', 'Oslo', 'Lima'] }, unit: { type: 'string', enum: ['c', 'f'] } },
    required: ['city', 'unit'],
    additionalProperties: false,
  },
  strict: true,
};

function clientFor(node: TestNode): OpenAI {
  return new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'not-needed', maxRetries: 0 });
}

function greedy(input: Params['input'], extra: Partial<Params> = {}): Params {
  return { model: MODEL, input, temperature: 0, max_output_tokens: 24, ...extra };
}

/** `store` is in the wire object though the SDK's Response type leaves it out. */
function stored(response: Response): unknown {
  return (response as Response & { store?: boolean }).store;
}

function messageText(response: Response): string {
  return response.output
    .filter((item) => item.type === 'message')
    .flatMap((item) => item.content)
    .map((part) => (part.type === 'output_text' ? part.text : ''))
    .join('');
}

/** A response's usage less what the engine found in its cache: a repeated request reuses the first's prompt. */
function uncached(response: Response): unknown {
  const { input_tokens_details: _cache, ...usage } = response.usage!;
  return usage;
}

/** Collects a stream, checking every event against OpenAI's schema and the sequence numbers as it goes. */
async function collect(stream: AsyncIterable<StreamEvent>): Promise<{ events: StreamEvent[]; final: Response; text: string }> {
  const events: StreamEvent[] = [];
  let text = '';
  for await (const event of stream) {
    assertOpenAIShape('ResponseStreamEvent', event);
    const previous = events.at(-1);
    if (previous) assert.ok(event.sequence_number > previous.sequence_number, `sequence numbers increase at ${event.type}`);
    events.push(event);
    if (event.type === 'response.output_text.delta') text += event.delta;
  }
  const last = events.at(-1)!;
  assert.ok(last.type === 'response.completed' || last.type === 'response.incomplete', `the stream ends with the response, not ${last.type}`);
  assertOpenAIShape('Response', last.response);
  return { events, final: last.response, text };
}

async function streamed(client: OpenAI, params: Params) {
  return collect(await client.responses.create({ ...params, stream: true }));
}

async function expectError(promise: Promise<unknown>, status: number, check: (error: APIError) => void = () => {}): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof APIError, `expected an APIError, got ${String(error)}`);
    assert.equal(error.status, status);
    assertOpenAIShape('ErrorResponse', { error: error.error });
    check(error);
    return true;
  });
}

describe('Responses API on a real node', () => {
  let node: TestNode;
  let client: OpenAI;

  before(async () => {
    // In-process: the forced call below fits its 64 tokens under node-llama-cpp's compact JSON grammar;
    // llama-server's own grammar allows whitespace, which the random-weight model spends the budget on.
    node = await startTestNode({ args: ['--default-model', MODEL, '--engine', 'llama_cpp'] });
    client = clientFor(node);
  });

  after(async () => {
    await node?.stop();
  });

  test('a string input answers with a schema-valid response, incomplete at max_output_tokens', async () => {
    const response = await client.responses.create(greedy('Hello there, how are you?'));
    assertOpenAIShape('Response', response);
    assert.match(response.id, /^resp_/);
    assert.equal(response.object, 'response');
    assert.equal(response.model, MODEL);
    assert.equal(response.status, 'incomplete');
    assert.deepEqual(response.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(response.error, null);
    assert.equal(response.output.length, 1);
    const message = response.output[0]!;
    assert.equal(message.type, 'message');
    assert.match(message.id!, /^msg_/);
    assert.ok(response.output_text.length > 0, 'the SDK finds the text');
    assert.equal(response.output_text, messageText(response));
    assert.equal(response.usage!.output_tokens, 24);
    assert.equal(response.usage!.total_tokens, response.usage!.input_tokens + response.usage!.output_tokens);
    assert.equal(response.max_output_tokens, 24);
    assert.equal(response.temperature, 0);
    assert.equal(stored(response), true);
  });

  test('message input with instructions: instructions lead the prompt and are echoed', async () => {
    const input: Params['input'] = [
      { role: 'user', content: [{ type: 'input_text', text: 'What is the capital of France?' }] },
      { role: 'assistant', content: 'Paris.' },
      { role: 'user', content: 'And of Norway?' },
    ];
    const bare = await client.responses.create(greedy(input, { max_output_tokens: 8 }));
    const instructed = await client.responses.create(greedy(input, { max_output_tokens: 8, instructions: 'Answer in one word.' }));
    assertOpenAIShape('Response', instructed);
    assert.equal(instructed.instructions, 'Answer in one word.');
    assert.equal(bare.instructions, null);
    assert.ok(instructed.usage!.input_tokens > bare.usage!.input_tokens, 'the instructions are part of the prompt');
  });

  test('streamed text equals the non-stream text at temperature 0, in the exact OpenAI event order, with equal usage', async () => {
    const params = greedy('Tell me a story about the sea.', { max_output_tokens: 32, instructions: 'Be vivid.' });
    const whole = await client.responses.create(params);
    const { events, final, text } = await streamed(client, params);
    assert.equal(text, whole.output_text);
    assert.equal(messageText(final), whole.output_text);
    const types = events.map((e) => e.type);
    const deltas = types.filter((t) => t === 'response.output_text.delta').length;
    assert.ok(deltas > 0, 'text arrives in deltas');
    assert.deepEqual(types, [...TEXT_EVENT_ORDER, ...Array<string>(deltas).fill('response.output_text.delta'), ...TEXT_END_ORDER, 'response.incomplete']);
    assert.equal(final.status, 'incomplete');
    assert.deepEqual(final.incomplete_details, { reason: 'max_output_tokens' });
    assert.deepEqual(uncached(final), uncached(whole));
    const created = events[0] as OpenAI.Responses.ResponseCreatedEvent;
    assert.equal(created.response.id, final.id, 'every lifecycle event carries the same response');
    assert.equal(created.response.status, 'in_progress');
  });

  test('the SSE wire has an event line matching every data type, and the SDK stream helper agrees', async () => {
    const params = greedy('Count to ten.', { max_output_tokens: 12 });
    const res = await fetch(`${node.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...params, stream: true }) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const blocks = (await res.text()).split('\n\n').filter((block) => block.trim() !== '');
    for (const block of blocks) {
      const lines = block.split('\n');
      assert.equal(lines.length, 2, `one event line and one data line: ${block}`);
      const name = lines[0]!.replace(/^event: /, '');
      const data = JSON.parse(lines[1]!.replace(/^data: /, '')) as { type: string };
      assert.equal(name, data.type);
    }
    const helper = client.responses.stream({ ...params, stream: true });
    const final = await helper.finalResponse();
    assertOpenAIShape('Response', final);
    assert.equal(final.output_text, (await client.responses.create(params)).output_text);
  });

  test('stored responses: retrieve, continue with previous_response_id, delete, then 404', async () => {
    const first = await client.responses.create(greedy('My name is Ada.', { max_output_tokens: 8 }));
    const fetched = await client.responses.retrieve(first.id);
    assertOpenAIShape('Response', fetched);
    assert.equal(fetched.id, first.id);
    assert.equal(fetched.output_text, first.output_text);
    assert.deepEqual(fetched.usage, first.usage);

    const second = await client.responses.create(greedy('What is my name?', { max_output_tokens: 8, previous_response_id: first.id }));
    assertOpenAIShape('Response', second);
    assert.equal(second.previous_response_id, first.id);
    const alone = await client.responses.create(greedy('What is my name?', { max_output_tokens: 8, store: false }));
    assert.ok(second.usage!.input_tokens > alone.usage!.input_tokens, 'the earlier turn was prepended');
    assert.ok(second.usage!.input_tokens > first.usage!.input_tokens + first.usage!.output_tokens - 1, 'the earlier input and output are both there');

    // A streamed response is stored too, and the chain continues through it.
    const third = await streamed(client, greedy('Say it again.', { max_output_tokens: 8, previous_response_id: second.id }));
    assert.ok(third.final.usage!.input_tokens > second.usage!.input_tokens);
    assert.equal((await client.responses.retrieve(third.final.id)).output_text, third.text);

    const res = await fetch(`${node.url}/v1/responses/${first.id}`, { method: 'DELETE' });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), { id: first.id, object: 'response', deleted: true });
    await expectError(client.responses.retrieve(first.id), 404, (error) => assert.match(error.message, new RegExp(first.id)));
    await expectError(client.responses.delete(first.id), 404);
    // The chain built on it keeps its own copy of the history.
    await client.responses.create(greedy('Still there?', { max_output_tokens: 4, previous_response_id: second.id }));
  });

  test('store: false responses are not retrievable, and an unknown previous_response_id is a 404', async () => {
    const unstored = await client.responses.create(greedy('Forget this.', { max_output_tokens: 4, store: false }));
    assert.equal(stored(unstored), false);
    await expectError(client.responses.retrieve(unstored.id), 404);
    await expectError(client.responses.create(greedy('Go on.', { previous_response_id: unstored.id })), 404, (error) => {
      assert.equal(error.param, 'previous_response_id');
      assert.match(error.message, new RegExp(`Previous response with id '${unstored.id}' not found`));
    });
    await expectError(client.responses.retrieve('resp_nothing'), 404);
  });

  test('a forced function call has arguments valid for its schema, and its output goes back in', async () => {
    const validate = new Ajv().compile(WEATHER_TOOL.parameters!);
    const params = greedy('What is the weather in Oslo?', {
      max_output_tokens: 64,
      tools: [WEATHER_TOOL],
      tool_choice: { type: 'function', name: WEATHER_TOOL.name },
    });
    const response = await client.responses.create(params);
    assertOpenAIShape('Response', response);
    assert.equal(response.status, 'completed');
    assert.deepEqual(response.tool_choice, { type: 'function', name: WEATHER_TOOL.name });
    const calls = response.output.filter((item) => item.type === 'function_call');
    assert.equal(calls.length, 1, 'one call per turn');
    const call = calls[0]!;
    assert.match(call.id!, /^fc_/);
    assert.match(call.call_id, /^call_/);
    assert.equal(call.name, WEATHER_TOOL.name);
    assert.equal(call.status, 'completed');
    const args: unknown = JSON.parse(call.arguments);
    assert.ok(validate(args), `arguments ${call.arguments} validate: ${JSON.stringify(validate.errors)}`);

    // Streamed: the arguments arrive as deltas that add up to the same call.
    const { events, final } = await streamed(client, params);
    const argDeltas = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
    const done = events.find((e) => e.type === 'response.function_call_arguments.done');
    assert.equal(done?.arguments, argDeltas);
    assert.equal(argDeltas, call.arguments, 'greedy: the same call streamed or not');
    assert.deepEqual(uncached(final), uncached(response));

    // Round trip through the stored conversation.
    const output = { type: 'function_call_output' as const, call_id: call.call_id, output: JSON.stringify({ temperature: 3, unit: 'c' }) };
    const answered = await client.responses.create(
      greedy([output], { max_output_tokens: 8, previous_response_id: response.id, tools: [WEATHER_TOOL], tool_choice: 'none' }),
    );
    assertOpenAIShape('Response', answered);
    assert.equal(answered.output[0]!.type, 'message');
    const question = await client.responses.create(
      greedy('What is the weather in Oslo?', { max_output_tokens: 1, store: false, tools: [WEATHER_TOOL], tool_choice: 'none' }),
    );
    assert.ok(answered.usage!.input_tokens > question.usage!.input_tokens, 'the call and its output follow the question in the prompt');

    // Round trip without storage: the client replays the items itself.
    const replayed = await client.responses.create(
      greedy([{ role: 'user', content: 'What is the weather in Oslo?' }, ...response.output, output] as Params['input'], {
        max_output_tokens: 8,
        store: false,
        tools: [WEATHER_TOOL],
        tool_choice: 'none',
      }),
    );
    assert.equal(replayed.usage!.input_tokens, answered.usage!.input_tokens, 'replayed items make the same prompt as the stored ones');
    assert.equal(replayed.output_text, answered.output_text);

    await expectError(client.responses.create(greedy([{ type: 'function_call_output', call_id: 'call_unknown', output: 'x' }])), 400, (error) => {
      assert.equal(error.param, 'input[0].call_id');
    });
  });

  test('text.format json_schema output validates against the schema', async () => {
    const schema = {
      type: 'object',
      properties: { answer: { type: 'string', enum: ['yes', 'no'] }, sure: { type: 'boolean' } },
      required: ['answer', 'sure'],
      additionalProperties: false,
    };
    const response = await client.responses.create(
      greedy('Is the sky blue?', { max_output_tokens: 64, text: { format: { type: 'json_schema', name: 'verdict', schema, strict: true } } }),
    );
    assertOpenAIShape('Response', response);
    assert.equal(response.status, 'completed');
    assert.deepEqual(response.text?.format, { type: 'json_schema', name: 'verdict', schema, strict: true });
    const parsed: unknown = JSON.parse(response.output_text);
    const validate = new Ajv().compile(schema);
    assert.ok(validate(parsed), `${response.output_text} validates: ${JSON.stringify(validate.errors)}`);
  });

  test('unsupported parameters and kinds are a 400 naming them', async () => {
    const post = async (body: Record<string, unknown>) => {
      const res = await fetch(`${node.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, input: 'x', ...body }) });
      const json = (await res.json()) as { error: { param: string; code: string; message: string } };
      assertOpenAIShape('ErrorResponse', json);
      return { status: res.status, error: json.error };
    };
    for (const [body, param] of [
      [{ background: true }, 'background'],
      [{ top_logprobs: 3 }, 'top_logprobs'],
      [{ tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file-1' }] }] }, 'input[0].content[0].type'],
    ] as const) {
      const { status, error } = await post(body);
      assert.equal(status, 400, param);
      assert.equal(error.code, 'unsupported_parameter', param);
      assert.equal(error.param, param);
      assert.ok(error.message.includes(param.split(/[.[]/)[0]!), error.message);
    }
    await expectError(client.responses.create({ ...greedy('x'), background: true }), 400, (error) => {
      assert.equal(error.code, 'unsupported_parameter');
      assert.equal(error.param, 'background');
    });
    const truncation = await post({ truncation: 'auto' });
    assert.equal(truncation.status, 400);
    assert.equal(truncation.error.param, 'truncation');
  });

  test('an unknown model is a 404 model_not_found in OpenAI shape', async () => {
    await expectError(client.responses.create(greedy('hi', { model: 'nobody/nothing' })), 404, (error) => assert.equal(error.code, 'model_not_found'));
  });
});

describe('Responses API reasoning on a real node', () => {
  let node: TestNode;
  let client: OpenAI;

  before(async () => {
    node = await startTestNode({ args: ['--default-model', THINK_MODEL] });
    client = clientFor(node);
  });

  after(async () => {
    await node?.stop();
  });

  test('a thinking model answers with a reasoning item, then a message free of <think>', async () => {
    const params: Params = { model: THINK_MODEL, input: 'Why is the sea salty?', temperature: 0, max_output_tokens: 256 };
    const response = await client.responses.create(params);
    assertOpenAIShape('Response', response);
    assert.equal(response.status, 'completed');
    const reasoning = response.output[0]!;
    assert.equal(reasoning.type, 'reasoning');
    assert.match(reasoning.id, /^rs_/);
    assert.deepEqual(reasoning.summary, []);
    const thought = (reasoning.content ?? []).map((part) => part.text).join('');
    assert.ok(thought.length > 0, 'the reasoning text is there');
    assert.equal(response.output.at(-1)!.type, 'message');
    assert.ok(!response.output_text.includes('<think>') && !response.output_text.includes('</think>'), response.output_text);
    assert.ok(!thought.includes('<think>') && !thought.includes('</think>'), thought);

    const { events, final } = await streamed(client, params);
    const streamedThought = events.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta).join('');
    assert.equal(streamedThought, thought);
    const done = events.find((e) => e.type === 'response.reasoning_text.done');
    assert.equal(done?.text, thought);
    assert.equal(messageText(final), response.output_text);
    assert.deepEqual(uncached(final), uncached(response));
    const types = events.map((e) => e.type);
    assert.ok(types.indexOf('response.reasoning_text.done') < types.indexOf('response.output_text.delta'), 'reasoning closes before the answer starts');

    // The reasoning item replays as input without complaint.
    const next = await client.responses.create({ ...params, max_output_tokens: 16, previous_response_id: response.id, input: 'And the rivers?' });
    assertOpenAIShape('Response', next);
  });
});
