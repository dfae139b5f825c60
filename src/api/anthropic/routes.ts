import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ShoalError, toShoalError } from '../../common/errors.js';
import type { InferenceTask, TaskEvent } from '../../wire/task.js';
import type { Dispatcher } from '../dispatch.js';
import { fromFastifyError } from '../fastify-errors.js';
import { IMAGE_ROUTE_MAX_BODY_BYTES } from '../images.js';
import type { FamilyOptions } from '../family.js';
import { clientAbortSignal, QUEUE_POSITION_HEADER, SseStream, startTask, writeCoalesced, type StartedTask } from '../stream.js';
import { parseBody } from '../validation.js';
import { toAnthropicError } from './errors.js';
import { countRequestToTask, messagesRequestToTask } from './normalize.js';
import { CountTokensRequest, MessagesRequest } from './schemas.js';
import {
  anthropicMessageId,
  ContentAssembler,
  messageBody,
  messageEndEvents,
  messageStartEvent,
  sseFrame,
  toAnthropicUsage,
  type ContentEvent,
  type MessageMeta,
  type StreamEvent,
} from './serialize.js';

/**
 * The Anthropic family: `/v1/messages` and `/v1/messages/count_tokens`. The official SDK's
 * `x-api-key` is checked by the shared key hook; `anthropic-version` is accepted whatever its value.
 */
export async function anthropicRoutes(app: FastifyInstance, options: FamilyOptions): Promise<void> {
  const { dispatcher } = options;

  app.setErrorHandler((error, _request, reply) => sendAnthropicError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => options.apiKeys.check(request.headers));

  app.post('/v1/messages', { bodyLimit: IMAGE_ROUTE_MAX_BODY_BYTES }, async (request, reply) => {
    const body = parseBody(MessagesRequest, request.body);
    await respond(dispatcher, messagesRequestToTask(body), body.stream === true, request, reply);
  });

  app.post('/v1/messages/count_tokens', { bodyLimit: IMAGE_ROUTE_MAX_BODY_BYTES }, async (request, reply) => {
    const task = countRequestToTask(parseBody(CountTokensRequest, request.body));
    const started = await startTask(dispatcher, task, clientAbortSignal(request, reply));
    // Drained so the task ends in the dispatcher's books; a count yields nothing after `start` but its `end`.
    let next;
    do next = await started.events.next();
    while (!next.done);
    reply.header(QUEUE_POSITION_HEADER, started.queuedAt);
    return { input_tokens: started.promptTokens };
  });
}

type End = Extract<TaskEvent, { type: 'end' }>;

/** Routes one event of a generation: content to the assembler, `end` out; anything else breaks the contract. */
function contentOrEnd(event: TaskEvent): ContentEvent | End {
  if (event.type === 'queued' || event.type === 'start' || event.type === 'embeddings' || event.type === 'transcript') {
    throw new ShoalError('INTERNAL', `the runner sent a '${event.type}' event in the middle of a generation`);
  }
  return event;
}

async function respond(dispatcher: Dispatcher, task: InferenceTask, stream: boolean, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const meta: MessageMeta = { id: anthropicMessageId(), model: task.model };
  // Aborted when this handler gives up early (an adapter error), so the runner does not generate on for nobody.
  const abandon = new AbortController();
  const signal = AbortSignal.any([clientAbortSignal(request, reply), abandon.signal]);
  let ended = false;
  try {
    const assembler = new ContentAssembler();
    if (!stream) {
      const started = await startTask(dispatcher, task, signal);
      const end = await collect(started, assembler);
      ended = true;
      await reply.header(QUEUE_POSITION_HEADER, started.queuedAt).send(messageBody(meta, assembler.content(end.finishReason), end, toAnthropicUsage(end.usage)));
      return;
    }
    const write = (events: StreamEvent[]): void => writeCoalesced(reply.raw, events.map(sseFrame).join(''));
    const sse = new SseStream(reply);
    // As mid-stream: Anthropic's convention is an `error` event carrying the usual error body.
    const started = await sse.start(dispatcher, task, signal, (failure) => write([toAnthropicError(failure).body]));
    if (!started) return;
    sse.open(started.queuedAt);
    write([messageStartEvent(meta, started.promptTokens)]);
    try {
      for (let next = await started.events.next(); !next.done; next = await started.events.next()) {
        const event = contentOrEnd(next.value);
        if (event.type !== 'end') {
          write(assembler.push(event));
          continue;
        }
        ended = true;
        write([...assembler.finish(), ...messageEndEvents(event, event.usage)]);
      }
    } catch (error) {
      // Headers are gone; Anthropic's convention is an `error` event carrying the usual error body.
      const failure = toShoalError(error);
      if (failure.code !== 'CANCELLED') {
        request.log.warn({ code: failure.code }, `stream failed: ${failure.message}`);
        write([toAnthropicError(failure).body]);
      }
    } finally {
      reply.raw.end();
    }
  } finally {
    if (!ended) abandon.abort(new ShoalError('CANCELLED', 'the response failed before the generation ended'));
  }
}

/** Runs a non-streamed generation to its end, feeding the assembler. */
async function collect(started: StartedTask, assembler: ContentAssembler): Promise<End> {
  let end: End | null = null;
  for (let next = await started.events.next(); !next.done; next = await started.events.next()) {
    const event = contentOrEnd(next.value);
    if (event.type === 'end') end = event;
    else assembler.push(event);
  }
  if (!end) throw new ShoalError('INTERNAL', 'the generation ended without an end event');
  assembler.finish();
  return end;
}

export function sendAnthropicError(reply: FastifyReply, error: ShoalError, status?: number): FastifyReply {
  const mapped = toAnthropicError(error);
  const code = status ?? mapped.status;
  if (code >= 500) reply.log.error({ err: error.cause ?? error }, error.message);
  return reply.code(code).headers(mapped.headers).send(mapped.body);
}
