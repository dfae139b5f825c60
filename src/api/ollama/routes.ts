import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { assertNever, ShoalError, toShoalError } from '../../common/errors.js';
import { shoalVersion } from '../../common/version.js';
import type { EmbeddingTask, FinishReason, InferenceTask, Usage } from '../../wire/task.js';
import type { Dispatcher, ModelListing } from '../dispatch.js';
import { fromFastifyError } from '../fastify-errors.js';
import { IMAGE_ROUTE_MAX_BODY_BYTES } from '../images.js';
import { checkJsonDepth } from '../json-body.js';
import type { FamilyOptions } from '../family.js';
import { clientAbortSignal, startTask, writeCoalesced, type StartedTask } from '../stream.js';
import { parseBody } from '../validation.js';
import type { DownloadView } from '../../models/views.js';
import type { ModelsControl } from '../control/models-port.js';
import { checkAdmin, type AdminToken } from '../control/routes.js';
import { downloadFailure, toOllamaError } from './errors.js';
import {
  chatRequestToTask,
  deleteTarget,
  embedInputs,
  embedTask,
  generateRequestToTask,
  pullPlan,
  resolveModelName,
  wantsThinking,
  type TargetModel,
} from './normalize.js';
import { ChatRequest, DeleteRequest, EmbeddingsRequest, EmbedRequest, GenerateRequest, PullRequest, ShowRequest } from './schemas.js';
import {
  chatChunkBody,
  chatDoneBody,
  chatLoadBody,
  doneStats,
  embedBody,
  embeddingsBody,
  generateChunkBody,
  generateDoneBody,
  generateLoadBody,
  ndjsonLine,
  NDJSON_HEADERS,
  psBody,
  pullProgressBodies,
  pullStepBody,
  showBody,
  tagBody,
  toolCallBodies,
  ollamaLogprobs,
  type AnswerPart,
  type CollectedToolCall,
  type DoneStats,
  type OllamaToolCallBody,
} from './serialize.js';

/** How one endpoint shapes its streamed chunks and its final object. */
interface AnswerShape {
  chunk(model: string, createdAt: string, part: AnswerPart): object;
  done(model: string, createdAt: string, part: AnswerPart, finishReason: FinishReason, stats: DoneStats): object;
}

const CHAT: AnswerShape = { chunk: chatChunkBody, done: chatDoneBody };
const GENERATE: AnswerShape = { chunk: generateChunkBody, done: generateDoneBody };

/** How often a streamed `/api/pull` reads the download's progress. */
export const PULL_PROGRESS_POLL_MS = 250;

/** Routes that change the node's disk: they answer to the access of the /models routes, not to API keys. */
const MANAGEMENT_ROUTES = new Set(['/api/pull', '/api/delete']);

export interface OllamaRoutesOptions extends FamilyOptions {
  /** The node's models on disk, for `/api/pull` and `/api/delete` (without it they answer 404). */
  models?: ModelsControl;
  /** `/api/pull` and `/api/delete` need it from other machines, as the /models routes do. */
  adminToken: AdminToken;
}

/**
 * The Ollama family: `/api/chat`, `/api/generate`, `/api/embed(dings)`, `/api/tags`, `/api/ps`,
 * `/api/show`, `/api/version`, and model management: `/api/pull`, `/api/delete`.
 */
export async function ollamaRoutes(app: FastifyInstance, options: OllamaRoutesOptions): Promise<void> {
  const { dispatcher } = options;
  const version = shoalVersion();
  const models = (): ModelsControl => {
    if (options.models) return options.models;
    throw new ShoalError('NOT_FOUND', 'this node serves no model store, so it cannot pull or delete models');
  };

  app.setErrorHandler((error, _request, reply) => sendOllamaError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => {
    if (MANAGEMENT_ROUTES.has(request.routeOptions.url ?? '')) checkAdmin(request, options.adminToken);
    else options.apiKeys.check(request.headers);
  });
  // Ollama reads every body as JSON whatever its content type: its own docs post with `curl -d`
  // (form-encoded) and fetch() sends a string body as text/plain. Fastify's parser keeps application/json.
  // The same parser as application/json (prototype-poisoning checks included): a `__proto__` key
  // is refused here as it would be when the body is routed to another node.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
    try {
      checkJsonDepth(body as string);
    } catch (error) {
      done(error as Error, undefined);
      return;
    }
    parseJson(request, body as string, done);
  });

  app.get('/api/version', async () => ({ version }));

  app.get('/api/tags', async () => ({ models: dispatcher.models().map(tagBody) }));

  app.get('/api/ps', async () => ({ models: dispatcher.models().filter((m) => m.ready).map(psBody) }));

  app.post('/api/show', async (request) => {
    const body = parseBody(ShowRequest, request.body);
    return showBody(findModel(dispatcher, body.model ?? body.name!));
  });

  app.post('/api/chat', { bodyLimit: IMAGE_ROUTE_MAX_BODY_BYTES }, async (request, reply) => {
    const receivedNs = process.hrtime.bigint();
    const body = parseBody(ChatRequest, request.body);
    const model = findModel(dispatcher, body.model);
    if ((body.messages ?? []).length === 0) return reply.send(chatLoadBody(body.model, loaded(model)));
    const task = chatRequestToTask(body, target(model));
    await respond(dispatcher, task, CHAT, { name: body.model, stream: body.stream ?? true, thinking: wantsThinking(body.think), receivedNs }, request, reply);
  });

  app.post('/api/generate', { bodyLimit: IMAGE_ROUTE_MAX_BODY_BYTES }, async (request, reply) => {
    const receivedNs = process.hrtime.bigint();
    const body = parseBody(GenerateRequest, request.body);
    const model = findModel(dispatcher, body.model);
    if ((body.prompt ?? '') === '') return reply.send(generateLoadBody(body.model, loaded(model)));
    const task = generateRequestToTask(body, target(model));
    await respond(dispatcher, task, GENERATE, { name: body.model, stream: body.stream ?? true, thinking: wantsThinking(body.think), receivedNs }, request, reply);
  });

  app.post('/api/embed', async (request, reply) => {
    const receivedNs = process.hrtime.bigint();
    const body = parseBody(EmbedRequest, request.body);
    const model = findModel(dispatcher, body.model);
    const inputs = embedInputs(body.input);
    if (inputs.length === 0) return embedBody(body.model, [], 0, 0, 0);
    const task = embedTask(inputs, body.truncate, target(model), true);
    const result = await embed(dispatcher, task, clientAbortSignal(request, reply));
    const endedNs = process.hrtime.bigint();
    return embedBody(body.model, result.vectors, Number(endedNs - receivedNs), Number(result.startedNs - receivedNs), result.promptTokens);
  });

  app.post('/api/pull', async (request, reply) => {
    const body = parseBody(PullRequest, request.body);
    const name = body.model ?? body.name!;
    const download = await startPull(models(), name);
    const signal = clientAbortSignal(request, reply);
    // The download runs on in the background when the client goes away: another pull joins it.
    if (!(body.stream ?? true)) {
      for await (const _ of pullProgress(models(), download, signal));
      return pullStepBody('success');
    }
    reply.hijack();
    reply.raw.writeHead(200, NDJSON_HEADERS);
    try {
      for await (const line of pullProgress(models(), download, signal)) reply.raw.write(ndjsonLine(line));
    } catch (error) {
      const failure = toShoalError(error);
      if (failure.code !== 'CANCELLED') {
        request.log.warn({ code: failure.code }, `pull failed: ${failure.message}`);
        reply.raw.write(ndjsonLine(toOllamaError(failure).body));
      }
    } finally {
      reply.raw.end();
    }
  });

  app.delete('/api/delete', async (request, reply) => {
    const body = parseBody(DeleteRequest, request.body);
    const name = body.model ?? body.name!;
    const { models: known } = await models().list();
    await models().removeEverywhere(deleteTarget(name, known));
    // Ollama answers a deletion with an empty 200.
    return reply.code(200).send();
  });

  app.post('/api/embeddings', async (request, reply) => {
    const body = parseBody(EmbeddingsRequest, request.body);
    const model = findModel(dispatcher, body.model);
    if (body.prompt === '') return embeddingsBody([]);
    // Like Ollama, the legacy endpoint answers the vector as the model produced it.
    const task = embedTask([body.prompt], true, target(model), false);
    const result = await embed(dispatcher, task, clientAbortSignal(request, reply));
    return embeddingsBody(result.vectors[0]!);
  });
}

/** Starts what a pull of `name` needs: null when the model is already here, else the download (started or joined). */
async function startPull(models: ModelsControl, name: string): Promise<DownloadView | null> {
  const plan = pullPlan(name, (await models.list()).models);
  switch (plan.kind) {
    case 'present':
      return null;
    case 'download':
      return (await models.pull(plan.id)).download;
    case 'add': {
      const added = await models.add({ repo: plan.repo, pull: true });
      return added.download;
    }
    default:
      return assertNever(plan, 'pull plan');
  }
}

/** Ollama's pull progress for a download, to `success`; a failed or cancelled download throws. */
async function* pullProgress(models: ModelsControl, download: DownloadView | null, signal: AbortSignal): AsyncGenerator<object> {
  yield pullStepBody('pulling manifest');
  const sent = new Map<string, number>();
  for (let view = download; view !== null; view = models.getDownload(view.id)) {
    yield* pullProgressBodies(view, sent);
    if (view.state === 'done') break;
    if (view.state === 'failed' || view.state === 'cancelled') throw downloadFailure(view.error, `the download of ${view.modelId}`);
    await sleep(PULL_PROGRESS_POLL_MS, signal);
  }
  // The store verified every file against the hub's SHA-256 before the download was done.
  yield pullStepBody('verifying sha256 digest');
  yield pullStepBody('writing manifest');
  yield pullStepBody('success');
}

async function sleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) throw new ShoalError('CANCELLED', 'the client went away');
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

function findModel(dispatcher: Dispatcher, name: string): ModelListing {
  const listings = dispatcher.models();
  const id = resolveModelName(name, listings.map((m) => m.id));
  const model = listings.find((m) => m.id === id);
  if (model) return model;
  const placed = listings.map((m) => m.id).join(', ');
  const hint = placed === '' ? 'no models are placed on this cluster' : `this cluster serves ${placed} (GET /api/tags lists them)`;
  throw new ShoalError('MODEL_NOT_FOUND', `model '${name}' not found: ${hint}`, { param: 'model' });
}

function target(model: ModelListing): TargetModel {
  return { id: model.id, chat: model.capabilities.includes('chat') };
}

/** A load request succeeds once the model is ready; Shoal loads models when they are placed, not on demand. */
function loaded(model: ModelListing): string {
  if (!model.ready) throw new ShoalError('MODEL_LOADING', `model '${model.id}' is not ready yet: retry shortly`);
  return new Date().toISOString();
}

interface RespondOptions {
  /** The model name as the client sent it; Ollama echoes it. */
  name: string;
  stream: boolean;
  thinking: boolean;
  receivedNs: bigint;
}

interface AnswerEnd {
  finishReason: FinishReason;
  usage: Usage;
  toolCalls: OllamaToolCallBody[];
  firstOutputNs: bigint | null;
}

/** Reads a generation to its end, handing text and thinking to `onPart` as they come; tool calls come back whole. */
async function readAnswer(started: StartedTask, thinking: boolean, topLogprobs: number | null, onPart: (part: AnswerPart) => void): Promise<AnswerEnd> {
  const calls: CollectedToolCall[] = [];
  let firstOutputNs: bigint | null = null;
  let end: { finishReason: FinishReason; usage: Usage } | null = null;
  for (let next = await started.events.next(); !next.done; next = await started.events.next()) {
    const event = next.value;
    if (event.type !== 'end') firstOutputNs ??= process.hrtime.bigint();
    switch (event.type) {
      case 'text':
        onPart({ content: event.text, ...(topLogprobs !== null && event.logprobs ? { logprobs: ollamaLogprobs(event.logprobs, topLogprobs) } : {}) });
        break;
      case 'reasoning':
        // think: false hides the thinking; Shoal cannot stop a model from doing it.
        if (thinking) onPart({ content: '', thinking: event.text });
        break;
      case 'tool_call':
        calls.push({ index: event.index, id: event.id, name: event.name, arguments: '' });
        break;
      case 'tool_call_delta': {
        const call = calls.find((c) => c.index === event.index);
        if (!call) throw new ShoalError('INTERNAL', `the runner sent arguments for tool call ${event.index} before the call`);
        call.arguments += event.arguments;
        break;
      }
      case 'end':
        end = event;
        break;
      case 'queued':
      case 'start':
      case 'embeddings':
      case 'transcript':
        throw new ShoalError('INTERNAL', `the runner sent an unexpected '${event.type}' event during a generation`);
      default:
        assertNever(event, 'task event');
    }
  }
  if (!end) throw new ShoalError('INTERNAL', 'the generation ended without an end event');
  return { ...end, toolCalls: toolCallBodies(calls, end.finishReason), firstOutputNs };
}

function appendPart(whole: AnswerPart, part: AnswerPart): void {
  whole.content += part.content;
  if (part.thinking) whole.thinking = (whole.thinking ?? '') + part.thinking;
  if (part.logprobs) whole.logprobs = [...(whole.logprobs ?? []), ...part.logprobs];
}

async function respond(dispatcher: Dispatcher, task: InferenceTask, shape: AnswerShape, options: RespondOptions, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const signal = clientAbortSignal(request, reply);
  const started = await startTask(dispatcher, task, signal);
  const startedNs = process.hrtime.bigint();
  const topLogprobs = task.logprobs?.top ?? null;
  const stats = (end: AnswerEnd): DoneStats => {
    const timings = { receivedNs: options.receivedNs, startedNs, firstOutputNs: end.firstOutputNs, endedNs: process.hrtime.bigint() };
    return doneStats(timings, end.usage);
  };

  if (!options.stream) {
    const whole: AnswerPart = { content: '', ...(topLogprobs === null ? {} : { logprobs: [] }) };
    const end = await readAnswer(started, options.thinking, topLogprobs, (part) => appendPart(whole, part));
    await reply.send(shape.done(options.name, new Date().toISOString(), { ...whole, toolCalls: end.toolCalls }, end.finishReason, stats(end)));
    return;
  }

  reply.hijack();
  reply.raw.writeHead(200, NDJSON_HEADERS);
  const write = (payload: object): void => writeCoalesced(reply.raw, ndjsonLine(payload));
  try {
    const end = await readAnswer(started, options.thinking, topLogprobs, (part) => write(shape.chunk(options.name, new Date().toISOString(), part)));
    if (end.toolCalls.length > 0) write(shape.chunk(options.name, new Date().toISOString(), { content: '', toolCalls: end.toolCalls }));
    write(shape.done(options.name, new Date().toISOString(), { content: '' }, end.finishReason, stats(end)));
  } catch (error) {
    // Headers are gone; Ollama's convention is an `{error}` object as the last line.
    const failure = toShoalError(error);
    if (failure.code !== 'CANCELLED') {
      request.log.warn({ code: failure.code }, `stream failed: ${failure.message}`);
      write(toOllamaError(failure).body);
    }
  } finally {
    reply.raw.end();
  }
}

interface EmbedResult {
  vectors: number[][];
  promptTokens: number;
  startedNs: bigint;
}

async function embed(dispatcher: Dispatcher, task: EmbeddingTask, signal: AbortSignal): Promise<EmbedResult> {
  const started = await startTask(dispatcher, task, signal);
  const startedNs = process.hrtime.bigint();
  let vectors: number[][] | null = null;
  let promptTokens = started.promptTokens;
  for (let next = await started.events.next(); !next.done; next = await started.events.next()) {
    const event = next.value;
    if (event.type === 'embeddings') vectors = event.vectors;
    else if (event.type === 'end') promptTokens = event.usage.promptTokens;
  }
  if (!vectors || vectors.length !== task.inputs.length) {
    throw new ShoalError('INTERNAL', `the runner returned ${vectors?.length ?? 0} embeddings for ${task.inputs.length} inputs`);
  }
  return { vectors, promptTokens, startedNs };
}

export function sendOllamaError(reply: FastifyReply, error: ShoalError, status?: number): FastifyReply {
  const mapped = toOllamaError(error);
  const code = status ?? mapped.status;
  if (code >= 500) reply.log.error({ err: error.cause ?? error }, error.message);
  return reply.code(code).headers(mapped.headers).send(mapped.body);
}

/** The version in Shoal's package.json, found by walking up from this module (the depth differs between src/ and dist/). */
