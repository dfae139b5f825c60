import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Ajv } from 'ajv';
import { Ollama, type ChatRequest, type ChatResponse, type GenerateRequest, type Message, type Options, type Tool } from 'ollama';
import { startTestNode, type TestNode } from '../support/node-process.js';

const MODEL = 'shoal/tiny';
const TOOLS_MODEL = 'shoal/tiny-tools';
const THINK_MODEL = 'shoal/tiny-think';
const GREEDY = { temperature: 0, num_predict: 24 };

// Bounded strings: a random-weight model never closes a string on its own accord.
const WEATHER_PARAMS = {
  type: 'object',
  properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['c', 'f'] } },
  required: ['city', 'unit'],
};
const TOOLS: Tool[] = [{ type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: WEATHER_PARAMS } }];

const ajv = new Ajv({ strict: false });

/** The ollama client's failure: an Error with the HTTP status and the server's `error` text. */
interface ResponseError extends Error {
  status_code: number;
  error: string;
}

async function expectStatus(promise: Promise<unknown>, status: number, message?: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    const e = error as ResponseError;
    assert.equal(e.status_code, status, `expected ${status}, got ${String(error)}`);
    if (message) assert.match(e.error, message);
    return true;
  });
}

async function streamChat(client: Ollama, request: ChatRequest) {
  let content = '';
  let thinking = '';
  const toolCalls: NonNullable<Message['tool_calls']> = [];
  let last: ChatResponse | null = null;
  let chunks = 0;
  for await (const chunk of await client.chat({ ...request, stream: true })) {
    chunks += 1;
    content += chunk.message.content;
    thinking += chunk.message.thinking ?? '';
    toolCalls.push(...(chunk.message.tool_calls ?? []));
    last = chunk;
  }
  assert.ok(last?.done, 'the stream ends with done: true');
  return { content, thinking, toolCalls, last, chunks };
}

async function streamGenerate(client: Ollama, request: GenerateRequest) {
  let response = '';
  let last = null;
  for await (const chunk of await client.generate({ ...request, stream: true })) {
    response += chunk.response ?? '';
    last = chunk;
  }
  assert.ok(last?.done, 'the stream ends with done: true');
  return { response, last };
}

/** Prompt tokens the OpenAI family counts for the same input: both families template the same way. */
async function openAIPromptTokens(url: string, path: string, body: object): Promise<number> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, max_tokens: 1, ...body }) });
  assert.equal(res.status, 200);
  return ((await res.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
}

function assertCloseVectors(a: number[], b: number[]): void {
  assert.equal(a.length, b.length);
  for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i]! - b[i]!) < 1e-4, `component ${i}: ${a[i]} vs ${b[i]}`);
}

async function waitIdle(url: string): Promise<number> {
  const deadline = Date.now() + 1000;
  let inFlight = -1;
  while (Date.now() < deadline) {
    const health = (await (await fetch(`${url}/healthz`)).json()) as { models: { inFlight: number }[] };
    inFlight = health.models[0]!.inFlight;
    if (inFlight === 0) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  return inFlight;
}

describe('Ollama API on a real node', () => {
  let node: TestNode;
  let ollama: Ollama;

  before(async () => {
    node = await startTestNode({ args: ['--parallel', '4'] });
    ollama = new Ollama({ host: node.url });
  });
  after(async () => node?.stop());

  test('version, tags, ps and show have Ollama’s shapes', async () => {
    const { version } = await ollama.version();
    assert.match(version, /^\d+\.\d+\.\d+/);

    const tags = await ollama.list();
    assert.deepEqual(tags.models.map((m) => m.name), [`${MODEL}:latest`]);
    const tag = tags.models[0]!;
    assert.equal(tag.model, `${MODEL}:latest`);
    assert.match(tag.digest, /^[0-9a-f]{64}$/);
    assert.ok(!Number.isNaN(Date.parse(String(tag.modified_at))));
    assert.ok(tag.size > 0);
    assert.equal(tag.details.format, 'gguf');
    assert.ok(tag.details.family.length > 0);
    assert.deepEqual(tag.details.families, [tag.details.family]);
    assert.equal(typeof tag.details.parameter_size, 'string');
    assert.equal(typeof tag.details.quantization_level, 'string');

    const ps = await ollama.ps();
    assert.equal(ps.models.length, 1);
    const loaded = ps.models[0] as (typeof ps.models)[0] & { context_length: number };
    // A node's default model was sized by no placement: its file, all in RAM.
    assert.equal(loaded.size, tag.size);
    assert.equal(loaded.size_vram, 0);
    assert.ok(Date.parse(String(loaded.expires_at)) > Date.now() + 365 * 24 * 3600 * 1000);
    assert.ok(loaded.context_length > 0);

    for (const name of [MODEL, `${MODEL}:latest`]) {
      const show = await ollama.show({ model: name });
      const info = show.model_info as unknown as Record<string, unknown>;
      const arch = info['general.architecture'] as string;
      assert.equal(arch, tag.details.family);
      assert.equal(info[`${arch}.context_length`], loaded.context_length);
      assert.ok(show.capabilities.includes('completion'));
      assert.ok(show.capabilities.includes('embedding'));
      assert.ok(show.capabilities.includes('tools'));
      assert.equal(typeof show.template, 'string');
      assert.equal(typeof show.parameters, 'string');
    }
  });

  test('chat: streamed content concatenates to the non-stream content; counts match the tokens', async () => {
    const request = { model: MODEL, messages: [{ role: 'user', content: 'Tell me a story about the sea.' }], options: GREEDY };
    const whole = await ollama.chat(request);
    assert.equal(whole.done, true);
    assert.equal(whole.done_reason, 'length');
    assert.equal(whole.message.role, 'assistant');
    assert.ok(whole.message.content.length > 0);
    assert.equal(whole.eval_count, GREEDY.num_predict);
    assert.equal(whole.prompt_eval_count, await openAIPromptTokens(node.url, '/v1/chat/completions', { messages: request.messages }));
    for (const field of ['total_duration', 'load_duration', 'prompt_eval_duration', 'eval_duration'] as const) {
      assert.ok(Number.isInteger(whole[field]) && whole[field] >= 0, field);
    }
    assert.ok(whole.total_duration >= whole.eval_duration + whole.prompt_eval_duration);

    const streamed = await streamChat(ollama, request);
    assert.equal(streamed.content, whole.message.content);
    assert.ok(streamed.chunks > 2);
    assert.equal(streamed.last!.done_reason, 'length');
    assert.equal(streamed.last!.eval_count, whole.eval_count);
    assert.equal(streamed.last!.prompt_eval_count, whole.prompt_eval_count);
    assert.equal(streamed.last!.model, MODEL);
  });

  test('generate: stream and not agree; the templated prompt counts like chat, raw like a completion', async () => {
    const request = { model: `${MODEL}:latest`, prompt: 'The weather today is', options: GREEDY };
    const whole = await ollama.generate(request);
    assert.equal(whole.done, true);
    assert.equal(whole.done_reason, 'length');
    assert.equal(whole.model, `${MODEL}:latest`);
    assert.equal(whole.eval_count, GREEDY.num_predict);
    assert.equal(whole.prompt_eval_count, await openAIPromptTokens(node.url, '/v1/chat/completions', { messages: [{ role: 'user', content: request.prompt }] }));
    const streamed = await streamGenerate(ollama, request);
    assert.equal(streamed.response, whole.response);
    assert.equal(streamed.last!.eval_count, whole.eval_count);

    const raw = await ollama.generate({ ...request, raw: true });
    assert.equal(raw.prompt_eval_count, await openAIPromptTokens(node.url, '/v1/completions', { prompt: request.prompt }));
    assert.equal(raw.eval_count, GREEDY.num_predict);

    const withSystem = await ollama.generate({ ...request, system: 'You are terse.' });
    assert.equal(
      withSystem.prompt_eval_count,
      await openAIPromptTokens(node.url, '/v1/chat/completions', { messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: request.prompt }] }),
    );
  });

  test('Ollama streams by default: NDJSON lines, the last one done with stats', async () => {
    const res = await fetch(`${node.url}/api/generate`, { method: 'POST', body: JSON.stringify({ model: MODEL, prompt: 'Hi', options: { num_predict: 3 } }) });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/x-ndjson');
    const lines = (await res.text()).trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.ok(lines.slice(0, -1).every((l) => l.done === false && typeof l.response === 'string' && typeof l.created_at === 'string'));
    assert.equal(lines.at(-1)!.done, true);
    assert.equal(lines.at(-1)!.eval_count, 3);
  });

  test('an empty prompt or message list is a load request', async () => {
    const generated = await ollama.generate({ model: MODEL, prompt: '' });
    assert.equal(generated.done, true);
    assert.equal(generated.done_reason, 'load');
    const chatted = await ollama.chat({ model: MODEL, messages: [] });
    assert.equal(chatted.done_reason, 'load');
  });

  test('options.stop ends the answer right before the stop string, streamed or not', async () => {
    const request = { model: MODEL, messages: [{ role: 'user', content: 'Write something long.' }], options: { temperature: 0, num_predict: 48 } };
    const text = (await ollama.chat(request)).message.content;
    const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 3);
    assert.equal(stop.length, 3);
    const expected = text.slice(0, text.indexOf(stop));
    const stopped = await ollama.chat({ ...request, options: { ...request.options, stop: [stop, 'zzzz-never'] } });
    assert.equal(stopped.message.content, expected);
    assert.equal(stopped.done_reason, 'stop');
    const streamed = await streamChat(ollama, { ...request, options: { ...request.options, stop: [stop] } });
    assert.equal(streamed.content, expected);
    assert.equal(streamed.last!.done_reason, 'stop');
  });

  test('format "json" output parses; a JSON schema format validates', async () => {
    const json = await ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'another one' }], format: 'json', options: { temperature: 0, num_predict: 300 } });
    assert.equal(json.done_reason, 'stop', `the JSON closed within the limit: ${json.message.content}`);
    JSON.parse(json.message.content);

    const schema = { type: 'object', properties: { color: { type: 'string', enum: ['red', 'green', 'blue'] }, ok: { type: 'boolean' } }, required: ['color', 'ok'] };
    const structured = await ollama.generate({ model: MODEL, prompt: 'Pick a color.', format: schema, options: { temperature: 0, num_predict: 200 } });
    const value = JSON.parse(structured.response ?? '') as unknown;
    assert.ok(ajv.validate(schema, value), ajv.errorsText());
  });

  test('logprobs cover every generated token with the requested alternatives', async () => {
    const res = (await ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], logprobs: true, top_logprobs: 2, options: { temperature: 0, num_predict: 6 } })) as ChatResponse;
    assert.equal(res.logprobs?.length, 6);
    for (const entry of res.logprobs!) {
      assert.ok(entry.logprob <= 0);
      assert.equal(entry.top_logprobs?.length, 2);
    }
    assert.equal(res.logprobs!.map((l) => l.token).join(''), res.message.content);
  });

  test('embed: single and batch have equal-length unit vectors, a batch equals one-by-one', async () => {
    const inputs = ['The sea is deep.', 'Mountains are tall.', 'Hi'];
    const batch = await ollama.embed({ model: MODEL, input: inputs });
    assert.equal(batch.model, MODEL);
    assert.equal(batch.embeddings.length, inputs.length);
    assert.ok(batch.prompt_eval_count > 0);
    assert.ok(Number.isInteger(batch.total_duration));
    const width = batch.embeddings[0]!.length;
    assert.ok(width > 0);
    for (const [i, input] of inputs.entries()) {
      const single = await ollama.embed({ model: MODEL, input });
      assert.equal(single.embeddings.length, 1);
      assert.equal(single.embeddings[0]!.length, width);
      assertCloseVectors(single.embeddings[0]!, batch.embeddings[i]!);
    }
    const length = (v: number[]) => Math.sqrt(v.reduce((sum, x) => sum + x * x, 0));
    for (const vector of batch.embeddings) assert.ok(Math.abs(length(vector) - 1) < 1e-6, 'unit length, as Ollama answers');
    // The legacy endpoint answers the raw vector, as Ollama does.
    const legacy = await ollama.embeddings({ model: MODEL, prompt: inputs[0]! });
    assert.equal(legacy.embedding.length, width);
    const norm = length(legacy.embedding);
    assertCloseVectors(legacy.embedding.map((x) => x / norm), batch.embeddings[0]!);
  });

  test('a client abort ends the generation within 1 s', async () => {
    const aborting = new Ollama({ host: node.url });
    const streams = await Promise.all(
      [0, 1].map(() => aborting.chat({ model: MODEL, messages: [{ role: 'user', content: 'go on forever' }], stream: true, options: { temperature: 0, num_predict: 100_000 } })),
    );
    // Read one chunk from each so both are generating, then walk away.
    await Promise.all(streams.map(async (s) => (await s[Symbol.asyncIterator]().next()).value));
    aborting.abort();
    assert.equal(await waitIdle(node.url), 0, 'every sequence is released within 1 s of the abort');
    const after = await ollama.generate({ model: MODEL, prompt: 'still there?', options: { num_predict: 4 } });
    assert.equal(after.eval_count, 4);
  });

  test('Ollama’s documented options are accepted; those Shoal cannot apply change nothing', async () => {
    const request = { model: MODEL, messages: [{ role: 'user', content: 'Tell me about the sea.' }] };
    const plain = await ollama.chat({ ...request, options: GREEDY });
    const options = { ...GREEDY, num_ctx: 1_000_000, typical_p: 0.5, tfs_z: 0.5, mirostat: 2, mirostat_tau: 5, mirostat_eta: 0.1, num_keep: 5, num_thread: 2 };
    const withOptions = await ollama.chat({ ...request, options });
    assert.equal(withOptions.message.content, plain.message.content);
    assert.equal(withOptions.eval_count, GREEDY.num_predict);
    const streamed = await streamGenerate(ollama, { model: MODEL, prompt: 'hi', options: { ...options, num_predict: 3 } });
    assert.equal(streamed.last!.eval_count, 3);
    // Embedding clients send the same options object.
    const embedded = await ollama.embed({ model: MODEL, input: 'the sea', options });
    assert.deepEqual(embedded.embeddings, (await ollama.embed({ model: MODEL, input: 'the sea' })).embeddings);
  });

  test('top_k, min_p, repeat_penalty and repeat_last_n reach the engine', async () => {
    const request = { model: MODEL, messages: [{ role: 'user', content: 'Tell me about the sea.' }] };
    const content = async (options: Partial<Options>): Promise<string> => (await ollama.chat({ ...request, options: { num_predict: 24, ...options } })).message.content;
    const greedy = await content({ temperature: 0 });
    const hot = { temperature: 1, seed: 5 };
    assert.notEqual(await content(hot), greedy, 'temperature 1 samples away from the greedy answer');
    assert.equal(await content({ ...hot, top_k: 1 }), greedy, 'top_k 1 keeps only the most likely token');
    assert.equal(await content({ ...hot, min_p: 1 }), greedy, 'min_p 1 keeps only the most likely token');
    assert.equal(await content({ ...hot, top_k: 0 }), await content(hot), 'top_k 0 is off');
    const penalized = await content({ temperature: 0, repeat_penalty: 10 });
    assert.notEqual(penalized, greedy, 'a strong repetition penalty changes the greedy answer');
    assert.equal(await content({ temperature: 0, repeat_penalty: 10, repeat_last_n: 0 }), greedy, 'over a window of no tokens it penalizes nothing');
    await expectStatus(ollama.chat({ ...request, options: { min_p: 2 } }), 400, /options\.min_p/);
    await expectStatus(ollama.chat({ ...request, options: { repeat_penalty: 0 } }), 400, /options\.repeat_penalty/);
  });

  test('errors are {error} with Ollama’s statuses; unknown options are refused by name', async () => {
    await expectStatus(ollama.chat({ model: 'nobody/nothing', messages: [{ role: 'user', content: 'hi' }] }), 404, /^model 'nobody\/nothing' not found/);
    await expectStatus(ollama.show({ model: 'nobody/nothing' }), 404, /not found/);
    await expectStatus(ollama.embed({ model: 'nobody/nothing', input: 'x' }), 404, /not found/);
    const typo = { top_kk: 40 } as unknown as Partial<Options>;
    await expectStatus(ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], options: typo }), 400, /options\.top_kk/);
    await expectStatus(ollama.generate({ model: MODEL, prompt: 'hi', suffix: 'end' }), 400, /suffix/);
    await expectStatus(ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 'hi', images: ['aGk='] }] }), 400, /messages\[0\]\.images/);

    const bad = await fetch(`${node.url}/api/chat`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model": ' });
    assert.equal(bad.status, 400);
    assert.equal(typeof ((await bad.json()) as { error: unknown }).error, 'string');
    const unknown = await fetch(`${node.url}/api/push`, { method: 'POST', body: '{}' });
    assert.equal(unknown.status, 404);
    assert.equal(typeof ((await unknown.json()) as { error: unknown }).error, 'string');
  });
});

describe('Ollama tool calls on a real node', () => {
  let node: TestNode;
  let ollama: Ollama;

  before(async () => {
    // In-process only, as in openai-features.test.ts: Shoal's own tool-call convention, constrained mid-answer.
    node = await startTestNode({ args: ['--default-model', TOOLS_MODEL, '--engine', 'llama_cpp'] });
    ollama = new Ollama({ host: node.url });
  });
  after(async () => node?.stop());

  test('tools given: the reply calls one with valid arguments, and a tool result gets an answer', async () => {
    const messages: Message[] = [{ role: 'user', content: 'What is the weather in Oslo?' }];
    const request = { model: TOOLS_MODEL, messages, tools: TOOLS, options: { temperature: 0, num_predict: 200 } };
    const res = await ollama.chat(request);
    assert.equal(res.done, true);
    const calls = res.message.tool_calls ?? [];
    assert.ok(calls.length > 0, `a tool call, got: ${JSON.stringify(res.message)}`);
    assert.equal(calls[0]!.function.name, 'get_weather');
    assert.equal(typeof calls[0]!.function.arguments, 'object');
    assert.ok(ajv.validate(WEATHER_PARAMS, calls[0]!.function.arguments), ajv.errorsText());

    const streamed = await streamChat(ollama, request);
    assert.deepEqual(streamed.toolCalls.map((c) => c.function), calls.map((c) => c.function));

    const followUp = await ollama.chat({
      ...request,
      messages: [...messages, res.message, { role: 'tool', content: '12 degrees and sunny', tool_name: 'get_weather' }],
      options: { temperature: 0, num_predict: 24 },
    });
    assert.equal(followUp.done, true);
    assert.ok(followUp.eval_count > 0);
    assert.ok(followUp.message.content.length > 0 || (followUp.message.tool_calls ?? []).length > 0, 'the model answered');
  });
});

describe('Ollama reasoning on a real node', () => {
  let node: TestNode;
  let ollama: Ollama;

  before(async () => {
    node = await startTestNode({ args: ['--default-model', THINK_MODEL] });
    ollama = new Ollama({ host: node.url });
  });
  after(async () => node?.stop());

  test('think: true returns thinking apart from the content, streamed or not', async () => {
    const request = { model: THINK_MODEL, messages: [{ role: 'user', content: 'Why is the sky blue?' }], think: true, options: { temperature: 0, num_predict: 400 } };
    const whole = await ollama.chat(request);
    assert.ok((whole.message.thinking ?? '').length > 0, 'non-empty thinking');
    assert.ok(!/<\/?think>/.test(whole.message.content), `no think tags in: ${whole.message.content}`);
    assert.equal(whole.done_reason, 'stop');
    const streamed = await streamChat(ollama, request);
    assert.equal(streamed.thinking, whole.message.thinking);
    assert.equal(streamed.content, whole.message.content);

    const hidden = await ollama.chat({ ...request, think: false });
    assert.equal(hidden.message.thinking, undefined);
    assert.equal(hidden.message.content, whole.message.content);

    const generated = await ollama.generate({ model: THINK_MODEL, prompt: 'Why is the sky blue?', think: true, options: request.options });
    assert.ok((generated.thinking ?? '').length > 0);
    assert.ok(!/<\/?think>/.test(generated.response ?? ''));
  });
});

describe('Ollama API with --api-key', () => {
  let node: TestNode;

  before(async () => {
    node = await startTestNode({ args: ['--api-key', 'secret'] });
  });
  after(async () => node?.stop());

  test('no key or a wrong key is a 401 {error}; the right bearer key is let in', async () => {
    await expectStatus(new Ollama({ host: node.url }).list(), 401, /API key/);
    await expectStatus(new Ollama({ host: node.url, headers: { Authorization: 'Bearer wrong' } }).chat({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] }), 401);
    // Pull and delete answer to the access of the /models routes: this machine, or the admin token.
    assert.deepEqual(await new Ollama({ host: node.url }).pull({ model: MODEL }), { status: 'success' });
    const authed = new Ollama({ host: node.url, headers: { Authorization: 'Bearer secret' } });
    assert.equal((await authed.list()).models.length, 1);
    const res = await authed.generate({ model: MODEL, prompt: 'hi', options: { num_predict: 2 } });
    assert.equal(res.eval_count, 2);
  });
});
