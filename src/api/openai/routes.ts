import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ShoalError, toShoalError } from '../../common/errors.js';
import type { FinishReason, InferenceTask, Usage } from '../../wire/task.js';
import type { Dispatcher } from '../dispatch.js';
import type { FamilyOptions } from '../server.js';
import { clientAbortSignal, SSE_HEADERS, startTask, writeSseData } from '../stream.js';
import { parseBody } from '../validation.js';
import { fromFastifyError } from '../fastify-errors.js';
import { toOpenAIError } from './errors.js';
import { chatRequestToTask, completionRequestToTask } from './normalize.js';
import { ChatCompletionRequest, CompletionRequest } from './schemas.js';
import {
  chatChunkBody,
  chatCompletionBody,
  chatUsageChunkBody,
  completionBody,
  modelBody,
  openAIId,
  type ResponseMeta,
} from './serialize.js';

type Kind = 'chat' | 'completion';

/** The OpenAI family: `/v1/models`, `/v1/chat/completions`, `/v1/completions`. */
export async function openAIRoutes(app: FastifyInstance, options: FamilyOptions): Promise<void> {
  const { dispatcher } = options;

  app.setErrorHandler((error, _request, reply) => sendOpenAIError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => options.apiKeys.check(request.headers));

  app.get('/v1/models', async () => ({
    object: 'list',
    data: dispatcher.models().map((model) => modelBody(model.id, model.created)),
  }));

  app.get<{ Params: { '*': string } }>('/v1/models/*', async (request) => {
    const id = request.params['*'];
    const model = dispatcher.models().find((m) => m.id === id);
    if (!model) throw new ShoalError('MODEL_NOT_FOUND', `model '${id}' does not exist on this cluster: GET /v1/models lists the models`, { param: 'model' });
    return modelBody(model.id, model.created);
  });

  app.post('/v1/chat/completions', async (request, reply) => {
    const body = parseBody(ChatCompletionRequest, request.body);
    await respond(dispatcher, 'chat', chatRequestToTask(body), body.stream === true, body.stream_options?.include_usage === true, request, reply);
  });

  app.post('/v1/completions', async (request, reply) => {
    const body = parseBody(CompletionRequest, request.body);
    await respond(dispatcher, 'completion', completionRequestToTask(body), body.stream === true, body.stream_options?.include_usage === true, request, reply);
  });
}

async function respond(
  dispatcher: Dispatcher,
  kind: Kind,
  task: InferenceTask,
  stream: boolean,
  includeUsage: boolean,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  const signal = clientAbortSignal(request, reply);
  const meta: ResponseMeta = { id: openAIId(kind === 'chat' ? 'chatcmpl' : 'cmpl'), model: task.model, created: Math.floor(Date.now() / 1000) };
  const started = await startTask(dispatcher, task, signal);
  if (!stream) {
    let text = '';
    let end: { finishReason: FinishReason; usage: Usage } | null = null;
    for (let next = await started.events.next(); !next.done; next = await started.events.next()) {
      const event = next.value;
      if (event.type === 'text') text += event.text;
      else if (event.type === 'end') end = event;
    }
    if (!end) throw new ShoalError('INTERNAL', 'the generation ended without an end event');
    await reply.send(kind === 'chat' ? chatCompletionBody(meta, text, end.finishReason, end.usage) : completionBody(meta, text, end.finishReason, end.usage));
    return;
  }

  reply.hijack();
  reply.raw.writeHead(200, SSE_HEADERS);
  if (kind === 'chat') writeSseData(reply, chatChunkBody(meta, { role: 'assistant', content: '' }, null, includeUsage));
  try {
    for (let next = await started.events.next(); !next.done; next = await started.events.next()) {
      const event = next.value;
      if (event.type === 'text') {
        writeSseData(reply, kind === 'chat' ? chatChunkBody(meta, { content: event.text }, null, includeUsage) : completionChunk(meta, event.text, null, includeUsage));
      } else if (event.type === 'end') {
        writeSseData(reply, kind === 'chat' ? chatChunkBody(meta, {}, event.finishReason, includeUsage) : completionChunk(meta, '', event.finishReason, includeUsage));
        if (includeUsage) writeSseData(reply, kind === 'chat' ? chatUsageChunkBody(meta, event.usage) : { ...completionBody(meta, '', null, event.usage), choices: [] });
      }
    }
    writeSseData(reply, '[DONE]');
  } catch (error) {
    // Headers are gone; OpenAI's convention is an error object as the last data event.
    const failure = toShoalError(error);
    if (failure.code !== 'CANCELLED') {
      request.log.warn({ code: failure.code }, `stream failed: ${failure.message}`);
      writeSseData(reply, toOpenAIError(failure).body);
    }
  } finally {
    reply.raw.end();
  }
}

function completionChunk(meta: ResponseMeta, text: string, finishReason: FinishReason | null, includeUsage: boolean) {
  return { ...completionBody(meta, text, finishReason, null), ...(includeUsage ? { usage: null } : {}) };
}

export function sendOpenAIError(reply: FastifyReply, error: ShoalError, status?: number): FastifyReply {
  const mapped = toOpenAIError(error);
  const code = status ?? mapped.status;
  if (code >= 500) reply.log.error({ err: error.cause ?? error }, error.message);
  return reply.code(code).headers(mapped.headers).send(mapped.body);
}
