import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ShoalError } from '../common/errors.js';
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
}

/**
 * Starts a task and waits for its `start` event, so failures before generation (unknown model,
 * loading, prompt too long) still become a proper HTTP status instead of a broken stream.
 */
export async function startTask(dispatcher: Dispatcher, task: RunnerTask, signal: AbortSignal): Promise<StartedTask> {
  const events = dispatcher.run(task, signal)[Symbol.asyncIterator]();
  const first = await events.next();
  if (first.done || first.value.type !== 'start') {
    throw new ShoalError('INTERNAL', 'the runner did not start the task with a start event');
  }
  return { promptTokens: first.value.promptTokens, events };
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
