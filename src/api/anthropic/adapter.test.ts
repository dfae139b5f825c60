import assert from 'node:assert/strict';
import { test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import { ERROR_CODES, ShoalError } from '../../common/errors.js';
import type { TaskEvent } from '../../wire/task.js';
import { parseBody } from '../validation.js';
import { toAnthropicError } from './errors.js';
import { BLOCK_SEPARATOR, countRequestToTask, messagesRequestToTask, TOOL_ERROR_PREFIX } from './normalize.js';
import { CountTokensRequest, MessagesRequest } from './schemas.js';
import {
  ContentAssembler,
  messageBody,
  messageEndEvents,
  messageStartEvent,
  sseFrame,
  toAnthropicUsage,
  toStopReason,
  type ContentEvent,
  type StreamEvent,
} from './serialize.js';

const base = { model: 'shoal/tiny', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] };
const weather = { name: 'get_weather', description: 'Weather for a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };

function refusedAs(param: string, code: 'BAD_REQUEST' | 'UNSUPPORTED_PARAMETER') {
  return (error: unknown): boolean => {
    assert.ok(error instanceof ShoalError, `expected a ShoalError, got ${String(error)}`);
    assert.equal(error.code, code);
    assert.equal(error.param, param);
    assert.match(error.message, new RegExp(param.replace(/[[\].]/g, '\\$&')));
    return true;
  };
}

test('a plain request normalizes to a chat task with Anthropic defaults', () => {
  const task = messagesRequestToTask(parseBody(MessagesRequest, { ...base, system: 'be brief', stop_sequences: ['END'], temperature: 0, top_p: 0.5 }));
  assert.deepEqual(task, {
    kind: 'generate',
    model: 'shoal/tiny',
    prompt: {
      kind: 'chat',
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi' },
      ],
    },
    sampling: { maxTokens: 16, temperature: 0, topP: 0.5, seed: null, presencePenalty: 0, frequencyPenalty: 0 },
    stop: ['END'],
    tools: [],
    toolChoice: { mode: 'auto' },
    format: { kind: 'text' },
    logprobs: null,
  });
  const defaults = messagesRequestToTask(parseBody(MessagesRequest, base));
  assert.equal(defaults.sampling.temperature, 1);
  assert.equal(defaults.sampling.topP, 1);
  assert.deepEqual(defaults.stop, []);
});

test('system blocks, multi-turn text blocks, thinking, tool_use and tool_result map to task messages in order', () => {
  const body = parseBody(MessagesRequest, {
    ...base,
    system: [{ type: 'text', text: 'one' }, { type: 'text', text: 'two' }],
    tools: [weather],
    thinking: { type: 'enabled', budget_tokens: 1024 },
    metadata: { user_id: 'u-1' },
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'weather in' }, { type: 'text', text: 'Paris?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'need the tool', signature: '' },
          { type: 'text', text: 'Let me check.', citations: null },
          { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'sunny' }] },
          { type: 'tool_result', tool_use_id: 'toolu_unknown', content: 'boom', is_error: true },
          { type: 'text', text: 'and tomorrow?' },
        ],
      },
      { role: 'assistant', content: 'Tomorrow it' },
    ],
  });
  const task = messagesRequestToTask(body);
  assert.deepEqual(task.prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: `one${BLOCK_SEPARATOR}two` },
      { role: 'user', content: `weather in${BLOCK_SEPARATOR}Paris?` },
      {
        role: 'assistant',
        content: 'Let me check.',
        reasoning: 'need the tool',
        toolCalls: [{ id: 'toolu_1', name: 'get_weather', arguments: '{"city":"Paris"}' }],
      },
      { role: 'tool', toolCallId: 'toolu_1', name: 'get_weather', content: 'sunny' },
      { role: 'tool', toolCallId: 'toolu_unknown', content: `${TOOL_ERROR_PREFIX}boom` },
      { role: 'user', content: 'and tomorrow?' },
      { role: 'assistant', content: 'Tomorrow it' },
    ],
  });
  assert.deepEqual(task.tools, [{ name: 'get_weather', description: 'Weather for a city', parameters: weather.input_schema }]);
  assert.deepEqual(task.toolChoice, { mode: 'auto' });
});

test('tool_choice maps to the task’s modes and is checked against the tools', () => {
  const choice = (tool_choice: unknown, tools: unknown[] = [weather]) => messagesRequestToTask(parseBody(MessagesRequest, { ...base, tools, tool_choice })).toolChoice;
  assert.deepEqual(choice({ type: 'auto', disable_parallel_tool_use: false }), { mode: 'auto' });
  assert.deepEqual(choice({ type: 'any', disable_parallel_tool_use: true }), { mode: 'required' });
  assert.deepEqual(choice({ type: 'tool', name: 'get_weather' }), { mode: 'tool', name: 'get_weather' });
  assert.deepEqual(choice({ type: 'none' }), { mode: 'none' });
  assert.throws(() => choice({ type: 'tool', name: 'nope' }), refusedAs('tool_choice.name', 'BAD_REQUEST'));
  assert.throws(() => choice({ type: 'any' }, []), refusedAs('tool_choice', 'BAD_REQUEST'));
  assert.throws(() => choice({ type: 'auto', disable_parallel_tool_use: true }), refusedAs('tool_choice.disable_parallel_tool_use', 'BAD_REQUEST'));
  assert.throws(() => choice({ type: 'auto' }, [weather, weather]), refusedAs('tools[1].name', 'BAD_REQUEST'));
});

test('unsupported parameters and block types are refused by name', () => {
  const refuse = (extra: Record<string, unknown>, param: string, code: 'BAD_REQUEST' | 'UNSUPPORTED_PARAMETER' = 'UNSUPPORTED_PARAMETER') =>
    assert.throws(() => parseBody(MessagesRequest, { ...base, ...extra }), refusedAs(param, code));
  refuse({ top_k: 5 }, 'top_k');
  refuse({ service_tier: 'auto' }, 'service_tier');
  refuse({ metadata: { user_id: 'u', tenant: 'x' } }, 'metadata.tenant');
  refuse({ messages: [{ role: 'user', content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral' } }] }] }, 'messages[0].content[0].cache_control');
  refuse({ messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] }, 'messages[0].content[0].type', 'BAD_REQUEST');
  refuse({ messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }, 'messages[0].content[0].source.type', 'BAD_REQUEST');
  refuse({ messages: [{ role: 'system', content: 'x' }] }, 'messages[0].role', 'BAD_REQUEST');
  refuse({ messages: [{ role: 'user', content: [] }] }, 'messages[0].content', 'BAD_REQUEST');
  refuse({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] }, 'tools[0].type', 'BAD_REQUEST');
  refuse({ tools: [{ ...weather, input_schema: { type: 'string' } }] }, 'tools[0].input_schema.type', 'BAD_REQUEST');
  refuse({ thinking: { type: 'adaptive' } }, 'thinking.type', 'BAD_REQUEST');
  refuse({ temperature: 1.5 }, 'temperature', 'BAD_REQUEST');
  assert.throws(() => parseBody(MessagesRequest, { model: 'm', messages: base.messages }), refusedAs('max_tokens', 'BAD_REQUEST'));
  assert.throws(() => parseBody(CountTokensRequest, { ...base }), refusedAs('max_tokens', 'UNSUPPORTED_PARAMETER'));
});

test('count_tokens requests normalize to a count task with the same prompt as a generation', () => {
  const request = { model: 'm', system: 'sys', messages: [{ role: 'user', content: 'hi' }], tools: [weather] };
  const count = countRequestToTask(parseBody(CountTokensRequest, request));
  const generate = messagesRequestToTask(parseBody(MessagesRequest, { ...request, max_tokens: 1 }));
  assert.deepEqual(count, { kind: 'count', model: 'm', prompt: generate.prompt, tools: generate.tools });
});

test('every error code maps to an Anthropic error type and status', () => {
  const allowed = new Map([
    ['invalid_request_error', [400, 499]],
    ['authentication_error', [401]],
    ['permission_error', [403]],
    ['not_found_error', [404]],
    ['request_too_large', [413]],
    ['api_error', [500]],
    ['timeout_error', [504]],
    ['overloaded_error', [529]],
  ]);
  for (const code of ERROR_CODES) {
    const mapped = toAnthropicError(new ShoalError(code, `message for ${code}`));
    assert.deepEqual(Object.keys(mapped.body), ['type', 'error']);
    assert.equal(mapped.body.type, 'error');
    assert.deepEqual(mapped.body.error, { type: mapped.body.error.type, message: `message for ${code}` });
    assert.ok(allowed.get(mapped.body.error.type)?.includes(mapped.status), `${code} → ${mapped.status} ${mapped.body.error.type}`);
  }
  assert.equal(toAnthropicError(new ShoalError('MODEL_NOT_FOUND', 'x')).status, 404);
  assert.equal(toAnthropicError(new ShoalError('UNAUTHORIZED', 'x')).body.error.type, 'authentication_error');
  assert.equal(toAnthropicError(new ShoalError('FORBIDDEN', 'x')).body.error.type, 'permission_error');
  assert.equal(toAnthropicError(new ShoalError('QUEUE_FULL', 'x')).headers['retry-after'], '1');
});

const generation: ContentEvent[] = [
  { type: 'reasoning', text: 'hmm ' },
  { type: 'reasoning', text: 'ok' },
  { type: 'text', text: 'Sure' },
  { type: 'text', text: '' },
  { type: 'text', text: ', calling.' },
  { type: 'tool_call', index: 0, id: 'call_1', name: 'get_weather' },
  { type: 'tool_call_delta', index: 0, arguments: '{"city":' },
  { type: 'tool_call_delta', index: 0, arguments: '"Paris"}' },
];

function assemble(events: ContentEvent[]): { assembler: ContentAssembler; streamed: StreamEvent[] } {
  const assembler = new ContentAssembler();
  const streamed = events.flatMap((event) => assembler.push(event));
  streamed.push(...assembler.finish());
  return { assembler, streamed };
}

test('content events become indexed blocks in order, with a ping after the first block starts', () => {
  const { assembler, streamed } = assemble(generation);
  assert.deepEqual(streamed, [
    { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
    { type: 'ping' },
    { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'hmm ' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'ok' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'content_block_start', index: 1, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: 'Sure' } },
    { type: 'content_block_delta', index: 1, delta: { type: 'text_delta', text: ', calling.' } },
    { type: 'content_block_stop', index: 1 },
    { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'call_1', name: 'get_weather', input: {} } },
    { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"city":' } },
    { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '"Paris"}' } },
    { type: 'content_block_stop', index: 2 },
  ]);
  assert.deepEqual(assembler.content('tool_calls'), [
    { type: 'thinking', thinking: 'hmm ok', signature: '' },
    { type: 'text', text: 'Sure, calling.' },
    { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } },
  ]);
});

test('an empty answer still has one text block; truncated or broken tool arguments are handled', () => {
  const empty = assemble([]);
  assert.deepEqual(empty.assembler.content('stop'), [{ type: 'text', text: '' }]);
  assert.deepEqual(empty.streamed.map((e) => e.type), ['content_block_start', 'ping', 'content_block_stop']);

  const cut = assemble([{ type: 'tool_call', index: 0, id: 'c', name: 't' }, { type: 'tool_call_delta', index: 0, arguments: '{"city": "Par' }]);
  assert.deepEqual(cut.assembler.content('length'), [{ type: 'tool_use', id: 'c', name: 't', input: {} }]);
  assert.throws(() => cut.assembler.content('tool_calls'), (e: unknown) => e instanceof ShoalError && e.code === 'INTERNAL');

  const late = new ContentAssembler();
  late.push({ type: 'tool_call', index: 0, id: 'a', name: 't' });
  late.push({ type: 'text', text: 'between' });
  assert.throws(() => late.push({ type: 'tool_call_delta', index: 0, arguments: '{}' }), (e: unknown) => e instanceof ShoalError && e.code === 'INTERNAL');
});

test('finish reasons map to stop reasons, naming the stop sequence that ended the answer', () => {
  assert.equal(toStopReason({ finishReason: 'stop', stopSequence: null }), 'end_turn');
  assert.equal(toStopReason({ finishReason: 'stop', stopSequence: 'END' }), 'stop_sequence');
  assert.equal(toStopReason({ finishReason: 'length', stopSequence: null }), 'max_tokens');
  assert.equal(toStopReason({ finishReason: 'tool_calls', stopSequence: null }), 'tool_use');
  assert.deepEqual(messageEndEvents({ finishReason: 'stop', stopSequence: 'END' }, { promptTokens: 3, completionTokens: 7 })[0], {
    type: 'message_delta', delta: { stop_reason: 'stop_sequence', stop_sequence: 'END' },
    usage: { input_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 7 },
  });
  assert.deepEqual(messageEndEvents({ finishReason: 'length', stopSequence: null }, { promptTokens: 3, completionTokens: 7 }), [
    { type: 'message_delta', delta: { stop_reason: 'max_tokens', stop_sequence: null }, usage: { input_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 7 } },
    { type: 'message_stop' },
  ]);
});

test("a reused prompt prefix is Anthropic's cache read, apart from input_tokens; the three add up to the prompt", () => {
  assert.deepEqual(toAnthropicUsage({ promptTokens: 40, completionTokens: 5, cachedPromptTokens: 31 }), {
    input_tokens: 9,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 31,
    output_tokens: 5,
  });
  assert.deepEqual(toAnthropicUsage({ promptTokens: 40, completionTokens: 5 }), { input_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 5 });
  const start = messageStartEvent({ id: 'msg_1', model: 'm' }, 40);
  assert.ok(start.type === 'message_start');
  assert.deepEqual(start.message.usage, { input_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 });
});

test('CR and LF in streamed text cannot forge SSE lines', () => {
  const frame = sseFrame({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'a\r\n\r\nevent: message_stop\ndata: {}\n\n' } });
  const lines = frame.split(/\r\n|\r|\n/);
  assert.deepEqual(lines.slice(2), ['', '']);
  assert.equal(lines[0], 'event: content_block_delta');
  assert.ok(lines[1]!.startsWith('data: {'));
});

/** Runs the official SDK's stream accumulator over our SSE frames, without a network. */
async function sdkFinalMessage(frames: string): Promise<Anthropic.Message> {
  const client = new Anthropic({
    apiKey: 'x',
    maxRetries: 0,
    fetch: async () => new Response(frames, { status: 200, headers: { 'content-type': 'text/event-stream' } }),
  });
  return client.messages.stream({ model: 'shoal/tiny', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }).finalMessage();
}

test('the official SDK accumulates the stream into the same message as the non-stream body', async () => {
  const meta = { id: 'msg_1', model: 'shoal/tiny' };
  const { assembler, streamed } = assemble(generation);
  // A cache hit: the start counts the whole prompt as input, the end moves the reused part to the cache read.
  const end: Extract<TaskEvent, { type: 'end' }> = { type: 'end', finishReason: 'tool_calls', stopSequence: null, usage: { promptTokens: 11, completionTokens: 9, cachedPromptTokens: 8 } };
  const events = [messageStartEvent(meta, 11), ...streamed, ...messageEndEvents(end, end.usage)];
  const final = await sdkFinalMessage(events.map(sseFrame).join(''));
  const body = messageBody(meta, assembler.content(end.finishReason), end, toAnthropicUsage(end.usage));
  assert.deepEqual(body.usage, { input_tokens: 3, cache_creation_input_tokens: 0, cache_read_input_tokens: 8, output_tokens: 9 });
  // The SDK adds its own fields (parsed_output, stop_details); every field Shoal sends must match.
  const sent = Object.fromEntries(Object.keys(body).map((key) => [key, final[key as keyof typeof final]]));
  assert.deepEqual({ ...sent, content: final.content.map((block) => ({ ...block })) }, body);
});

test('an error event mid-stream reaches the SDK as an APIError of the right type', async () => {
  const events: StreamEvent[] = [messageStartEvent({ id: 'msg_1', model: 'm' }, 1), toAnthropicError(new ShoalError('RUNNER_CRASHED', 'the runner crashed')).body];
  await assert.rejects(sdkFinalMessage(events.map(sseFrame).join('')), (error: unknown) => {
    assert.ok(error instanceof Anthropic.APIError);
    assert.equal((error.error as { error: { type: string } }).error.type, 'api_error');
    assert.match(error.message, /the runner crashed/);
    return true;
  });
});

test('image blocks become the user message images, before its text, split by tool results as text is', () => {
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2]).toString('base64');
  const webp = Buffer.concat([Buffer.from('RIFF'), Buffer.from([4, 0, 0, 0]), Buffer.from('WEBP')]).toString('base64');
  const image = (data: string, media_type = 'image/png') => ({ type: 'image', source: { type: 'base64', media_type, data } });
  const task = messagesRequestToTask(
    parseBody(MessagesRequest, {
      ...base,
      tools: [weather],
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'look' }, image(png), { type: 'text', text: 'and this' }, image(webp, 'image/jpeg')] },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'get_weather', input: { city: 'Oslo' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'rain' }, image(png), { type: 'text', text: 'now?' }] },
      ],
    }),
  );
  assert.deepEqual(task.prompt, {
    kind: 'chat',
    messages: [
      { role: 'user', content: `look${BLOCK_SEPARATOR}and this`, images: [{ mediaType: 'image/png', data: png }, { mediaType: 'image/webp', data: webp }] },
      { role: 'assistant', content: '', toolCalls: [{ id: 't1', name: 'get_weather', arguments: '{"city":"Oslo"}' }] },
      { role: 'tool', toolCallId: 't1', name: 'get_weather', content: 'rain' },
      { role: 'user', content: 'now?', images: [{ mediaType: 'image/png', data: png }] },
    ],
  });
  // count_tokens reads the same images.
  assert.deepEqual(countRequestToTask(parseBody(CountTokensRequest, { model: 'm', messages: [{ role: 'user', content: [image(png)] }] })).prompt, {
    kind: 'chat',
    messages: [{ role: 'user', content: '', images: [{ mediaType: 'image/png', data: png }] }],
  });

  const refuse = (block: unknown, param: string, code: string, message: RegExp) =>
    assert.throws(
      () => messagesRequestToTask(parseBody(MessagesRequest, { ...base, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, block] }] })),
      (error: unknown) => error instanceof ShoalError && error.code === code && error.param === param && message.test(error.message),
      `${code} ${param}`,
    );
  refuse({ type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }, 'messages[0].content[1].source.type', 'UNSUPPORTED_PARAMETER', /url image sources are not supported; send the image as source.type 'base64'/);
  refuse({ type: 'image', source: { type: 'file', file_id: 'file_1' } }, 'messages[0].content[1].source.type', 'UNSUPPORTED_PARAMETER', /file image sources/);
  refuse(image(Buffer.from('not an image').toString('base64')), 'messages[0].content[1].source.data', 'BAD_REQUEST', /not an image/);
  refuse(image(Buffer.alloc(8 * 1024 * 1024 + 1, 0x89).toString('base64')), 'messages[0].content[1].source.data', 'PAYLOAD_TOO_LARGE', /limit per image/);
  refuse(image(png, 'image/bmp'), 'messages[0].content[1].source.media_type', 'BAD_REQUEST', /image\/jpeg, image\/png, image\/gif or image\/webp/);
  refuse({ ...image(png), cache_control: { type: 'ephemeral' } }, 'messages[0].content[1].cache_control', 'UNSUPPORTED_PARAMETER', /unsupported parameter/);
  // Images go in user turns; a tool result stays text.
  assert.throws(() => parseBody(MessagesRequest, { ...base, messages: [{ role: 'assistant', content: [image(png)] }] }), refusedAs('messages[0].content[0].type', 'BAD_REQUEST'));
  assert.throws(
    () => parseBody(MessagesRequest, { ...base, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [image(png)] }] }] }),
    refusedAs('messages[0].content[0].content[0].type', 'BAD_REQUEST'),
  );
  const many = Array.from({ length: 17 }, () => image(png));
  assert.throws(
    () => messagesRequestToTask(parseBody(MessagesRequest, { ...base, messages: [{ role: 'user', content: many.slice(0, 9) }, { role: 'assistant', content: 'ok' }, { role: 'user', content: many.slice(9) }] })),
    (error: unknown) => error instanceof ShoalError && error.code === 'BAD_REQUEST' && error.param === 'messages[2].content[7].source.data',
  );
});
