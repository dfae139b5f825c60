import assert from 'node:assert/strict';
import { test } from 'node:test';
import Fastify from 'fastify';
import { ERROR_CODES, ShoalError } from '../../common/errors.js';
import type { RunnerTask, TaskEvent } from '../../wire/task.js';
import { ApiKeys } from '../auth.js';
import type { Dispatcher, ModelListing } from '../dispatch.js';
import { parseBody } from '../validation.js';
import { ModelsError } from '../../models/hub/errors.js';
import { downloadFailure, toOllamaError } from './errors.js';
import {
  chatRequestToTask,
  deleteTarget,
  embedTask,
  generateRequestToTask,
  OLLAMA_DEFAULT_TEMPERATURE,
  OLLAMA_DEFAULT_TOP_P,
  ollamaName,
  pullPlan,
  resolveModelName,
  type TargetModel,
} from './normalize.js';
import { ollamaRoutes } from './routes.js';
import { ChatRequest, DeleteRequest, EmbedRequest, GenerateRequest, IGNORED_OPTIONS, PullRequest, ShowRequest } from './schemas.js';
import { doneStats, embedBody, embeddingsBody, fileDigest, modelDigest, ndjsonLine, psBody, pullProgressBodies, showBody, tagBody, toolCallBodies } from './serialize.js';

const target: TargetModel = { id: 'shoal/tiny', chat: true };

const listing: ModelListing = {
  id: 'shoal/tiny',
  created: 1_700_000_000,
  ready: true,
  capabilities: ['chat', 'completion', 'embeddings', 'tools'],
  contextSize: 4096,
  details: { family: 'llama', parameterSize: '1.2M', quantization: 'MOSTLY_Q8_0', sizeBytes: 1234 },
};

function failure(fn: () => unknown): ShoalError {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ShoalError, `expected a ShoalError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected a ShoalError');
}

function chat(body: object) {
  return chatRequestToTask(parseBody(ChatRequest, { model: 'shoal/tiny', ...body }), target);
}

function generate(body: object, model: TargetModel = target) {
  return generateRequestToTask(parseBody(GenerateRequest, { model: 'shoal/tiny', ...body }), model);
}

test('chat requests normalize to one task: roles, options, format, tools', () => {
  const task = chat({
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: '', thinking: 'hmm', tool_calls: [{ function: { name: 'get_weather', arguments: { city: 'Oslo' } } }] },
      { role: 'tool', content: '12 C', tool_name: 'get_weather' },
    ],
    options: { temperature: 0, top_p: 0.5, seed: 7, num_predict: 24, stop: ['END'], presence_penalty: 0.5, frequency_penalty: -0.5, num_ctx: 2048 },
    format: 'json',
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    keep_alive: '5m',
    think: true,
  });
  assert.deepEqual(task.prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: '', reasoning: 'hmm', toolCalls: [{ id: 'call_2_0', name: 'get_weather', arguments: '{"city":"Oslo"}' }] },
      { role: 'tool', toolCallId: 'call_2_0', name: 'get_weather', content: '12 C' },
    ],
  });
  assert.deepEqual(task.sampling, { maxTokens: 24, temperature: 0, topP: 0.5, seed: 7, presencePenalty: 0.5, frequencyPenalty: -0.5 });
  assert.deepEqual(task.stop, ['END']);
  assert.deepEqual(task.format, { kind: 'json' });
  assert.deepEqual(task.toolChoice, { mode: 'auto' });
  assert.deepEqual(task.tools, [{ name: 'get_weather', description: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }]);
  assert.equal(task.logprobs, null);
});

test('chat defaults follow Ollama: temperature 0.8, top_p 0.9, unlimited tokens, random seed', () => {
  const task = chat({ messages: [{ role: 'user', content: 'x' }], options: { num_predict: -1, seed: -1, stop: 'a' } });
  assert.deepEqual(task.sampling, {
    maxTokens: null,
    temperature: OLLAMA_DEFAULT_TEMPERATURE,
    topP: OLLAMA_DEFAULT_TOP_P,
    seed: null,
    presencePenalty: 0,
    frequencyPenalty: 0,
  });
  assert.deepEqual(task.stop, ['a']);
  assert.equal(chat({ messages: [{ role: 'user', content: 'x' }], options: { num_predict: -2 } }).sampling.maxTokens, null);
});

test('a JSON schema format and logprobs reach the task; tools without parameters get an empty object schema', () => {
  const schema = { type: 'object', properties: { a: { type: 'number' } }, required: ['a'] };
  const task = chat({
    messages: [{ role: 'user', content: 'x' }],
    format: schema,
    logprobs: true,
    top_logprobs: 3,
    tools: [{ type: 'function', function: { name: 'noop' } }],
  });
  assert.deepEqual(task.format, { kind: 'json_schema', schema });
  assert.deepEqual(task.logprobs, { top: 3 });
  assert.deepEqual(task.tools, [{ name: 'noop', parameters: { type: 'object', properties: {} } }]);
  assert.deepEqual(chat({ messages: [{ role: 'user', content: 'x' }], format: '' }).format, { kind: 'text' });
});

test('tool results pair with calls by id, by name, or in order', () => {
  const task = chat({
    messages: [
      { role: 'user', content: 'x' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'kept', function: { name: 'a', arguments: {} } },
          { function: { name: 'b', arguments: { n: 1 } } },
          { function: { name: 'c', arguments: {} } },
        ],
      },
      { role: 'tool', content: 'rb', tool_name: 'b' },
      { role: 'tool', content: 'ra', tool_call_id: 'kept' },
      { role: 'tool', content: 'rc' },
    ],
  });
  assert.equal(task.prompt.kind, 'chat');
  const tools = task.prompt.kind === 'chat' ? task.prompt.messages.slice(2) : [];
  assert.deepEqual(tools, [
    { role: 'tool', toolCallId: 'call_1_1', name: 'b', content: 'rb' },
    { role: 'tool', toolCallId: 'kept', name: 'a', content: 'ra' },
    { role: 'tool', toolCallId: 'call_1_2', name: 'c', content: 'rc' },
  ]);
});

test('generate templates the prompt as a user turn unless raw; non-chat models get text', () => {
  assert.deepEqual(generate({ prompt: 'Once', system: 'sys' }).prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'Once' },
    ],
  });
  assert.deepEqual(generate({ prompt: 'Once', raw: true }).prompt, { kind: 'text', text: 'Once' });
  assert.deepEqual(generate({ prompt: 'Once', system: 'sys' }, { ...target, chat: false }).prompt, { kind: 'text', text: 'sys\n\nOnce' });
  const raw = failure(() => generate({ prompt: 'Once', raw: true, system: 'sys' }));
  assert.equal(raw.code, 'BAD_REQUEST');
  assert.equal(raw.param, 'system');
  // Empty values of refused fields mean "none" and are fine.
  assert.equal(generate({ prompt: 'Once', images: [], suffix: '', context: [], template: '' }).prompt.kind, 'chat');
});

test('unsupported parameters are refused by name, never ignored', () => {
  const cases: [() => unknown, string][] = [
    // Ollama defines no such option: a typo is refused, not silently ignored.
    [() => chat({ messages: [{ role: 'user', content: 'x' }], options: { top_kk: 40 } }), 'options.top_kk'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: 'y', images: ['aGk='] }] }), 'messages[1].images'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }], think: 'high' }), 'think'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }], truncate: false }), 'truncate'],
    [() => generate({ prompt: 'x', suffix: 'end' }), 'suffix'],
    [() => generate({ prompt: 'x', context: [1, 2] }), 'context'],
    [() => generate({ prompt: 'x', template: '{{ .Prompt }}' }), 'template'],
    [() => parseBody(EmbedRequest, { model: 'm', input: 'x', dimensions: 8 }), 'dimensions'],
    [() => parseBody(EmbedRequest, { model: 'm', input: 'x', options: { temprature: 0 } }), 'options.temprature'],
    [() => parseBody(PullRequest, { model: 'm', quant: 'Q4_K_M' }), 'quant'],
  ];
  for (const [fn, param] of cases) {
    const error = failure(fn);
    assert.equal(error.code, 'UNSUPPORTED_PARAMETER', param);
    assert.equal(error.param, param);
    assert.match(error.message, new RegExp(param.replace(/[[\].]/g, '\\$&')));
  }
});

test('invalid values are a BAD_REQUEST naming the field', () => {
  const cases: [() => unknown, string][] = [
    [() => chat({ messages: [{ role: 'user', content: 'x' }], options: { top_k: 'forty' } }), 'options.top_k'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }], options: { use_mmap: 1 } }), 'options.use_mmap'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }], options: { temperature: 3 } }), 'options.temperature'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }], options: { num_predict: 0 } }), 'options.num_predict'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }], format: 'xml' }), 'format'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }], top_logprobs: 2 }), 'top_logprobs'],
    [() => chat({ messages: [{ role: 'wizard', content: 'x' }] }), 'messages[0].role'],
    [() => chat({ messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'bad name' } }] }), 'tools[0].function.name'],
    [() => parseBody(ShowRequest, {}), 'model'],
    [() => parseBody(ShowRequest, { model: 'm', verbose: true }), 'verbose'],
    [() => parseBody(PullRequest, { stream: true }), 'model'],
    [() => parseBody(DeleteRequest, {}), 'model'],
  ];
  for (const [fn, param] of cases) {
    const error = failure(fn);
    assert.equal(error.code, 'BAD_REQUEST', param);
    assert.equal(error.param, param);
  }
});

test('embed tasks truncate by default', () => {
  assert.deepEqual(embedTask(['a', 'b'], undefined, target, true), { kind: 'embed', model: 'shoal/tiny', inputs: ['a', 'b'], truncate: true, normalize: true });
  assert.equal(embedTask(['a'], false, target, false).truncate, false);
});

/** What LangChain, Continue and Open WebUI send: Ollama's documented options with their defaults. */
const CLIENT_OPTIONS = {
  num_ctx: 1_000_000,
  typical_p: 1,
  tfs_z: 1,
  mirostat: 0,
  mirostat_tau: 5,
  mirostat_eta: 0.1,
  penalize_newline: true,
  num_keep: 24,
  num_batch: 512,
  num_gpu: -1,
  main_gpu: 0,
  low_vram: false,
  f16_kv: true,
  logits_all: false,
  vocab_only: false,
  use_mmap: true,
  use_mlock: false,
  numa: false,
  num_thread: 8,
  embedding_only: false,
  rope_frequency_base: 10000,
  rope_frequency_scale: 1,
};

test('top_k, min_p, repeat_penalty and repeat_last_n land in the task; absent, they stay off', () => {
  const messages = [{ role: 'user', content: 'x' }];
  const task = chat({ messages, options: { temperature: 1, top_k: 40, min_p: 0.05, repeat_penalty: 1.1, repeat_last_n: 64 } });
  assert.deepEqual(task.sampling, { maxTokens: null, temperature: 1, topP: OLLAMA_DEFAULT_TOP_P, seed: null, presencePenalty: 0, frequencyPenalty: 0, topK: 40, minP: 0.05, repeatPenalty: 1.1, repeatLastN: 64 });
  assert.equal(generate({ prompt: 'x', options: { top_k: 1, repeat_last_n: -1 } }).sampling.topK, 1);
  assert.equal(generate({ prompt: 'x', options: { repeat_last_n: -1 } }).sampling.repeatLastN, -1);
  // top_k 0 or below is llama.cpp's "off": the same task as none.
  assert.deepEqual(chat({ messages, options: { top_k: 0 } }), chat({ messages }));
  assert.deepEqual(chat({ messages, options: { top_k: -1 } }), chat({ messages }));
  assert.equal('topK' in chat({ messages }).sampling, false);
  for (const [options, param] of [
    [{ min_p: 1.5 }, 'options.min_p'],
    [{ repeat_penalty: 0 }, 'options.repeat_penalty'],
    [{ repeat_last_n: -2 }, 'options.repeat_last_n'],
    [{ top_k: 1.5 }, 'options.top_k'],
  ] as const) {
    assert.throws(() => chat({ messages, options }), (error: unknown) => error instanceof ShoalError && error.param === param, param);
  }
});

test('Ollama’s other documented options are accepted and leave the task as it is', () => {
  assert.deepEqual(Object.keys(CLIENT_OPTIONS).filter((k) => k !== 'num_ctx').sort(), Object.keys(IGNORED_OPTIONS).sort(), 'the test sends every ignored option');
  const messages = [{ role: 'user', content: 'x' }];
  const honoured = { temperature: 0.3, top_p: 0.7, seed: 3, num_predict: 9, stop: 'END', presence_penalty: 0.2, frequency_penalty: 0.1 };
  assert.deepEqual(chat({ messages, options: { ...honoured, ...CLIENT_OPTIONS } }), chat({ messages, options: honoured }));
  assert.deepEqual(generate({ prompt: 'x', options: CLIENT_OPTIONS }), generate({ prompt: 'x' }));
  // Embeddings take the same options object clients send for chat.
  assert.deepEqual(parseBody(EmbedRequest, { model: 'm', input: 'x', options: { ...honoured, ...CLIENT_OPTIONS } }).input, 'x');
});

test('model names: exact ids, or the id with :latest; other tags do not resolve', () => {
  const ids = ['shoal/tiny', 'org/model:q4'];
  assert.equal(resolveModelName('shoal/tiny', ids), 'shoal/tiny');
  assert.equal(resolveModelName('shoal/tiny:latest', ids), 'shoal/tiny');
  assert.equal(resolveModelName('org/model:q4', ids), 'org/model:q4');
  assert.equal(resolveModelName('shoal/tiny:7b', ids), null);
  assert.equal(resolveModelName('other', ids), null);
  assert.equal(ollamaName('shoal/tiny'), 'shoal/tiny:latest');
  assert.equal(ollamaName('org/model:q4'), 'org/model:q4');
});

test('pull: a known model is pulled by id (or is already here), any other name is a hub repo to add', () => {
  const known = [
    { id: 'shoal/tiny', origin: 'builtin', state: 'builtin' },
    { id: 'org/repo:Q4_K_M', origin: 'added', state: 'not-downloaded' },
    { id: 'mine/local', origin: 'user', state: 'file' },
    { id: 'org/kept:Q8_0', origin: 'store', state: 'on-disk' },
  ] as const;
  assert.deepEqual(pullPlan('shoal/tiny:latest', known), { kind: 'present', id: 'shoal/tiny' });
  assert.deepEqual(pullPlan('mine/local', known), { kind: 'present', id: 'mine/local' });
  assert.deepEqual(pullPlan('org/kept:Q8_0', known), { kind: 'present', id: 'org/kept:Q8_0' });
  assert.deepEqual(pullPlan('org/repo:Q4_K_M', known), { kind: 'download', id: 'org/repo:Q4_K_M' });
  assert.deepEqual(pullPlan('hf.co/org/repo:Q8_0', known), { kind: 'add', repo: 'hf.co/org/repo:Q8_0' });
  assert.deepEqual(pullPlan('org/repo', known), { kind: 'add', repo: 'org/repo' });
  assert.equal(deleteTarget('org/repo:Q4_K_M', known), 'org/repo:Q4_K_M');
  assert.equal(deleteTarget('shoal/tiny:latest', known), 'shoal/tiny');
  assert.equal(deleteTarget('elsewhere/model:latest', known), 'elsewhere/model', 'another member may hold it');
});

test('pull progress: one line per file whose bytes moved, named by a stable sha256 digest', () => {
  const sent = new Map<string, number>();
  const view = (a: number, b: number) => ({
    repo: 'org/repo',
    revision: 'c'.repeat(40),
    files: [
      { path: 'm-00001-of-00002.gguf', totalBytes: 10, doneBytes: a, state: 'downloading' as const },
      { path: 'm-00002-of-00002.gguf', totalBytes: 20, doneBytes: b, state: 'queued' as const },
    ],
  });
  const first = pullProgressBodies(view(4, 0), sent);
  const digest = fileDigest('org/repo', 'c'.repeat(40), 'm-00001-of-00002.gguf');
  assert.match(digest, /^sha256:[0-9a-f]{64}$/);
  assert.deepEqual(first[0], { status: `pulling ${digest.slice(7, 19)}`, digest, total: 10, completed: 4 });
  assert.equal(first.length, 2);
  assert.deepEqual(pullProgressBodies(view(4, 0), sent), [], 'nothing moved');
  const next = pullProgressBodies(view(10, 5), sent);
  assert.deepEqual(next.map((b) => [b.total, b.completed]), [[10, 10], [20, 5]]);
  assert.notEqual(next[0]!.digest, next[1]!.digest);
});

test('NDJSON lines cannot be forged by CR/LF in echoed values', () => {
  const line = ndjsonLine({ model: 'a\r\n{"done":true}\n', response: 'x\ny\rz\u2028' });
  assert.equal(line.indexOf('\n'), line.length - 1, 'exactly one line feed, at the end');
  assert.ok(!line.includes('\r'));
  assert.deepEqual(JSON.parse(line), { model: 'a\r\n{"done":true}\n', response: 'x\ny\rz\u2028' });
});

test('durations are nanoseconds split at admission and first output', () => {
  const stats = doneStats({ receivedNs: 1_000n, startedNs: 3_000n, firstOutputNs: 10_000n, endedNs: 50_000n }, { promptTokens: 12, completionTokens: 24 });
  assert.deepEqual(stats, {
    total_duration: 49_000,
    load_duration: 2_000,
    prompt_eval_count: 12,
    prompt_eval_duration: 7_000,
    eval_count: 24,
    eval_duration: 40_000,
  });
  const nothing = doneStats({ receivedNs: 0n, startedNs: 5n, firstOutputNs: null, endedNs: 9n }, { promptTokens: 1, completionTokens: 0 });
  assert.equal(nothing.eval_duration, 0);
  assert.equal(nothing.prompt_eval_duration, 4);
});

test('tool call arguments are parsed once complete; cut-off or non-object arguments fail clearly', () => {
  assert.deepEqual(toolCallBodies([{ index: 0, id: 'call_1', name: 'f', arguments: '{"a":1}' }], 'tool_calls'), [
    { id: 'call_1', function: { index: 0, name: 'f', arguments: { a: 1 } } },
  ]);
  const cut = failure(() => toolCallBodies([{ index: 0, id: 'c', name: 'f', arguments: '{"a":' }], 'length'));
  assert.equal(cut.param, 'options.num_predict');
  assert.equal(failure(() => toolCallBodies([{ index: 0, id: 'c', name: 'f', arguments: '[1]' }], 'tool_calls')).code, 'INTERNAL');
});

test('listings have Ollama’s shapes', () => {
  const tag = tagBody(listing);
  assert.equal(tag.name, 'shoal/tiny:latest');
  assert.equal(tag.model, 'shoal/tiny:latest');
  assert.equal(tag.modified_at, '2023-11-14T22:13:20.000Z');
  assert.equal(tag.size, 1234);
  assert.match(tag.digest, /^[0-9a-f]{64}$/);
  assert.equal(tag.digest, modelDigest('shoal/tiny'));
  assert.deepEqual(tag.details, { parent_model: '', format: 'gguf', family: 'llama', families: ['llama'], parameter_size: '1.2M', quantization_level: 'Q8_0' });
  const ps = psBody(listing);
  assert.equal(ps.size, 1234, 'no placement sized it: the file');
  assert.equal(ps.size_vram, 0);
  assert.equal(ps.context_length, 4096);
  assert.ok(Date.parse(ps.expires_at) > Date.parse('2100-01-01'));
  const placed = psBody({ ...listing, memory: { bytes: 5000, gpuBytes: 3000 } });
  assert.equal(placed.size, 5000, 'what placement reserved');
  assert.equal(placed.size_vram, 3000);
  const show = showBody(listing);
  assert.deepEqual(show.model_info, { 'general.architecture': 'llama', 'llama.context_length': 4096 });
  assert.deepEqual(show.capabilities, ['completion', 'embedding', 'tools']);
});

test('/api/embed vectors are unit length like Ollama’s; the legacy endpoint keeps them raw', () => {
  assert.deepEqual(embedBody('m', [[0.6, 0.8]], 10, 2, 5), { model: 'm', embeddings: [[0.6, 0.8]], total_duration: 10, load_duration: 2, prompt_eval_count: 5 });
  assert.deepEqual(embeddingsBody([3, 4]), { embedding: [3, 4] });
});

test('every error code maps to an Ollama {error} with a 4xx/5xx status', () => {
  for (const code of ERROR_CODES) {
    const mapped = toOllamaError(new ShoalError(code, `message for ${code}`));
    assert.deepEqual(mapped.body, { error: `message for ${code}` });
    assert.ok(mapped.status >= 400 && mapped.status < 600, code);
  }
  const status = (code: (typeof ERROR_CODES)[number]) => toOllamaError(new ShoalError(code, 'x')).status;
  assert.equal(status('BAD_REQUEST'), 400);
  assert.equal(status('UNSUPPORTED_PARAMETER'), 400);
  assert.equal(status('UNAUTHORIZED'), 401);
  assert.equal(status('MODEL_NOT_FOUND'), 404);
  assert.equal(status('PAYLOAD_TOO_LARGE'), 413);
  assert.equal(status('QUEUE_FULL'), 429);
  assert.equal(status('INTERNAL'), 500);
  assert.equal(status('MODEL_LOADING'), 503);
  // Pull and delete failures answer as the /models routes do, also when a failed download reports them.
  assert.equal(toOllamaError(new ModelsError('HUB_UNREACHABLE', 'x')).status, 502);
  assert.equal(toOllamaError(new ModelsError('MODEL_IN_USE', 'x')).status, 409);
  assert.equal(toOllamaError(downloadFailure({ code: 'DISK_FULL', reason: 'INSUFFICIENT_DISK', message: 'full' }, 'pull')).status, 507);
  assert.equal(toOllamaError(downloadFailure({ code: 'CANCELLED', reason: null, message: 'cancelled' }, 'pull')).status, 499);
  assert.equal(downloadFailure(null, 'the pull').code, 'INTERNAL');
});

/** A dispatcher that answers every generate task with the scripted events. */
function fakeDispatcher(script: (task: RunnerTask) => TaskEvent[], failAfter?: number): Dispatcher {
  return {
    models: () => [listing],
    run: (task) =>
      (async function* () {
        const events = script(task);
        for (const [i, event] of events.entries()) {
          if (failAfter !== undefined && i === failAfter) throw new ShoalError('RUNNER_CRASHED', 'the runner crashed');
          yield event;
        }
      })(),
  };
}

async function serve(dispatcher: Dispatcher) {
  const app = Fastify();
  await app.register(ollamaRoutes, { dispatcher, apiKeys: new ApiKeys([]), adminToken: 'admin' });
  return app;
}

const answer: TaskEvent[] = [
  { type: 'start', promptTokens: 5 },
  { type: 'reasoning', text: 'think' },
  { type: 'text', text: 'Hel' },
  { type: 'text', text: 'lo\n' },
  { type: 'tool_call', index: 0, id: 'call_x', name: 'f' },
  { type: 'tool_call_delta', index: 0, arguments: '{"a"' },
  { type: 'tool_call_delta', index: 0, arguments: ':1}' },
  { type: 'end', finishReason: 'tool_calls', stopSequence: null, usage: { promptTokens: 5, completionTokens: 3 } },
];

test('routes stream NDJSON by default and answer one object with stream: false', async () => {
  const app = await serve(fakeDispatcher(() => answer));
  const streamed = await app.inject({ method: 'POST', url: '/api/chat', payload: { model: 'shoal/tiny:latest', messages: [{ role: 'user', content: 'x' }] } });
  assert.equal(streamed.statusCode, 200);
  assert.equal(streamed.headers['content-type'], 'application/x-ndjson');
  const lines = streamed.body.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(lines.map((l) => (l.message as { content: string }).content), ['', 'Hel', 'lo\n', '', '']);
  assert.equal((lines[0]!.message as { thinking: string }).thinking, 'think');
  assert.deepEqual((lines[3]!.message as { tool_calls: unknown }).tool_calls, [{ id: 'call_x', function: { index: 0, name: 'f', arguments: { a: 1 } } }]);
  const last = lines.at(-1)!;
  assert.equal(last.done, true);
  assert.equal(last.done_reason, 'stop');
  assert.equal(last.model, 'shoal/tiny:latest');
  assert.equal(last.prompt_eval_count, 5);
  assert.equal(last.eval_count, 3);
  for (const field of ['total_duration', 'load_duration', 'prompt_eval_duration', 'eval_duration']) assert.equal(typeof last[field], 'number');

  const whole = await app.inject({ method: 'POST', url: '/api/chat', payload: { model: 'shoal/tiny', messages: [{ role: 'user', content: 'x' }], stream: false, think: false } });
  const body = whole.json<{ message: Record<string, unknown>; done: boolean }>();
  assert.deepEqual(body.message, { role: 'assistant', content: 'Hello\n', tool_calls: [{ id: 'call_x', function: { index: 0, name: 'f', arguments: { a: 1 } } }] });
  assert.equal(body.done, true);

  const gen = await app.inject({ method: 'POST', url: '/api/generate', payload: { model: 'shoal/tiny', prompt: 'x', stream: false } });
  assert.equal(gen.json<{ response: string; thinking: string }>().response, 'Hello\n');
  assert.equal(gen.json<{ response: string; thinking: string }>().thinking, 'think');
  await app.close();
});

test('load requests, form-encoded bodies, unknown models and mid-stream failures', async () => {
  const app = await serve(fakeDispatcher(() => answer, 3));
  const load = await app.inject({ method: 'POST', url: '/api/generate', payload: { model: 'shoal/tiny' } });
  assert.equal(load.json<{ done_reason: string }>().done_reason, 'load');
  const chatLoad = await app.inject({ method: 'POST', url: '/api/chat', payload: { model: 'shoal/tiny', messages: [] } });
  assert.equal(chatLoad.json<{ done_reason: string }>().done_reason, 'load');

  // `curl -d` sends JSON as form-encoded; Ollama reads it as JSON anyway.
  const form = await app.inject({
    method: 'POST',
    url: '/api/show',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    payload: JSON.stringify({ model: 'shoal/tiny' }),
  });
  assert.equal(form.statusCode, 200);
  assert.equal(form.json<{ details: { format: string } }>().details.format, 'gguf');
  // fetch() with a string body says text/plain.
  const text = await app.inject({ method: 'POST', url: '/api/show', headers: { 'content-type': 'text/plain;charset=UTF-8' }, payload: JSON.stringify({ model: 'shoal/tiny' }) });
  assert.equal(text.statusCode, 200);
  const badJson = await app.inject({ method: 'POST', url: '/api/show', headers: { 'content-type': 'text/x-anything' }, payload: '{' });
  assert.equal(badJson.statusCode, 400);
  assert.ok(typeof badJson.json<{ error: string }>().error === 'string');

  const missing = await app.inject({ method: 'POST', url: '/api/chat', payload: { model: 'nobody', messages: [{ role: 'user', content: 'x' }] } });
  assert.equal(missing.statusCode, 404);
  assert.match(missing.json<{ error: string }>().error, /^model 'nobody' not found/);

  const broken = await app.inject({ method: 'POST', url: '/api/generate', payload: { model: 'shoal/tiny', prompt: 'x' } });
  const lines = broken.body.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(lines.at(-1), { error: 'the runner crashed' });
  await app.close();
});

test('pull and delete answer to the admin access of the /models routes; inference routes to API keys', async () => {
  const app = Fastify();
  await app.register(ollamaRoutes, { dispatcher: fakeDispatcher(() => answer), apiKeys: new ApiKeys(['key']), adminToken: 'admin' });
  const remote = { remoteAddress: '10.0.0.7', headers: { host: '10.0.0.1:52600' } };
  const pull = (authorization: string) =>
    app.inject({ method: 'POST', url: '/api/pull', ...remote, headers: { ...remote.headers, authorization, 'content-type': 'application/json' }, payload: { model: 'org/repo' } });
  const withKey = await pull('Bearer key');
  assert.equal(withKey.statusCode, 401);
  assert.match(withKey.json<{ error: string }>().error, /admin token/);
  // The admin token gets through (to a node without a model store here).
  const withAdmin = await pull('Bearer admin');
  assert.equal(withAdmin.statusCode, 404);
  assert.match(withAdmin.json<{ error: string }>().error, /no model store/);
  const chatWithAdmin = await app.inject({ method: 'POST', url: '/api/chat', ...remote, headers: { ...remote.headers, authorization: 'Bearer admin' }, payload: { model: 'shoal/tiny', messages: [] } });
  assert.equal(chatWithAdmin.statusCode, 401, 'the admin token is no API key');
  await app.close();
});

test('images on user messages and /api/generate become task images, in order; elsewhere they are refused', () => {
  const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2]).toString('base64');
  const gif = Buffer.from('GIF89a\x01\x00', 'latin1').toString('base64');
  const images = [{ mediaType: 'image/png', data: png }, { mediaType: 'image/gif', data: gif }];
  assert.deepEqual(chat({ messages: [{ role: 'system', content: 's' }, { role: 'user', content: 'what is it?', images: [png, gif] }] }).prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: 's' },
      { role: 'user', content: 'what is it?', images },
    ],
  });
  // An empty list means none.
  assert.deepEqual(chat({ messages: [{ role: 'user', content: 'x', images: [] }] }).prompt, { kind: 'chat', messages: [{ role: 'user', content: 'x' }] });
  assert.deepEqual(generate({ prompt: 'Once', system: 'sys', images: [png, gif] }).prompt, {
    kind: 'chat',
    messages: [
      { role: 'system', content: 'sys' },
      { role: 'user', content: 'Once', images },
    ],
  });
  assert.deepEqual(generate({ prompt: 'Once', raw: true, images: [png] }).prompt, { kind: 'text', text: 'Once', images: [images[0]] });
  assert.deepEqual(generate({ prompt: 'Once', images: [gif] }, { ...target, chat: false }).prompt, { kind: 'text', text: 'Once', images: [images[1]] });

  const notImage = failure(() => chat({ messages: [{ role: 'user', content: 'x', images: [png, 'aGk='] }] }));
  assert.equal(notImage.code, 'BAD_REQUEST');
  assert.equal(notImage.param, 'messages[0].images[1]');
  assert.match(notImage.message, /not an image/);
  // Ollama's images are plain base64; a data URL is not.
  assert.equal(failure(() => generate({ prompt: 'x', images: [`data:image/png;base64,${png}`] })).param, 'images[0]');
  const big = failure(() => generate({ prompt: 'x', images: [Buffer.alloc(8 * 1024 * 1024 + 1, 0x89).toString('base64')] }));
  assert.equal(big.code, 'PAYLOAD_TOO_LARGE');
  assert.equal(big.param, 'images[0]');
  const many = failure(() => chat({ messages: [{ role: 'user', content: 'a', images: Array(10).fill(png) }, { role: 'user', content: 'b', images: Array(7).fill(png) }] }));
  assert.equal(many.code, 'BAD_REQUEST');
  assert.equal(many.param, 'messages[1].images[6]');
  for (const role of ['system', 'tool']) {
    const refused = failure(() => chat({ messages: [{ role, content: 'x', images: [png] }] }));
    assert.equal(refused.code, 'UNSUPPORTED_PARAMETER');
    assert.equal(refused.param, 'messages[0].images');
  }
});

test('a vision model lists the vision capability in /api/show (/api/tags has no capabilities, as in Ollama)', () => {
  assert.deepEqual(showBody({ ...listing, capabilities: ['chat', 'completion', 'tools', 'vision'] }).capabilities, ['completion', 'tools', 'vision']);
  assert.equal('capabilities' in tagBody({ ...listing, capabilities: ['chat', 'vision'] }), false);
  assert.deepEqual(showBody(listing).capabilities, ['completion', 'embedding', 'tools']);
});
