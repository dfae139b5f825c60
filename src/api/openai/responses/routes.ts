import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ShoalError, toShoalError } from '../../../common/errors.js';
import type { ChatMessage } from '../../../wire/task.js';
import { fromFastifyError } from '../../fastify-errors.js';
import { IMAGE_ROUTE_MAX_BODY_BYTES } from '../../images.js';
import type { FamilyOptions } from '../../family.js';
import { clientAbortSignal, QUEUE_POSITION_HEADER, SseStream, startTask, writeCoalesced, type StartedTask } from '../../stream.js';
import { sendOpenAIError } from '../routes.js';
import { appendItems, responseRequestToTask } from './normalize.js';
import { parseCreateResponse } from './schemas.js';
import { deletedResponseBody, ResponseAssembler, responseEcho, responsesId, type Finished, type ResponseBody, type StreamEvent } from './serialize.js';
import { ResponseStore } from './store.js';

type IdParams = { Params: { id: string } };

/** The OpenAI Responses API: `POST /v1/responses`, `GET` and `DELETE /v1/responses/{id}`. */
export async function responsesRoutes(app: FastifyInstance, options: FamilyOptions): Promise<void> {
  const { dispatcher } = options;
  const store = new ResponseStore();

  app.setErrorHandler((error, _request, reply) => sendOpenAIError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => options.apiKeys.check(request.headers));

  app.post('/v1/responses', { bodyLimit: IMAGE_ROUTE_MAX_BODY_BYTES }, async (request, reply) => {
    const body = parseCreateResponse(request.body);
    let history: ChatMessage[] = [];
    if (body.previous_response_id) {
      const previous = store.get(body.previous_response_id);
      if (!previous) {
        throw new ShoalError('NOT_FOUND', `Previous response with id '${body.previous_response_id}' not found: it was never stored, was deleted, or was evicted (see docs/LIMITS.md)`, {
          param: 'previous_response_id',
        });
      }
      history = previous.conversation;
    }
    const { task, conversation } = responseRequestToTask(body, history);
    const assembler = new ResponseAssembler({ id: responsesId('resp'), createdAt: Math.floor(Date.now() / 1000), echo: responseEcho(body) });
    // Stored before the client hears the end, so a follow-up with previous_response_id always finds it.
    const keep = (finished: Finished): void => {
      if (body.store === false) return;
      if (!store.put({ response: finished.response, conversation: appendItems(conversation, finished.response.output) })) {
        request.log.warn({ id: finished.response.id }, 'response too large to store; answered with store: false');
        finished.response.store = false;
      }
    };

    const signal = clientAbortSignal(request, reply);
    if (body.stream === true) {
      const sse = new SseStream(reply);
      const started = await sse.start(dispatcher, task, signal, (failure) => writeEvents(reply, [...assembler.begin(), ...assembler.fail(failure).events]));
      if (!started) return;
      await stream(sse, started, assembler, keep, request, reply);
      return;
    }
    const started = await startTask(dispatcher, task, signal);
    reply.header(QUEUE_POSITION_HEADER, started.queuedAt);
    for (let next = await started.events.next(); !next.done; next = await started.events.next()) {
      const event = next.value;
      if (event.type !== 'end') {
        assembler.push(event);
        continue;
      }
      const finished = assembler.finish(event.finishReason, event.usage);
      keep(finished);
      await reply.send(finished.response);
      return;
    }
    throw new ShoalError('INTERNAL', 'the generation ended without an end event');
  });

  app.get<IdParams>('/v1/responses/:id', async (request) => {
    refuseQuery(request);
    return storedResponse(store, request.params.id);
  });

  app.delete<IdParams>('/v1/responses/:id', async (request) => {
    refuseQuery(request);
    if (!store.delete(request.params.id)) throw notFound(request.params.id);
    return deletedResponseBody(request.params.id);
  });
}

function notFound(id: string): ShoalError {
  return new ShoalError('NOT_FOUND', `Response with id '${id}' not found: it was never stored (store: false), was deleted, or was evicted`, { param: 'response_id' });
}

function storedResponse(store: ResponseStore, id: string): ResponseBody {
  const record = store.get(id);
  if (!record) throw notFound(id);
  return record.response;
}

/** `include`, `stream` and `starting_after` replay features of background responses, which Shoal does not have. */
function refuseQuery(request: FastifyRequest): void {
  const [name] = Object.keys((request.query ?? {}) as Record<string, unknown>);
  if (name !== undefined) {
    throw new ShoalError('UNSUPPORTED_PARAMETER', `unsupported query parameter '${name}': Shoal does not implement it (see docs/API.md)`, { param: name });
  }
}

function writeEvents(reply: FastifyReply, events: readonly StreamEvent[]): void {
  // The event name is one of Shoal's fixed types; JSON.stringify escapes newlines in model text.
  for (const event of events) writeCoalesced(reply.raw, `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
}

async function stream(
  sse: SseStream,
  started: StartedTask,
  assembler: ResponseAssembler,
  keep: (finished: Finished) => void,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  sse.open(started.queuedAt);
  writeEvents(reply, assembler.begin());
  try {
    for (let next = await started.events.next(); !next.done; next = await started.events.next()) {
      const event = next.value;
      if (event.type !== 'end') {
        writeEvents(reply, assembler.push(event));
        continue;
      }
      const finished = assembler.finish(event.finishReason, event.usage);
      keep(finished);
      writeEvents(reply, finished.events);
      return;
    }
    throw new ShoalError('INTERNAL', 'the generation ended without an end event');
  } catch (error) {
    // Headers are gone: the failure becomes the stream's last event.
    const failure = toShoalError(error);
    if (failure.code !== 'CANCELLED') {
      request.log.warn({ code: failure.code }, `response stream failed: ${failure.message}`);
      writeEvents(reply, assembler.fail(failure).events);
    }
  } finally {
    reply.raw.end();
  }
}
