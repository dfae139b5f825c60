import type { FastifyInstance, FastifyReply } from 'fastify';
import { ShoalError, toShoalError } from '../../common/errors.js';
import type { TaskEvent } from '../../wire/task.js';
import { collectAnswer } from '../collect.js';
import { fromFastifyError } from '../fastify-errors.js';
import { IMAGE_ROUTE_MAX_BODY_BYTES } from '../images.js';
import type { FamilyOptions } from '../family.js';
import { clientAbortSignal, QUEUE_POSITION_HEADER, SseStream, startTask, writeSseData, type StartedTask } from '../stream.js';
import type { SpeechControl } from '../speech-port.js';
import type { AudioDecoder } from '../audio-port.js';
import { parseBody } from '../validation.js';
import { toOpenAIError } from './errors.js';
import { chatRequestToTask, completionRequestToTask, embeddingRequestToTask } from './normalize.js';
import { ChatCompletionRequest, CompletionRequest, EmbeddingRequest } from './schemas.js';
import { realtimeRoutes } from './realtime/routes.js';
import { speechRoutes } from './speech.js';
import { transcriptionRoutes } from './transcriptions.js';
import {
  chatChunkBody,
  chatCompletionBody,
  chatUsageChunkBody,
  completionBody,
  completionLogprobs,
  embeddingsBody,
  modelBody,
  openAIId,
  type ResponseMeta,
} from './serialize.js';

/**
 * The OpenAI family: `/v1/models`, `/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`, and
 * `/v1/audio/speech` and the `/v1/realtime` WebSocket when the node has a voice (listed among the
 * models), `/v1/audio/transcriptions` and `/v1/audio/translations` when it can decode audio.
 */
export async function openAIRoutes(app: FastifyInstance, options: FamilyOptions & { speech?: SpeechControl; audio?: AudioDecoder }): Promise<void> {
  const { dispatcher, speech } = options;
  const models = (): { id: string; created: number }[] => [...dispatcher.models(), ...(speech ? [{ id: speech.modelId, created: speech.createdS }] : [])];

  app.setErrorHandler((error, _request, reply) => sendOpenAIError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => options.apiKeys.check(request.headers));

  app.get('/v1/models', async () => ({
    object: 'list',
    data: models().map((model) => modelBody(model.id, model.created)),
  }));

  app.get<{ Params: { '*': string } }>('/v1/models/*', async (request) => {
    const id = request.params['*'];
    const model = models().find((m) => m.id === id);
    if (!model) throw new ShoalError('MODEL_NOT_FOUND', `model '${id}' does not exist on this cluster: GET /v1/models lists the models`, { param: 'model' });
    return modelBody(model.id, model.created);
  });

  app.post('/v1/chat/completions', { bodyLimit: IMAGE_ROUTE_MAX_BODY_BYTES }, async (request, reply) => {
    const body = parseBody(ChatCompletionRequest, request.body);
    const task = chatRequestToTask(body);
    const meta = newMeta('chatcmpl', task.model);
    const signal = clientAbortSignal(request, reply);
    if (body.stream !== true) {
      const started = await startTask(dispatcher, task, signal);
      reply.header(QUEUE_POSITION_HEADER, started.queuedAt);
      await reply.send(chatCompletionBody(meta, await collectAnswer(started.events, task.logprobs !== null)));
      return;
    }
    const sse = new SseStream(reply);
    const started = await sse.start(dispatcher, task, signal, (failure) => writeSseData(reply, toOpenAIError(failure).body));
    if (!started) return;
    const includeUsage = body.stream_options?.include_usage === true;
    await streamSse(reply, sse, started, (event, write) => {
      switch (event.type) {
        case 'text':
          write(chatChunkBody(meta, { content: event.text }, null, includeUsage, event.logprobs));
          break;
        case 'reasoning':
          write(chatChunkBody(meta, { reasoning_content: event.text }, null, includeUsage));
          break;
        case 'tool_call':
          write(chatChunkBody(meta, { tool_calls: [{ index: event.index, id: event.id, type: 'function', function: { name: event.name, arguments: '' } }] }, null, includeUsage));
          break;
        case 'tool_call_delta':
          write(chatChunkBody(meta, { tool_calls: [{ index: event.index, function: { arguments: event.arguments } }] }, null, includeUsage));
          break;
        case 'end':
          write(chatChunkBody(meta, {}, event.finishReason, includeUsage));
          if (includeUsage) write(chatUsageChunkBody(meta, event.usage));
          break;
        case 'start':
        case 'embeddings':
          break;
      }
    }, () => writeSseData(reply, chatChunkBody(meta, { role: 'assistant', content: '' }, null, includeUsage)));
  });

  app.post('/v1/completions', async (request, reply) => {
    const body = parseBody(CompletionRequest, request.body);
    const task = completionRequestToTask(body);
    const meta = newMeta('cmpl', task.model);
    const signal = clientAbortSignal(request, reply);
    if (body.stream !== true) {
      const started = await startTask(dispatcher, task, signal);
      reply.header(QUEUE_POSITION_HEADER, started.queuedAt);
      const answer = await collectAnswer(started.events, task.logprobs !== null);
      await reply.send(completionBody(meta, answer.text, answer.finishReason, answer.usage, answer.logprobs ? completionLogprobs(answer.logprobs, 0) : null));
      return;
    }
    const sse = new SseStream(reply);
    const started = await sse.start(dispatcher, task, signal, (failure) => writeSseData(reply, toOpenAIError(failure).body));
    if (!started) return;
    const includeUsage = body.stream_options?.include_usage === true;
    let offset = 0;
    await streamSse(reply, sse, started, (event, write) => {
      if (event.type === 'text') {
        const logprobs = event.logprobs ? completionLogprobs(event.logprobs, offset) : null;
        offset += event.text.length;
        write({ ...completionBody(meta, event.text, null, null, logprobs), ...(includeUsage ? { usage: null } : {}) });
      } else if (event.type === 'end') {
        write({ ...completionBody(meta, '', event.finishReason, null), ...(includeUsage ? { usage: null } : {}) });
        if (includeUsage) write({ ...completionBody(meta, '', null, event.usage), choices: [] });
      }
    });
  });

  if (speech) speechRoutes(app, speech, dispatcher);
  if (options.audio) transcriptionRoutes(app, dispatcher, options.audio);
  if (speech) void app.register(realtimeRoutes, { dispatcher, speech });

  app.post('/v1/embeddings', async (request, reply) => {
    const body = parseBody(EmbeddingRequest, request.body);
    const task = embeddingRequestToTask(body);
    const started = await startTask(dispatcher, task, clientAbortSignal(request, reply));
    reply.header(QUEUE_POSITION_HEADER, started.queuedAt);
    const answer = await collectAnswer(started.events, false);
    await reply.send(embeddingsBody(task.model, answer.vectors, body.encoding_format ?? 'float', answer.usage.promptTokens));
  });
}

function newMeta(prefix: 'chatcmpl' | 'cmpl', model: string): ResponseMeta {
  return { id: openAIId(prefix), model, created: Math.floor(Date.now() / 1000) };
}

/**
 * Streams a started task as OpenAI server-sent events, ending with `[DONE]`. A failure after the
 * headers went out becomes a final error event, which is OpenAI's convention.
 */
async function streamSse(
  reply: FastifyReply,
  sse: SseStream,
  started: StartedTask,
  onEvent: (event: TaskEvent, write: (body: unknown) => void) => void,
  onOpen?: () => void,
): Promise<void> {
  const { events } = started;
  sse.open(started.queuedAt);
  onOpen?.();
  const write = (body: unknown): void => writeSseData(reply, body);
  try {
    for (let next = await events.next(); !next.done; next = await events.next()) onEvent(next.value, write);
    writeSseData(reply, '[DONE]');
  } catch (error) {
    const failure = toShoalError(error);
    if (failure.code !== 'CANCELLED') {
      reply.log.warn({ code: failure.code }, `stream failed: ${failure.message}`);
      writeSseData(reply, toOpenAIError(failure).body);
    }
  } finally {
    await events.return?.();
    reply.raw.end();
  }
}

export function sendOpenAIError(reply: FastifyReply, error: ShoalError, status?: number): FastifyReply {
  const mapped = toOpenAIError(error);
  const code = status ?? mapped.status;
  if (code >= 500) reply.log.error({ err: error.cause ?? error }, error.message);
  return reply.code(code).headers(mapped.headers).send(mapped.body);
}
