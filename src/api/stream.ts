import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ShoalError, toShoalError } from '../common/errors.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { Dispatcher } from './dispatch.js';

/**
 * Cancels the returned signal when the client goes away before the response is complete, so a
 * disconnect stops generation instead of burning the sequence to the end.
 */
export function clientAbortSignal(request: FastifyRequest, reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  const onClose = (): void => {
    if (!reply.raw.writableFinished) controller.abort(new ShoalError('CANCELLED', 'the client disconnected'));
  };
  reply.raw.once('close', onClose);
  request.raw.once('aborted', onClose);
  return controller.signal;
}

export interface StartedTask {
  promptTokens: number;
  events: AsyncIterator<TaskEvent>;
  /** The queue position the task first reported while it waited for a slot; 0 when it got one at once. */
  queuedAt: number;
}

/**
 * The queue position a request had when it first waited for a slot (0: none), on every response
 * whose headers go out after that is known: every non-streamed answer and every stream.
 */
export const QUEUE_POSITION_HEADER = 'x-shoal-queue-position';

/**
 * Starts a task and waits for its `start` event, so failures before generation (unknown model,
 * loading, prompt too long) still become a proper HTTP status instead of a broken stream. The
 * engine's `queued` reports before it go to `onQueued`, never into the returned events.
 */
export async function startTask(dispatcher: Dispatcher, task: RunnerTask, signal: AbortSignal, onQueued?: (position: number) => void): Promise<StartedTask> {
  const events = dispatcher.run(task, signal)[Symbol.asyncIterator]();
  let queuedAt = 0;
  let first = await events.next();
  while (!first.done && first.value.type === 'queued') {
    if (queuedAt === 0) queuedAt = first.value.position;
    onQueued?.(first.value.position);
    first = await events.next();
  }
  if (first.done || first.value.type !== 'start') {
    throw new ShoalError('INTERNAL', 'the runner did not start the task with a start event');
  }
  return { promptTokens: first.value.promptTokens, events, queuedAt };
}

/**
 * A server-sent event stream that opens before its task starts if the task has to queue: the
 * client then sees its place as SSE comments (`: queued position=N`), which every SSE parser skips,
 * instead of silence. A task admitted at once opens it at `start` as before, so its failures before
 * generation keep their HTTP status; one that queued reports them in the stream, as the family
 * reports a failure mid-answer.
 */
export class SseStream {
  private opened = false;

  constructor(private readonly reply: FastifyReply) {}

  /** Sends the headers (once), with the position the request first waited at. */
  open(queuedAt: number): void {
    if (this.opened) return;
    this.opened = true;
    this.reply.hijack();
    this.reply.raw.writeHead(200, { ...SSE_HEADERS, [QUEUE_POSITION_HEADER]: String(queuedAt) });
  }

  /** For startTask's `onQueued`. */
  readonly queued = (position: number): void => {
    this.open(position);
    writeCoalesced(this.reply.raw, `: queued position=${position}\n\n`);
  };

  /**
   * Starts the task, reporting its queue positions in the stream. A failure before `start` once the
   * stream is open goes to `writeFailure` (unless the client cancelled) and ends the response:
   * then null. Before the stream opened it throws, for the route's usual error response.
   */
  async start(dispatcher: Dispatcher, task: RunnerTask, signal: AbortSignal, writeFailure: (failure: ShoalError) => void): Promise<StartedTask | null> {
    try {
      return await startTask(dispatcher, task, signal, this.queued);
    } catch (error) {
      if (!this.opened) throw error;
      const failure = toShoalError(error);
      if (failure.code !== 'CANCELLED') {
        this.reply.log.warn({ code: failure.code }, `stream failed while queued: ${failure.message}`);
        writeFailure(failure);
      }
      this.reply.raw.end();
      return null;
    }
  }
}

/** Headers for a server-sent event stream; no buffering by proxies. */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  connection: 'keep-alive',
  'x-accel-buffering': 'no',
} as const;

/**
 * Writes one SSE `data:` event. JSON.stringify escapes CR and LF inside strings, so model text or
 * user input can never start a forged event line.
 */
export function writeSseData(reply: FastifyReply, payload: unknown): void {
  writeCoalesced(reply.raw, `data: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`);
}

/**
 * Writes a piece of a streamed response, gathering every piece written in the same tick into one
 * socket write: when several tokens are ready at once (the engine's stream delivered them together,
 * or one event makes several frames), they cost one syscall instead of one each, and a lone token
 * goes out as soon as the code that wrote it yields.
 */
export function writeCoalesced(raw: ServerResponse, chunk: string): void {
  if (!corked.has(raw)) {
    corked.add(raw);
    raw.cork();
    process.nextTick(uncork, raw);
  }
  raw.write(chunk);
}

const corked = new WeakSet<ServerResponse>();

function uncork(raw: ServerResponse): void {
  corked.delete(raw);
  // end() already flushed everything; the response may no longer own its socket.
  if (!raw.writableEnded) raw.uncork();
}
