import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../../common/errors.js';
import { TaskEvent, type InferenceTask } from '../../wire/task.js';
import {
  chatCountBody,
  chatMessages,
  chatRequestBody,
  completionRequestBody,
  serverError,
  SseDecoder,
  StreamTranslator,
  toolPlan,
  type ToolPlan,
} from './llama-server-protocol.js';

const WEATHER = { name: 'get_weather', description: 'Weather by city', parameters: { type: 'object', properties: { city: { type: 'string' } } } };
const CLOCK = { name: 'get_time', parameters: { type: 'object', properties: {} } };

function task(extra: Partial<InferenceTask> = {}): InferenceTask {
  return {
    kind: 'generate',
    model: 'm',
    prompt: { kind: 'chat', messages: [{ role: 'user', content: 'hi' }] },
    sampling: { maxTokens: 16, temperature: 0, topP: 0.9, seed: 7, presencePenalty: 0.5, frequencyPenalty: 0.25 },
    stop: [],
    tools: [],
    toolChoice: { mode: 'auto' },
    format: { kind: 'text' },
    logprobs: null,
    ...extra,
  };
}

type ChatTask = InferenceTask & { prompt: { kind: 'chat' } };

// ---------------------------------------------------------------------------------------------
// Tool plans and bodies

test('tools are native only for chat prompts whose template renders them', () => {
  assert.deepEqual(toolPlan(task(), true), { mode: 'off', native: false });
  assert.deepEqual(toolPlan(task({ tools: [WEATHER], toolChoice: { mode: 'none' } }), true), { mode: 'off', native: false });
  assert.deepEqual(toolPlan(task({ tools: [WEATHER] }), true), { mode: 'lazy', native: true });
  assert.deepEqual(toolPlan(task({ tools: [WEATHER] }), false), { mode: 'lazy', native: false });
  assert.deepEqual(toolPlan(task({ tools: [WEATHER], toolChoice: { mode: 'required' } }), true), { mode: 'forced', native: true });
  assert.deepEqual(toolPlan(task({ tools: [WEATHER], prompt: { kind: 'text', text: 'x' } }), true), { mode: 'lazy', native: false });
});

test('a chat body carries sampling the way the llama_cpp engine samples, and usage in the stream', () => {
  const body = chatRequestBody(task() as ChatTask, { mode: 'off', native: false }, 16);
  assert.deepEqual(body, {
    messages: [{ role: 'user', content: 'hi' }],
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 16,
    cache_prompt: true,
    temperature: 0,
    // Greedy: top-p would not matter, and is neutral.
    top_p: 1,
    top_k: 0,
    min_p: 0,
    seed: 7,
    presence_penalty: 0.5,
    frequency_penalty: 0.25,
    repeat_penalty: 1,
  });
  const sampled = chatRequestBody(task({ sampling: { ...task().sampling, temperature: 0.7, seed: null } }) as ChatTask, { mode: 'off', native: false }, 16);
  assert.equal(sampled.top_p, 0.9);
  assert.equal(typeof sampled.seed, 'number');
  assert.equal('repeat_last_n' in body, false, 'absent, the server\'s window (64) applies, as in the llama_cpp engine');
  // llama.cpp's own samplers, when the task sets them (the Ollama API does).
  const samplers = chatRequestBody(task({ sampling: { ...task().sampling, topK: 1, minP: 0.1, repeatPenalty: 1.3, repeatLastN: 32 } }) as ChatTask, { mode: 'off', native: false }, 16);
  assert.deepEqual([samplers.top_k, samplers.min_p, samplers.repeat_penalty, samplers.repeat_last_n], [1, 0.1, 1.3, 32]);
});

test('stop sequences ask for the verbose block, which names the matched stop', () => {
  const body = chatRequestBody(task({ stop: ['END'] }) as ChatTask, { mode: 'off', native: false }, 16);
  assert.deepEqual(body.stop, ['END']);
  assert.equal(body.verbose, true);
});

test('native tools: OpenAI tool definitions; a named choice offers that tool alone, required', () => {
  const auto = chatRequestBody(task({ tools: [WEATHER, CLOCK] }) as ChatTask, { mode: 'lazy', native: true }, 16);
  assert.equal(auto.tool_choice, 'auto');
  assert.deepEqual(auto.tools, [
    { type: 'function', function: { name: 'get_weather', description: 'Weather by city', parameters: WEATHER.parameters } },
    { type: 'function', function: { name: 'get_time', parameters: CLOCK.parameters } },
  ]);
  const named = chatRequestBody(task({ tools: [WEATHER, CLOCK], toolChoice: { mode: 'tool', name: 'get_time' } }) as ChatTask, { mode: 'forced', native: true }, 16);
  assert.equal(named.tool_choice, 'required');
  assert.deepEqual((named.tools as Array<{ function: { name: string } }>).map((t) => t.function.name), ['get_time']);
  assert.throws(
    () => chatRequestBody(task({ tools: [WEATHER], toolChoice: { mode: 'tool', name: 'nope' } }) as ChatTask, { mode: 'forced', native: true }, 16),
    (e: unknown) => e instanceof ShoalError && e.code === 'BAD_REQUEST' && e.param === 'tool_choice',
  );
});

test("Shoal's tool convention: instructions in the system turn, an internal stop at the call's end, a schema when a call is required", () => {
  const lazy = chatRequestBody(task({ tools: [WEATHER] }) as ChatTask, { mode: 'lazy', native: false }, 16);
  const messages = lazy.messages as Array<{ role: string; content: string }>;
  assert.equal(messages[0]!.role, 'system');
  assert.match(messages[0]!.content, /<tools>[\s\S]*get_weather[\s\S]*<\/tools>/);
  assert.equal(messages.at(-1)!.role, 'user', 'llama-server opens the reply itself');
  assert.equal(lazy.tools, undefined);
  assert.deepEqual(lazy.stop, ['</tool_call>']);

  const forced = chatRequestBody(task({ tools: [WEATHER], toolChoice: { mode: 'required' } }) as ChatTask, { mode: 'forced', native: false }, 16);
  const format = forced.response_format as { type: string; json_schema: { schema: { properties: Record<string, unknown> } } };
  assert.equal(format.type, 'json_schema');
  assert.deepEqual(format.json_schema.schema.properties.name, { const: 'get_weather' });
  assert.equal(forced.stop, undefined);
});

test('replayed calls and tool results travel as OpenAI messages natively, as tagged text otherwise', () => {
  const messages = [
    { role: 'user' as const, content: 'weather?' },
    { role: 'assistant' as const, content: '', toolCalls: [{ id: 'c1', name: 'get_weather', arguments: '{"city":"Oslo"}' }] },
    { role: 'tool' as const, toolCallId: 'c1', content: 'rain' },
  ];
  assert.deepEqual(chatMessages(messages, [WEATHER], { mode: 'auto' }, true), [
    { role: 'user', content: 'weather?' },
    { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: 'rain' },
  ]);
  const converted = chatMessages(messages, [WEATHER], { mode: 'auto' }, false);
  assert.deepEqual(
    converted.map((m) => m.role),
    ['system', 'user', 'assistant', 'user'],
  );
  assert.match(String(converted[2]!.content), /<tool_call>\n\{"name":"get_weather","arguments":\{"city":"Oslo"\}\}\n<\/tool_call>/);
  assert.match(String(converted[3]!.content), /<tool_response>\nrain\n<\/tool_response>/);
});

test('JSON formats become schemas the server enforces (json_object alone constrains nothing there)', () => {
  const json = chatRequestBody(task({ format: { kind: 'json' } }) as ChatTask, { mode: 'off', native: false }, 16);
  assert.deepEqual(json.response_format, { type: 'json_schema', json_schema: { name: 'response', schema: { type: 'object' } } });
  const schema = { type: 'object', properties: { a: { type: 'number' } } };
  const completion = completionRequestBody(task({ format: { kind: 'json_schema', schema } }), { mode: 'off', native: false }, [1, 2, 3], 8);
  assert.deepEqual(completion.json_schema, schema);
  assert.deepEqual(completion.prompt, [1, 2, 3]);
  assert.equal(completion.n_predict, 8);
});

test('log probabilities: at least one alternative is asked for, or the server sends none', () => {
  const chat = chatRequestBody(task({ logprobs: { top: 0 } }) as ChatTask, { mode: 'off', native: false }, 16);
  assert.equal(chat.logprobs, true);
  assert.equal(chat.top_logprobs, 1);
  const completion = completionRequestBody(task({ logprobs: { top: 3 } }), { mode: 'off', native: false }, [1], 8);
  assert.equal(completion.n_probs, 3);
});

test('a count body renders tools like the generation would', () => {
  const prompt = { kind: 'chat' as const, messages: [{ role: 'user' as const, content: 'hi' }] };
  assert.equal(chatCountBody(prompt, [WEATHER], { mode: 'auto' }, true).tools !== undefined, true);
  const ours = chatCountBody(prompt, [WEATHER], { mode: 'auto' }, false);
  assert.equal(ours.tools, undefined);
  assert.match(JSON.stringify(ours.messages), /get_weather/);
});

// ---------------------------------------------------------------------------------------------
// SSE

test('SSE: payloads split at any byte, comments and other fields skipped, multi-line data joined, an unterminated event flushed', () => {
  const stream = Buffer.from(': ping\n\nevent: x\ndata: {"a":"žluť 🦀"}\n\ndata: first\r\ndata: second\n\ndata\ndata:\n\ndatum: no\ndata: [DONE]\n\ndata: tail');
  for (const size of [1, 2, 3, 7, stream.length]) {
    const decoder = new SseDecoder();
    const out: string[] = [];
    for (let i = 0; i < stream.length; i += size) out.push(...decoder.push(stream.subarray(i, i + size)));
    out.push(...decoder.flush());
    assert.deepEqual(out, ['{"a":"žluť 🦀"}', 'first\nsecond', '\n', '[DONE]', 'tail'], `chunks of ${size}`);
  }
});

// ---------------------------------------------------------------------------------------------
// Stream translation

const OFF: ToolPlan = { mode: 'off', native: false };

function translate(plan: ToolPlan, chunks: unknown[], kind: 'chat' | 'completion', extra: Partial<ConstructorParameters<typeof StreamTranslator>[0]> = {}): TaskEvent[] {
  let n = 0;
  const translator = new StreamTranslator({ plan, userStops: [], logprobsTop: null, promptTokens: 5, newCallId: () => `call_${n++}`, ...extra });
  const events = chunks.flatMap((chunk) => (kind === 'chat' ? translator.chatChunk(chunk) : translator.completionChunk(chunk)));
  assert.equal(translator.done, true, 'the final chunk was not recognized');
  return [...events, ...translator.finish()].map((event) => TaskEvent.parse(event));
}

const delta = (d: Record<string, unknown>, finish: string | null = null): unknown => ({ choices: [{ index: 0, delta: d, finish_reason: finish }] });
const usage = (prompt: number, completion: number): unknown => ({ choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } });

test('completion chunks: text, then an end with the server usage; the length reason when the limit hit', () => {
  const events = translate(OFF, [{ content: 'Hel', stop: false }, { content: 'lo', stop: false }, { content: '', stop: true, stop_type: 'limit', tokens_predicted: 2, tokens_evaluated: 5 }], 'completion');
  assert.deepEqual(events, [
    { type: 'text', text: 'Hel' },
    { type: 'text', text: 'lo' },
    { type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens: 5, completionTokens: 2 } },
  ]);
});

test("the matched stop is reported only when it is the task's own", () => {
  const final = { content: '', stop: true, stop_type: 'word', stopping_word: 'END', tokens_predicted: 3, tokens_evaluated: 5 };
  const own = translate(OFF, [{ content: 'a', stop: false }, final], 'completion', { userStops: ['END'] });
  assert.deepEqual(own.at(-1), { type: 'end', finishReason: 'stop', stopSequence: 'END', usage: { promptTokens: 5, completionTokens: 3 } });
  const internal = translate(OFF, [{ content: 'a', stop: false }, final], 'completion', { userStops: [] });
  assert.equal((internal.at(-1) as { stopSequence: unknown }).stopSequence, null);
  // Chat: the verbose block of the final chunk says it.
  const chat = translate(OFF, [delta({ content: 'x' }), { ...(delta({}, 'stop') as object), __verbose: { stop_type: 'word', stopping_word: 'END' } }, usage(5, 2)], 'chat', {
    userStops: ['END'],
  });
  assert.deepEqual(chat.at(-1), { type: 'end', finishReason: 'stop', stopSequence: 'END', usage: { promptTokens: 5, completionTokens: 2 } });
});

test('chat deltas: reasoning, content and native tool calls become their events', () => {
  const events = translate(
    { mode: 'lazy', native: true },
    [
      delta({ role: 'assistant', content: null }),
      delta({ reasoning_content: 'think' }),
      delta({ content: 'Sure.' }),
      delta({ tool_calls: [{ index: 0, id: 'srv_1', type: 'function', function: { name: 'get_weather', arguments: '' } }] }),
      delta({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
      delta({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
      delta({ tool_calls: [{ index: 1, id: '', function: { name: 'get_time', arguments: '{}' } }] }),
      delta({}, 'tool_calls'),
      usage(5, 9),
    ],
    'chat',
  );
  assert.deepEqual(events, [
    { type: 'reasoning', text: 'think' },
    { type: 'text', text: 'Sure.' },
    { type: 'tool_call', index: 0, id: 'srv_1', name: 'get_weather' },
    { type: 'tool_call_delta', index: 0, arguments: '{"city":' },
    { type: 'tool_call_delta', index: 0, arguments: '"Oslo"}' },
    { type: 'tool_call', index: 1, id: 'call_0', name: 'get_time' },
    { type: 'tool_call_delta', index: 1, arguments: '{}' },
    // The end-of-text token the server counted is not counted (see below).
    { type: 'end', finishReason: 'tool_calls', stopSequence: null, usage: { promptTokens: 5, completionTokens: 8 } },
  ]);
});

test("Shoal's convention: a <tool_call> in the text becomes a call, whatever the chunking", () => {
  const raw = 'Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n';
  for (const size of [1, 3, 8, raw.length]) {
    const chunks: unknown[] = [];
    for (let i = 0; i < raw.length; i += size) chunks.push(delta({ content: raw.slice(i, i + size) }));
    // The server stopped at the internal `</tool_call>` stop.
    chunks.push({ ...(delta({}, 'stop') as object), __verbose: { stop_type: 'word', stopping_word: '</tool_call>' } }, usage(5, 20));
    const events = translate({ mode: 'lazy', native: false }, chunks, 'chat');
    const text = events.filter((e) => e.type === 'text').map((e) => (e as { text: string }).text).join('');
    const args = events.filter((e) => e.type === 'tool_call_delta').map((e) => (e as { arguments: string }).arguments).join('');
    assert.equal(text, 'Let me check.', `chunks of ${size}`);
    assert.deepEqual(events.find((e) => e.type === 'tool_call'), { type: 'tool_call', index: 0, id: 'call_0', name: 'get_weather' });
    assert.equal(JSON.stringify(JSON.parse(args)), '{"city":"Oslo"}');
    assert.deepEqual(events.at(-1), { type: 'end', finishReason: 'tool_calls', stopSequence: null, usage: { promptTokens: 5, completionTokens: 20 } });
  }
});

test('a required call in our convention is the bare JSON the schema forces', () => {
  const events = translate({ mode: 'forced', native: false }, [delta({ content: '{"name": "get_time", ' }), delta({ content: '"arguments": {}}' }), delta({}, 'stop'), usage(5, 6)], 'chat');
  assert.deepEqual(events[0], { type: 'tool_call', index: 0, id: 'call_0', name: 'get_time' });
  const args = events.filter((e) => e.type === 'tool_call_delta').map((e) => (e as { arguments: string }).arguments).join('');
  assert.equal(args, '{}');
  assert.deepEqual(events.at(-1), { type: 'end', finishReason: 'tool_calls', stopSequence: null, usage: { promptTokens: 5, completionTokens: 5 } });
  assert.ok(events.every((e) => e.type !== 'text'));
});

test('an answer that ended at end-of-text does not count that token, as the llama_cpp engine does not', () => {
  const eos = translate(OFF, [{ content: 'a', stop: false }, { content: '', stop: true, stop_type: 'eos', tokens_predicted: 2, tokens_evaluated: 5 }], 'completion');
  assert.deepEqual((eos.at(-1) as { usage: unknown }).usage, { promptTokens: 5, completionTokens: 1 });
  // Chat without stop strings: a stop can only be end-of-text.
  const chat = translate(OFF, [delta({ content: 'a' }), delta({}, 'stop'), usage(5, 2)], 'chat');
  assert.deepEqual((chat.at(-1) as { usage: unknown }).usage, { promptTokens: 5, completionTokens: 1 });
  // With stop strings the verbose block says which it was.
  const word = translate(OFF, [delta({ content: 'a' }), { ...(delta({}, 'stop') as object), __verbose: { stop_type: 'word', stopping_word: 'x' } }, usage(5, 2)], 'chat', { verbose: true });
  assert.deepEqual((word.at(-1) as { usage: unknown }).usage, { promptTokens: 5, completionTokens: 2 });
  const eosVerbose = translate(OFF, [delta({ content: 'a' }), { ...(delta({}, 'stop') as object), __verbose: { stop_type: 'eos', stopping_word: '' } }, usage(5, 2)], 'chat', { verbose: true });
  assert.deepEqual((eosVerbose.at(-1) as { usage: unknown }).usage, { promptTokens: 5, completionTokens: 1 });
  // The length limit is no end-of-text.
  const length = translate(OFF, [delta({ content: 'a' }), delta({}, 'length'), usage(5, 2)], 'chat');
  assert.deepEqual((length.at(-1) as { usage: unknown }).usage, { promptTokens: 5, completionTokens: 2 });
});

// The final chunks as the pinned llama-server writes them (tools/server/server-task.cpp:
// `to_json_non_oaicompat` on /completion, `to_json_oaicompat_chat_stream` with include_usage on chat;
// `timings` is server_slot_stats::to_json, whose `cache_n` is the slot's reused prompt prefix).
const TIMINGS = (cacheN: number): Record<string, number> => ({
  cache_n: cacheN,
  prompt_n: 3,
  prompt_ms: 1.2,
  prompt_per_token_ms: 0.4,
  prompt_per_second: 2500,
  predicted_n: 2,
  predicted_ms: 3.1,
  predicted_per_token_ms: 1.55,
  predicted_per_second: 645,
});
const completionFinal = (cacheN: number): unknown => ({
  index: 0,
  content: '',
  tokens: [],
  id_slot: 0,
  stop: true,
  model: 'm',
  tokens_predicted: 2,
  tokens_evaluated: 40,
  has_new_line: false,
  truncated: false,
  stop_type: 'limit',
  stopping_word: '',
  // The slot's whole cache after the answer, not what was reused: never read as the cached count.
  tokens_cached: 41,
  timings: TIMINGS(cacheN),
});
const chatUsage = (cached: number, cacheN = cached): unknown => ({
  choices: [],
  created: 1,
  id: 'chatcmpl-x',
  model: 'm',
  system_fingerprint: 'b1-x',
  object: 'chat.completion.chunk',
  usage: { completion_tokens: 2, prompt_tokens: 40, total_tokens: 42, prompt_tokens_details: { cached_tokens: cached } },
  timings: TIMINGS(cacheN),
});

test("the server's reused prompt prefix becomes usage.cachedPromptTokens, absent when none was reused", () => {
  const reused = translate(OFF, [{ content: 'ab', stop: false }, completionFinal(37)], 'completion');
  assert.deepEqual((reused.at(-1) as { usage: unknown }).usage, { promptTokens: 40, completionTokens: 2, cachedPromptTokens: 37 });
  const cold = translate(OFF, [{ content: 'ab', stop: false }, completionFinal(0)], 'completion');
  assert.deepEqual((cold.at(-1) as { usage: unknown }).usage, { promptTokens: 40, completionTokens: 2 });

  const chat = translate(OFF, [delta({ content: 'ab' }), delta({}, 'length'), chatUsage(37)], 'chat');
  assert.deepEqual((chat.at(-1) as { usage: unknown }).usage, { promptTokens: 40, completionTokens: 2, cachedPromptTokens: 37 });
  const chatCold = translate(OFF, [delta({ content: 'ab' }), delta({}, 'length'), chatUsage(0)], 'chat');
  assert.deepEqual((chatCold.at(-1) as { usage: unknown }).usage, { promptTokens: 40, completionTokens: 2 });
  // The OpenAI-shaped count is the one read when both are there; timings alone still count.
  const timingsOnly = { ...(usage(40, 2) as object), timings: TIMINGS(12) };
  const fromTimings = translate(OFF, [delta({ content: 'ab' }), delta({}, 'length'), timingsOnly], 'chat');
  assert.deepEqual((fromTimings.at(-1) as { usage: unknown }).usage, { promptTokens: 40, completionTokens: 2, cachedPromptTokens: 12 });
  // Never more than the prompt holds.
  const over = translate(OFF, [{ content: 'ab', stop: false }, completionFinal(99)], 'completion');
  assert.deepEqual((over.at(-1) as { usage: unknown }).usage, { promptTokens: 40, completionTokens: 2, cachedPromptTokens: 40 });
});

test('a call cut by the token limit is reported as the truncation it is', () => {
  const events = translate({ mode: 'lazy', native: true }, [delta({ tool_calls: [{ index: 0, id: 'a', function: { name: 'get_time', arguments: '{' } }] }), delta({}, 'length'), usage(5, 16)], 'chat');
  assert.equal((events.at(-1) as { finishReason: string }).finishReason, 'length');
});

test('log probabilities ride on the text they cover; those of held-back tokens wait for the next text', () => {
  const probs = (token: string, logprob: number): unknown => ({ id: 1, token, logprob, bytes: [...Buffer.from(token)], top_logprobs: [{ id: 1, token, logprob, bytes: [] }, { id: 2, token: 'z', logprob: -9, bytes: [122] }] });
  const events = translate(
    OFF,
    [
      { content: 'a', stop: false, completion_probabilities: [probs('a', -0.1)] },
      // A token whose text the server held back (a possible stop sequence), sent with the next.
      { content: '', stop: false, completion_probabilities: [probs('b', -0.2)] },
      { content: 'bc', stop: false, completion_probabilities: [probs('c', -0.3)] },
      { content: '', stop: true, stop_type: 'limit', tokens_predicted: 3, tokens_evaluated: 5 },
    ],
    'completion',
    { logprobsTop: 1 },
  );
  assert.deepEqual(events.slice(0, 2), [
    { type: 'text', text: 'a', logprobs: [{ token: 'a', logprob: -0.1, bytes: [97], top: [{ token: 'a', logprob: -0.1, bytes: [] }] }] },
    {
      type: 'text',
      text: 'bc',
      logprobs: [
        { token: 'b', logprob: -0.2, bytes: [98], top: [{ token: 'b', logprob: -0.2, bytes: [] }] },
        { token: 'c', logprob: -0.3, bytes: [99], top: [{ token: 'c', logprob: -0.3, bytes: [] }] },
      ],
    },
  ]);
});

test('an error event mid-stream becomes a typed error', () => {
  const translator = new StreamTranslator({ plan: OFF, userStops: [], logprobsTop: null, promptTokens: 1 });
  assert.throws(
    () => translator.chatChunk({ error: { code: 500, message: 'failed to decode', type: 'server_error' } }),
    (e: unknown) => e instanceof ShoalError && e.code === 'INTERNAL' && /failed to decode/.test(e.message),
  );
});

// ---------------------------------------------------------------------------------------------
// Errors

test("llama-server's error types map to Shoal's codes", () => {
  const cases: Array<[number, unknown, string]> = [
    [400, { error: { code: 400, type: 'exceed_context_size_error', message: 'too long' } }, 'CONTEXT_OVERFLOW'],
    [400, { error: { code: 400, type: 'invalid_request_error', message: 'bad schema' } }, 'BAD_REQUEST'],
    [501, { error: { code: 501, type: 'not_supported_error', message: 'no embeddings' } }, 'CAPABILITY_MISSING'],
    [503, { error: { code: 503, type: 'unavailable_error', message: 'Loading model' } }, 'MODEL_LOADING'],
    [500, { error: { code: 500, type: 'server_error', message: 'boom' } }, 'INTERNAL'],
    [404, 'File Not Found', 'BAD_REQUEST'],
    [502, '', 'INTERNAL'],
  ];
  for (const [status, body, code] of cases) {
    const error = serverError(status, body);
    assert.equal(error.code, code, JSON.stringify(body));
    assert.match(error.message, new RegExp(`HTTP ${status}`));
  }
  assert.equal(serverError(400, { error: { type: 'invalid_request_error', message: 'JSON schema conversion failed' } }).param, 'schema');
});
