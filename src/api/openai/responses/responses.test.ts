import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { ShoalError } from '../../../common/errors.js';
import { assertOpenAIShape } from '../../../../test/support/openai-schema.js';
import type { ChatMessage, RunnerTask, TaskEvent } from '../../../wire/task.js';
import { ApiKeys } from '../../auth.js';
import type { Dispatcher } from '../../dispatch.js';
import { appendItems, NO_PARAMETERS, responseRequestToTask } from './normalize.js';
import { responsesRoutes } from './routes.js';
import { parseCreateResponse, type CreateResponseRequest } from './schemas.js';
import { ResponseAssembler, responseEcho, responseUsage, type ResponsesIdPrefix, type StreamEvent } from './serialize.js';
import { ResponseStore, type StoredResponse } from './store.js';

function request(fields: Record<string, unknown>): CreateResponseRequest {
  return parseCreateResponse({ model: 'shoal/tiny', ...fields });
}

function refused(fields: Record<string, unknown>, code: ShoalError['code'], param: string): void {
  assert.throws(
    () => request(fields),
    (e: unknown) => e instanceof ShoalError && e.code === code && e.param === param && e.message.includes(param.split(/[.[]/)[0]!),
    `expected ${code} naming ${param}`,
  );
}

/** Ids that say what they are and in which order they were made, so expectations are exact. */
function counterIds(): (prefix: ResponsesIdPrefix) => string {
  let n = 0;
  return (prefix) => `${prefix}_${n++}`;
}

function assembler(fields: Record<string, unknown> = {}): ResponseAssembler {
  return new ResponseAssembler({ id: 'resp_1', createdAt: 1_700_000_000, echo: responseEcho(request({ input: 'hi', ...fields })), newId: counterIds(), now: () => 1_700_000_005 });
}

/** Runs events through an assembler the way the route does, returning every stream event and the final body. */
function run(events: TaskEvent[], fields: Record<string, unknown> = {}) {
  const a = assembler(fields);
  const stream: StreamEvent[] = [...a.begin()];
  for (const event of events) {
    if (event.type === 'end') {
      const finished = a.finish(event.finishReason, event.usage);
      stream.push(...finished.events);
      return { stream, response: finished.response };
    }
    stream.push(...a.push(event));
  }
  throw new Error('no end event');
}

function assertValidStream(stream: StreamEvent[]): void {
  stream.forEach((event, i) => {
    assertOpenAIShape('ResponseStreamEvent', event);
    assert.equal(event.sequence_number, i);
  });
}

const usage = { promptTokens: 10, completionTokens: 4 };

test('string input and instructions become a system and a user message with OpenAI defaults', () => {
  const { task, conversation } = responseRequestToTask(request({ input: 'hello', instructions: 'be brief' }), []);
  assert.deepEqual(task.prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hello' },
    ],
  });
  assert.deepEqual(conversation, [{ role: 'user', content: 'hello' }], 'instructions are not part of the stored conversation');
  assert.deepEqual(task.sampling, { maxTokens: null, temperature: 1, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 });
  assert.deepEqual(task.toolChoice, { mode: 'auto' });
  assert.deepEqual(task.format, { kind: 'text' });
});

test('message items: roles, content parts and sampling map onto the task', () => {
  const body = request({
    input: [
      { role: 'developer', content: [{ type: 'input_text', text: 'rules' }] },
      { type: 'message', role: 'system', content: 'more rules' },
      { role: 'user', content: [{ type: 'input_text', text: 'hel' }, { type: 'input_text', text: 'lo' }] },
      { role: 'assistant', content: [{ type: 'output_text', text: 'hi', annotations: [], logprobs: [] }] },
      { role: 'user', content: 'again' },
    ],
    max_output_tokens: 20,
    temperature: 0,
    top_p: 0.5,
  });
  const { task } = responseRequestToTask(body, []);
  assert.deepEqual(task.prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: 'rules' },
      { role: 'system', content: 'more rules' },
      { role: 'user', content: 'hello' },
      { role: 'assistant', content: 'hi' },
      { role: 'user', content: 'again' },
    ],
  });
  assert.equal(task.sampling.maxTokens, 20);
  assert.equal(task.sampling.temperature, 0);
  assert.equal(task.sampling.topP, 0.5);
});

test('reasoning, message and function_call items in a row are one assistant turn; outputs become tool messages', () => {
  const body = request({
    input: [
      { role: 'user', content: 'weather?' },
      { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'look it up' }] },
      { type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Checking.', annotations: [] }] },
      { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' },
      { type: 'function_call_output', call_id: 'call_1', output: '{"c":3}' },
    ],
    tools: [{ type: 'function', name: 'weather', parameters: { type: 'object' } }],
  });
  const { task } = responseRequestToTask(body, []);
  assert.deepEqual(task.prompt.kind === 'chat' && task.prompt.messages, [
    { role: 'user', content: 'weather?' },
    { role: 'assistant', content: 'Checking.', reasoning: 'look it up', toolCalls: [{ id: 'call_1', name: 'weather', arguments: '{"city":"Oslo"}' }] },
    { role: 'tool', toolCallId: 'call_1', name: 'weather', content: '{"c":3}' },
  ]);
});

test('a function_call_output needs its call earlier in the conversation, which may be the stored history', () => {
  const orphan = request({ input: [{ type: 'function_call_output', call_id: 'call_9', output: 'x' }] });
  assert.throws(() => responseRequestToTask(orphan, []), (e: unknown) => e instanceof ShoalError && e.code === 'BAD_REQUEST' && e.param === 'input[0].call_id');
  const history: ChatMessage[] = [
    { role: 'user', content: 'go' },
    { role: 'assistant', content: '', toolCalls: [{ id: 'call_9', name: 'f', arguments: '{}' }] },
  ];
  const { task, conversation } = responseRequestToTask(orphan, history);
  assert.deepEqual(conversation, [...history, { role: 'tool', toolCallId: 'call_9', name: 'f', content: 'x' }]);
  assert.equal(task.prompt.kind === 'chat' && task.prompt.messages.length, 3);
});

test('previous history comes first; new instructions lead, old ones are not carried over', () => {
  const history: ChatMessage[] = [
    { role: 'user', content: 'one' },
    { role: 'assistant', content: 'two' },
  ];
  const { task } = responseRequestToTask(request({ input: 'three', instructions: 'now' }), history);
  assert.deepEqual(task.prompt.kind === 'chat' && task.prompt.messages, [{ role: 'system', content: 'now' }, ...history, { role: 'user', content: 'three' }]);
});

test('tools, tool_choice and text.format map onto the task', () => {
  const tools = [
    { type: 'function', name: 'a', description: 'does a', parameters: { type: 'object', properties: { x: { type: 'string' } } }, strict: true },
    { type: 'function', name: 'b' },
  ];
  const forced = responseRequestToTask(request({ input: 'x', tools, tool_choice: { type: 'function', name: 'b' } }), []).task;
  assert.deepEqual(forced.tools, [
    { name: 'a', description: 'does a', parameters: { type: 'object', properties: { x: { type: 'string' } } } },
    { name: 'b', parameters: NO_PARAMETERS },
  ]);
  assert.deepEqual(forced.toolChoice, { mode: 'tool', name: 'b' });
  assert.deepEqual(responseRequestToTask(request({ input: 'x', tools, tool_choice: 'required' }), []).task.toolChoice, { mode: 'required' });
  assert.deepEqual(responseRequestToTask(request({ input: 'x', tools, tool_choice: 'none' }), []).task.toolChoice, { mode: 'none' });
  const schema = { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] };
  const json = responseRequestToTask(request({ input: 'x', text: { format: { type: 'json_schema', name: 'out', schema, strict: true } } }), []).task;
  assert.deepEqual(json.format, { kind: 'json_schema', schema });
  assert.deepEqual(responseRequestToTask(request({ input: 'x', text: { format: { type: 'json_object' } } }), []).task.format, { kind: 'json' });
});

test('tool_choice must name a declared function, and tool names must be distinct', () => {
  const isBad = (param: string) => (e: unknown) => e instanceof ShoalError && e.code === 'BAD_REQUEST' && e.param === param;
  assert.throws(() => responseRequestToTask(request({ input: 'x', tool_choice: 'required' }), []), isBad('tool_choice'));
  const tools = [{ type: 'function', name: 'a' }];
  assert.throws(() => responseRequestToTask(request({ input: 'x', tools, tool_choice: { type: 'function', name: 'zz' } }), []), isBad('tool_choice.name'));
  assert.throws(() => responseRequestToTask(request({ input: 'x', tools: [...tools, ...tools] }), []), isBad('tools[1].name'));
});

test('parameters and kinds Shoal does not implement are refused by name', () => {
  refused({ input: 'x', background: true }, 'UNSUPPORTED_PARAMETER', 'background');
  refused({ input: 'x', include: ['reasoning.encrypted_content'] }, 'UNSUPPORTED_PARAMETER', 'include');
  refused({ input: 'x', top_logprobs: 2 }, 'UNSUPPORTED_PARAMETER', 'top_logprobs');
  refused({ input: 'x', conversation: 'conv_1' }, 'UNSUPPORTED_PARAMETER', 'conversation');
  refused({ input: 'x', text: { verbosity: 'low' } }, 'UNSUPPORTED_PARAMETER', 'text.verbosity');
  refused({ input: 'x', reasoning: { effort: 'low', summary: 'auto' } }, 'UNSUPPORTED_PARAMETER', 'reasoning.summary');
  refused({ input: 'x', tools: [{ type: 'web_search' }] }, 'UNSUPPORTED_PARAMETER', 'tools[0].type');
  refused({ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'file_1' }] }] }, 'UNSUPPORTED_PARAMETER', 'input[0].content[0].type');
  refused({ input: [{ type: 'item_reference', id: 'msg_1' }] }, 'UNSUPPORTED_PARAMETER', 'input[0].type');
  refused({ input: 'x', text: { format: { type: 'grammar' } } }, 'UNSUPPORTED_PARAMETER', 'text.format.type');
  refused({ input: 'x', truncation: 'auto' }, 'BAD_REQUEST', 'truncation');
  refused({ input: 'x', tool_choice: { type: 'web_search_preview' } }, 'BAD_REQUEST', 'tool_choice');
  refused({ input: [] }, 'BAD_REQUEST', 'input');
  refused({ input: 'x', metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, 'BAD_REQUEST', 'metadata');
  // Accepted: reasoning effort, parallel_tool_calls, user, truncation 'disabled', store, metadata.
  request({ input: 'x', reasoning: { effort: 'high' }, parallel_tool_calls: false, user: 'u', truncation: 'disabled', store: false, metadata: { a: 'b' } });
});

test('a text answer streams the OpenAI event sequence and ends incomplete at the token limit', () => {
  const { stream, response } = run(
    [
      { type: 'text', text: 'Hel' },
      { type: 'text', text: 'lo' },
      { type: 'end', finishReason: 'length', stopSequence: null, usage },
    ],
    { max_output_tokens: 4, temperature: 0 },
  );
  assertValidStream(stream);
  assert.deepEqual(
    stream.map((e) => e.type),
    [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.output_text.delta',
      'response.output_text.delta',
      'response.output_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.incomplete',
    ],
  );
  assertOpenAIShape('Response', response);
  assert.equal(response.status, 'incomplete');
  assert.deepEqual(response.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(response.completed_at, null);
  assert.deepEqual(response.output, [
    { type: 'message', id: 'msg_0', status: 'incomplete', role: 'assistant', content: [{ type: 'output_text', text: 'Hello', annotations: [], logprobs: [] }] },
  ]);
  assert.deepEqual(response.usage, {
    input_tokens: 10,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
    output_tokens: 4,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 14,
  });
  assert.equal(response.max_output_tokens, 4);
  assert.equal(response.temperature, 0);
  const created = stream[0]!.response as { status: string; output: unknown[]; usage?: unknown };
  assert.equal(created.status, 'in_progress');
  assert.deepEqual(created.output, []);
  assert.equal('usage' in created, false, 'the schema has no null usage, so an unfinished response leaves it out');
});

test("a reused prompt prefix is the usage's cached_tokens, inside input_tokens", () => {
  const { response } = run([{ type: 'text', text: 'a' }, { type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 40, completionTokens: 1, cachedPromptTokens: 31 } }]);
  assertOpenAIShape('Response', response);
  assert.deepEqual(response.usage, {
    input_tokens: 40,
    input_tokens_details: { cached_tokens: 31, cache_write_tokens: 0 },
    output_tokens: 1,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: 41,
  });
  assert.deepEqual(responseUsage({ promptTokens: 3, completionTokens: 0 }).input_tokens_details, { cached_tokens: 0, cache_write_tokens: 0 });
});

test('reasoning and a function call become their own items with their own events', () => {
  const { stream, response } = run(
    [
      { type: 'reasoning', text: 'need ' },
      { type: 'reasoning', text: 'data' },
      { type: 'tool_call', index: 0, id: 'runner-1', name: 'weather' },
      { type: 'tool_call_delta', index: 0, arguments: '{"city":' },
      { type: 'tool_call_delta', index: 0, arguments: '"Oslo"}' },
      { type: 'end', finishReason: 'tool_calls', stopSequence: null, usage },
    ],
    { tools: [{ type: 'function', name: 'weather', parameters: { type: 'object' } }], tool_choice: 'required' },
  );
  assertValidStream(stream);
  assert.deepEqual(
    stream.map((e) => e.type),
    [
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      'response.content_part.added',
      'response.reasoning_text.delta',
      'response.reasoning_text.delta',
      'response.reasoning_text.done',
      'response.content_part.done',
      'response.output_item.done',
      'response.output_item.added',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.delta',
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ],
  );
  assertOpenAIShape('Response', response);
  assert.equal(response.status, 'completed');
  assert.equal(response.completed_at, 1_700_000_005);
  assert.deepEqual(response.output, [
    { type: 'reasoning', id: 'rs_0', summary: [], content: [{ type: 'reasoning_text', text: 'need data' }], status: 'completed' },
    { type: 'function_call', id: 'fc_1', call_id: 'call_2', name: 'weather', arguments: '{"city":"Oslo"}', status: 'completed' },
  ]);
  assert.deepEqual(response.tools, [{ type: 'function', name: 'weather', description: null, parameters: { type: 'object' }, strict: true }]);
  assert.equal(response.tool_choice, 'required');
  // The output, replayed, is one assistant turn the next request can answer with a function_call_output.
  assert.deepEqual(appendItems([{ role: 'user', content: 'q' }], response.output), [
    { role: 'user', content: 'q' },
    { role: 'assistant', content: '', reasoning: 'need data', toolCalls: [{ id: 'call_2', name: 'weather', arguments: '{"city":"Oslo"}' }] },
  ]);
});

test('an empty answer is still one (empty) assistant message', () => {
  const { stream, response } = run([{ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 3, completionTokens: 0 } }]);
  assertValidStream(stream);
  assertOpenAIShape('Response', response);
  assert.deepEqual(response.output, [
    { type: 'message', id: 'msg_0', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: '', annotations: [], logprobs: [] }] },
  ]);
});

test('a failure mid-generation is a response.failed event with an OpenAI error code', () => {
  const a = assembler();
  a.begin();
  a.push({ type: 'text', text: 'partial' });
  const crashed = a.fail(new ShoalError('RUNNER_CRASHED', 'the runner crashed'));
  assert.equal(crashed.events.length, 1);
  assertOpenAIShape('ResponseStreamEvent', crashed.events[0]);
  assert.equal(crashed.events[0]!.type, 'response.failed');
  assert.equal(crashed.response.status, 'failed');
  assert.deepEqual(crashed.response.error, { code: 'server_error', message: 'the runner crashed' });
  assert.equal(crashed.response.output[0]!.status, 'incomplete');
  assert.equal(assembler().fail(new ShoalError('QUEUE_FULL', 'busy')).response.error?.code, 'rate_limit_exceeded');
  assert.equal(assembler().fail(new ShoalError('CONTEXT_OVERFLOW', 'long')).response.error?.code, 'invalid_prompt');
});

test('the response repeats the request settings: format, metadata, user, reasoning, store', () => {
  const schema = { type: 'object', properties: {} };
  const { response } = run([{ type: 'text', text: '{}' }, { type: 'end', finishReason: 'stop', stopSequence: null, usage }], {
    instructions: 'sys',
    text: { format: { type: 'json_schema', name: 'out', schema, strict: true } },
    metadata: { k: 'v' },
    user: 'alice',
    reasoning: { effort: 'low' },
    store: false,
    parallel_tool_calls: false,
    previous_response_id: 'resp_0',
  });
  assertOpenAIShape('Response', response);
  assert.deepEqual(response.text, { format: { type: 'json_schema', name: 'out', schema, strict: true } });
  assert.deepEqual(response.metadata, { k: 'v' });
  assert.equal(response.user, 'alice');
  assert.deepEqual(response.reasoning, { effort: 'low', summary: null });
  assert.equal(response.store, false);
  assert.equal(response.parallel_tool_calls, false);
  assert.equal(response.previous_response_id, 'resp_0');
  assert.equal(response.instructions, 'sys');
  const plain = run([{ type: 'end', finishReason: 'stop', stopSequence: null, usage }]).response;
  assert.equal('user' in plain, false, 'user is a string in the schema, so it is left out when not given');
  assert.deepEqual(plain.metadata, {});
});

test('runner events out of protocol are internal errors, not silently dropped', () => {
  const a = assembler();
  assert.throws(() => a.push({ type: 'tool_call_delta', index: 3, arguments: '{' }), (e: unknown) => e instanceof ShoalError && e.code === 'INTERNAL');
  assert.throws(() => a.push({ type: 'embeddings', vectors: [] }), (e: unknown) => e instanceof ShoalError && e.code === 'INTERNAL');
});

function record(id: string, text = ''): StoredResponse {
  const { response } = run([{ type: 'text', text: text || 'x' }, { type: 'end', finishReason: 'stop', stopSequence: null, usage }]);
  return { response: { ...response, id }, conversation: [{ role: 'user', content: text }] };
}

test('the store evicts the least recently used response first, and reading refreshes recency', () => {
  const store = new ResponseStore({ maxResponses: 3, maxResponseBytes: 1 << 20, maxTotalBytes: 1 << 30 });
  for (const id of ['a', 'b', 'c']) assert.equal(store.put(record(id)), true);
  assert.ok(store.get('a'), 'a is now the most recently used');
  store.put(record('d'));
  assert.equal(store.size, 3);
  assert.equal(store.get('b'), undefined, 'b was the least recently used');
  assert.ok(store.get('a') && store.get('c') && store.get('d'));
  assert.equal(store.delete('c'), true);
  assert.equal(store.delete('c'), false);
  assert.equal(store.get('c'), undefined);
  assert.equal(store.size, 2);
});

test('the store keeps its total bytes under the cap and refuses a record over the per-response cap', () => {
  const one = Buffer.byteLength(JSON.stringify(record('a', 'y'.repeat(1000))));
  const store = new ResponseStore({ maxResponses: 100, maxResponseBytes: one + 10, maxTotalBytes: one * 2 + 10 });
  store.put(record('a', 'y'.repeat(1000)));
  store.put(record('b', 'y'.repeat(1000)));
  assert.equal(store.size, 2);
  store.put(record('c', 'y'.repeat(1000)));
  assert.equal(store.size, 2);
  assert.equal(store.get('a'), undefined, 'the oldest went to make room');
  assert.ok(store.bytes <= one * 2 + 10);
  assert.equal(store.put(record('big', 'y'.repeat(2000))), false);
  assert.equal(store.get('big'), undefined);
  assert.equal(store.size, 2, 'a refused record evicts nothing');
  const before = store.bytes;
  store.put(record('b', 'y'.repeat(1000)));
  assert.equal(store.bytes, before, 'replacing a record does not count it twice');
});

const API_KEY = 'test-key';

/** The routes on a bare server whose runner plays `script`; the tasks it was given are kept in `tasks`. */
async function routesWith(script: (task: RunnerTask) => AsyncIterable<TaskEvent>) {
  const tasks: RunnerTask[] = [];
  const dispatcher: Dispatcher = {
    models: () => [],
    run: (task) => {
      tasks.push(task);
      return script(task);
    },
  };
  const app = Fastify();
  await app.register(responsesRoutes, { dispatcher, apiKeys: new ApiKeys([API_KEY]) });
  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) =>
    app.inject({ method, url, headers: { authorization: `Bearer ${API_KEY}` }, ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }) });
  return { app, tasks, call };
}

async function* answer(): AsyncIterable<TaskEvent> {
  yield { type: 'start', promptTokens: 5 };
  yield { type: 'text', text: 'ok' };
  yield { type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 5, completionTokens: 1 } };
}

function sseEvents(body: string): StreamEvent[] {
  return body
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => JSON.parse(block.split('\n')[1]!.slice('data: '.length)) as StreamEvent);
}

test('a runner failure mid-stream ends the stream with response.failed, and nothing is stored', async () => {
  const { app, call } = await routesWith(async function* () {
    yield { type: 'start', promptTokens: 5 };
    yield { type: 'text', text: 'par' };
    throw new ShoalError('RUNNER_CRASHED', 'the runner crashed: retry');
  });
  const res = await call('POST', '/v1/responses', { model: 'm', input: 'x', stream: true });
  assert.equal(res.statusCode, 200);
  const events = sseEvents(res.body);
  for (const event of events) assertOpenAIShape('ResponseStreamEvent', event);
  const last = events.at(-1)!;
  assert.equal(last.type, 'response.failed');
  const failed = last.response as { id: string; status: string; error: unknown };
  assert.equal(failed.status, 'failed');
  assert.deepEqual(failed.error, { code: 'server_error', message: 'the runner crashed: retry' });
  assert.equal((await call('GET', `/v1/responses/${failed.id}`)).statusCode, 404);
  await app.close();
});

test('previous_response_id puts the stored turn, without its instructions, before the new input', async () => {
  const { app, tasks, call } = await routesWith(answer);
  const first = (await call('POST', '/v1/responses', { model: 'm', input: 'one', instructions: 'old rules' })).json<{ id: string }>();
  const second = await call('POST', '/v1/responses', { model: 'm', input: 'two', instructions: 'new rules', previous_response_id: first.id });
  assert.equal(second.statusCode, 200);
  const prompt = tasks[1]!.kind === 'generate' ? tasks[1]!.prompt : null;
  assert.deepEqual(prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: 'new rules' },
      { role: 'user', content: 'one' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: 'two' },
    ],
  });
  const missing = await call('POST', '/v1/responses', { model: 'm', input: 'x', previous_response_id: 'resp_gone' });
  assert.equal(missing.statusCode, 404);
  assertOpenAIShape('ErrorResponse', missing.json());
  assert.equal(tasks.length, 2, 'nothing runs for an unknown previous response');
  await app.close();
});

test('the routes check the API key and refuse query parameters they do not implement', async () => {
  const { app, call } = await routesWith(answer);
  const anonymous = await app.inject({ method: 'POST', url: '/v1/responses', payload: { model: 'm', input: 'x' } });
  assert.equal(anonymous.statusCode, 401);
  assertOpenAIShape('ErrorResponse', anonymous.json());
  const { id } = (await call('POST', '/v1/responses', { model: 'm', input: 'x' })).json<{ id: string }>();
  const streamed = await call('GET', `/v1/responses/${id}?stream=true`);
  assert.equal(streamed.statusCode, 400);
  assert.equal(streamed.json<{ error: { param: string } }>().error.param, 'stream');
  assert.equal((await call('DELETE', `/v1/responses/${id}`)).json<{ deleted: boolean }>().deleted, true);
  const again = await call('DELETE', `/v1/responses/${id}`);
  assert.equal(again.statusCode, 404);
  assertOpenAIShape('ErrorResponse', again.json());
  await app.close();
});

test('input_image parts of user messages become the message images, and stored history counts toward the limits', () => {
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2]).toString('base64');
  const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xdb, 5]).toString('base64');
  const image = (data: string, detail?: string) => ({ type: 'input_image', image_url: `data:image/jpeg;base64,${data}`, ...(detail ? { detail } : {}) });
  const { task, conversation } = responseRequestToTask(
    request({ input: [{ role: 'user', content: [{ type: 'input_text', text: 'compare ' }, image(png, 'low'), image(jpeg), { type: 'input_text', text: 'these' }] }] }),
    [],
  );
  const images = [{ mediaType: 'image/png', data: png }, { mediaType: 'image/jpeg', data: jpeg }];
  assert.deepEqual(task.prompt, { kind: 'chat', messages: [{ role: 'user', content: 'compare these', images }] });
  // The stored conversation keeps them, so a follow-up with previous_response_id still shows them to the model.
  assert.deepEqual(conversation, [{ role: 'user', content: 'compare these', images }]);

  const refusedAs = (input: unknown, history: ChatMessage[], code: string, param: string, message: RegExp) =>
    assert.throws(
      () => responseRequestToTask(request({ input }), history),
      (e: unknown) => e instanceof ShoalError && e.code === code && e.param === param && message.test(e.message),
      `${code} ${param}`,
    );
  const user = (...content: unknown[]) => [{ role: 'user', content }];
  refusedAs(user({ type: 'input_image', image_url: 'https://example.com/a.png' }), [], 'BAD_REQUEST', 'input[0].content[0].image_url', /send the image inline as a data URL/);
  refusedAs(user({ type: 'input_image', file_id: 'file_1' }), [], 'UNSUPPORTED_PARAMETER', 'input[0].content[0].file_id', /no Files API/);
  refusedAs(user({ type: 'input_image', detail: 'auto' }), [], 'BAD_REQUEST', 'input[0].content[0].image_url', /needs image_url/);
  refusedAs(user(image(Buffer.from('GIF8').toString('base64'))), [], 'BAD_REQUEST', 'input[0].content[0].image_url', /not an image/);
  refusedAs(user(image(Buffer.alloc(8 * 1024 * 1024 + 1, 0xff).toString('base64'))), [], 'PAYLOAD_TOO_LARGE', 'input[0].content[0].image_url', /limit per image/);
  refusedAs([{ role: 'system', content: [image(png)] }], [], 'BAD_REQUEST', 'input[0].content[0]', /images go in user messages/);
  refusedAs([{ role: 'assistant', content: [image(png)] }], [], 'BAD_REQUEST', 'input[0].content[0]', /images go in user messages/);
  const full: ChatMessage[] = [{ role: 'user', content: 'x', images: Array.from({ length: 16 }, () => ({ mediaType: 'image/png' as const, data: png })) }];
  refusedAs(user(image(png)), full, 'BAD_REQUEST', 'input[0].content[0].image_url', /at most 16 images/);
  // Text follow-ups to a conversation at the limit still work.
  responseRequestToTask(request({ input: 'and now?' }), full);
});
