import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { z } from 'zod';
import { isShoalError } from '../common/errors.js';
import { anyJson, fuzzParams, mutated } from '../../test/support/fuzz.js';
import { RunnerTask } from '../wire/task.js';
import { countRequestToTask, messagesRequestToTask } from './anthropic/normalize.js';
import { CountTokensRequest, MessagesRequest } from './anthropic/schemas.js';
import { chatRequestToTask as ollamaChatToTask, embedInputs, embedTask, generateRequestToTask, outputFormat, pullPlan, deleteTarget, resolveModelName } from './ollama/normalize.js';
import { ChatRequest, DeleteRequest, EmbedRequest, EmbeddingsRequest, GenerateRequest, PullRequest, ShowRequest } from './ollama/schemas.js';
import { chatRequestToTask, completionRequestToTask, embeddingRequestToTask } from './openai/normalize.js';
import { ChatCompletionRequest, CompletionRequest, EmbeddingRequest } from './openai/schemas.js';
import { responseRequestToTask } from './openai/responses/normalize.js';
import { parseCreateResponse } from './openai/responses/schemas.js';
import { parseBody } from './validation.js';

/**
 * Every API family's request bodies, arbitrary or near-valid: parsing and normalizing either give a
 * task the runner's wire schema accepts or throw a typed ShoalError (a 4xx), never a TypeError or a
 * RangeError that would answer 500.
 */

const MODEL = 'shoal/tiny';
const target = { id: MODEL, chat: true };
const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'] };

interface Route {
  name: string;
  seed: unknown;
  /** What the route does with a body before it dispatches; returns the task, if it makes one. */
  handle: (body: unknown) => RunnerTask | undefined;
}

const via =
  <S extends z.ZodType>(s: S, then: (body: z.infer<S>) => RunnerTask | undefined) =>
  (body: unknown) =>
    then(parseBody(s, body));
/** For routes that look a model up instead of making a task. */
const noTask = (run: () => unknown): undefined => void run();

const ROUTES: Route[] = [
  {
    name: 'POST /v1/chat/completions',
    seed: {
      model: MODEL,
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":"b"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
      max_tokens: 8,
      temperature: 0.5,
      stop: ['\n'],
      tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: schema } }],
      tool_choice: { type: 'function', function: { name: 'f' } },
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
      logprobs: true,
      top_logprobs: 2,
      stream: true,
      stream_options: { include_usage: true },
    },
    handle: via(ChatCompletionRequest, chatRequestToTask),
  },
  { name: 'POST /v1/completions', seed: { model: MODEL, prompt: 'a', max_tokens: 4, echo: false, stop: 'x', seed: 3 }, handle: via(CompletionRequest, completionRequestToTask) },
  { name: 'POST /v1/embeddings', seed: { model: MODEL, input: ['a', 'b'], encoding_format: 'base64' }, handle: via(EmbeddingRequest, embeddingRequestToTask) },
  {
    name: 'POST /v1/responses',
    seed: {
      model: MODEL,
      instructions: 'be brief',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'hi' }] },
        { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'ok' },
      ],
      tools: [{ type: 'function', name: 'f', parameters: schema }],
      tool_choice: { type: 'function', name: 'f' },
      text: { format: { type: 'json_schema', name: 'x', schema } },
      max_output_tokens: 8,
    },
    handle: (body) => responseRequestToTask(parseCreateResponse(body), []).task,
  },
  {
    name: 'POST /v1/messages',
    seed: {
      model: MODEL,
      max_tokens: 8,
      system: [{ type: 'text', text: 'be brief' }],
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: { a: 'b' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: [{ type: 'text', text: 'ok' }], is_error: true }] },
      ],
      tools: [{ name: 'f', description: 'd', input_schema: schema }],
      tool_choice: { type: 'tool', name: 'f' },
      stop_sequences: ['\n'],
      stream: true,
    },
    handle: via(MessagesRequest, messagesRequestToTask),
  },
  { name: 'POST /v1/messages/count_tokens', seed: { model: MODEL, messages: [{ role: 'user', content: 'hi' }], tools: [{ name: 'f', input_schema: schema }] }, handle: via(CountTokensRequest, countRequestToTask) },
  {
    name: 'POST /api/chat',
    seed: {
      model: MODEL,
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: 'hi', images: [] },
        { role: 'assistant', content: '', tool_calls: [{ function: { name: 'f', arguments: { a: 'b' } } }] },
        { role: 'tool', content: 'ok', tool_name: 'f' },
      ],
      tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: schema } }],
      format: schema,
      think: true,
      options: { temperature: 0.2, num_predict: 8, stop: ['\n'], seed: 1 },
      keep_alive: '5m',
      stream: false,
    },
    handle: via(ChatRequest, (body) => {
      outputFormat(body.format);
      return ollamaChatToTask(body, target);
    }),
  },
  { name: 'POST /api/generate', seed: { model: MODEL, prompt: 'hi', system: 's', format: 'json', raw: false, options: { num_predict: 4 }, stream: false }, handle: via(GenerateRequest, (body) => generateRequestToTask(body, target)) },
  {
    name: 'POST /api/embed',
    seed: { model: MODEL, input: ['a', 'b'], truncate: true }, handle: via(EmbedRequest, (body) => {
      const inputs = embedInputs(body.input);
      // The route answers an empty list itself, without a task.
      return inputs.length === 0 ? undefined : embedTask(inputs, body.truncate, target, true);
    }),
  },
  { name: 'POST /api/embeddings', seed: { model: MODEL, prompt: 'a' }, handle: via(EmbeddingsRequest, (body) => embedTask([body.prompt], true, target, false)) },
  { name: 'POST /api/show', seed: { model: MODEL }, handle: via(ShowRequest, (body) => noTask(() => resolveModelName(body.model ?? body.name ?? '', [MODEL]))) },
  {
    name: 'POST /api/pull',
    seed: { model: 'hf.co/someone/some-model-GGUF:Q4_K_M', stream: false },
    handle: via(PullRequest, (body) => noTask(() => pullPlan(body.model ?? body.name ?? '', []))),
  },
  { name: 'DELETE /api/delete', seed: { model: MODEL }, handle: via(DeleteRequest, (body) => noTask(() => deleteTarget(body.model ?? body.name ?? '', [{ id: MODEL }]))) },
];

/** Runs `handle`: a typed refusal is fine, a task must be one the runner (or a remote node) accepts. */
function check(route: Route, body: unknown): void {
  let task: RunnerTask | undefined;
  try {
    task = route.handle(body);
  } catch (error) {
    assert.ok(isShoalError(error), `${route.name} threw ${String(error)} (not a ShoalError) for ${JSON.stringify(body)?.slice(0, 400)}`);
    return;
  }
  if (task !== undefined) {
    const parsed = RunnerTask.safeParse(task);
    assert.ok(parsed.success, `${route.name} made a task its runner refuses: ${parsed.success ? '' : parsed.error.message} for ${JSON.stringify(body)?.slice(0, 400)}`);
  }
}

for (const route of ROUTES) {
  test(`${route.name}: its seed body is served`, () => {
    const task = route.handle(structuredClone(route.seed));
    if (task !== undefined) RunnerTask.parse(task);
  });

  test(`${route.name}: arbitrary and near-valid bodies give a task or a typed error`, () => {
    fc.assert(
      fc.property(fc.oneof({ arbitrary: anyJson, weight: 1 }, { arbitrary: mutated(route.seed), weight: 4 }), (body) => check(route, body)),
      fuzzParams(300),
    );
  });
}
