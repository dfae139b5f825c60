// Both ends of `/shoal/infer/1` (protocol.ts): the serving side runs a task on one of this node's
// instances for another node; the calling side (`runRemote`) streams the events back and turns every
// way the remote end can fail into a typed error.

import { ShoalError, toShoalError, errorMessage } from '../common/errors.js';
import type { InstanceId } from '../common/ids.js';
import { MAX_EMBEDDING_INPUTS, type RunnerTask, type TaskEvent } from '../wire/task.js';
import { RouterError, type FrameChannel, type RequestContext, type Router } from '../router/index.js';
import { knownErrorCode } from '../router/errors.js';
import type { Worker } from '../worker/worker.js';
import {
  DEFAULT_KEEPALIVE_INTERVAL_MS,
  DEFAULT_SILENCE_TIMEOUT_MS,
  INFER_MAX_MESSAGE_BYTES,
  INFER_MAX_STREAMS_PER_CONNECTION,
  INFER_OPEN_TIMEOUT_MS,
  INFER_PROTOCOL,
  MAX_ERROR_MESSAGE_CHARS,
  MAX_ERROR_PARAM_CHARS,
  RUN_FRAME_TIMEOUT_MS,
  RunFrame,
  ServerFrame,
  framesForEvent,
  type RunFrame as RunFrameType,
  type ServingTrace,
} from './protocol.js';
import { traceServing } from '../tracing/serving.js';
import { MAX_SERVING_SPANS, SpanSet, type RequestTrace } from '../tracing/spans.js';
import { spanClock } from '../tracing/tracer.js';

/**
 * Runs a task on an instance of this node for a remote caller. Throwing a ShoalError (synchronously
 * or from the iteration) sends it to the caller with its code; `INSTANCE_LOST` is the answer for an
 * instance this node does not hold. `signal` aborts when the caller cancels or goes away.
 */
export type InferenceResolver = (instanceId: InstanceId, task: RunnerTask, signal: AbortSignal) => AsyncIterable<TaskEvent>;

export interface ServeInferenceOptions {
  /** A keepalive frame goes out when nothing else was sent for this long. Default 500 ms. */
  keepaliveIntervalMs?: number;
}

/** Registers the `/shoal/infer/1` handler. Every node calls it: it also sets the outbound stream limit. */
export async function serveInference(router: Router, resolve: InferenceResolver, options: ServeInferenceOptions = {}): Promise<void> {
  const keepaliveIntervalMs = options.keepaliveIntervalMs ?? DEFAULT_KEEPALIVE_INTERVAL_MS;
  await router.handleStream<unknown>(INFER_PROTOCOL, (channel, ctx) => serveOne(channel, ctx, resolve, keepaliveIntervalMs, router.nodeId), {
    maxMessageBytes: INFER_MAX_MESSAGE_BYTES,
    maxInboundStreams: INFER_MAX_STREAMS_PER_CONNECTION,
    maxOutboundStreams: INFER_MAX_STREAMS_PER_CONNECTION,
  });
}

/**
 * Serves `/shoal/infer/1` from this node's instances. A request for an instance the worker does not
 * hold, or for a donor (which holds layers, not a model), is INSTANCE_LOST: the caller's view of the
 * cluster is stale, and its retry routes elsewhere.
 */
export async function serveLocalInstances(router: Router, worker: Pick<Worker, 'get'>): Promise<void> {
  await serveInference(router, (instanceId, task, signal) => {
    const instance = worker.get(instanceId);
    if (!instance?.runner.run) throw new ShoalError('INSTANCE_LOST', `instance ${instanceId} does not serve requests on this node (it may have been stopped or moved): retry`);
    return instance.runner.run(task, signal);
  });
}

/**
 * Frames out of one request, one at a time (a slow reader holds `send`, and with it the runner's
 * stream: nothing piles up here), plus keepalives while the line is quiet.
 */
class RequestWriter {
  private busy = false;
  private lastSentAt = performance.now();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly channel: FrameChannel<unknown>,
    intervalMs: number,
  ) {
    this.timer = setInterval(() => {
      // A send still pending means the client is not reading; it has frames to read, so no keepalive is
      // due. Skipping only when something went out in the last half interval bounds the gap at 1.5x.
      if (this.busy || performance.now() - this.lastSentAt < intervalMs / 2) return;
      this.send({ type: 'keepalive' }).catch(() => {
        // the stream failed; the request's own send or the channel signal reports it
      });
    }, intervalMs);
  }

  async send(frame: ServerFrame): Promise<void> {
    this.busy = true;
    try {
      await this.channel.send(frame);
    } finally {
      this.busy = false;
      this.lastSentAt = performance.now();
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

async function serveOne(channel: FrameChannel<unknown>, ctx: RequestContext, resolve: InferenceResolver, keepaliveIntervalMs: number, selfId: string): Promise<void> {
  const raw = await channel.next({ signal: AbortSignal.any([ctx.signal, AbortSignal.timeout(RUN_FRAME_TIMEOUT_MS)]) });
  if (raw === undefined) return;
  const parsed = RunFrame.safeParse(raw);
  if (!parsed.success) {
    await channel.send(errorFrame(new ShoalError('BAD_REQUEST', `the run frame on ${INFER_PROTOCOL} is not valid: ${parsed.error.message}`)));
    return;
  }
  const request: RunFrameType = parsed.data;
  // A traced caller gets this node's spans back with the final frame (protocol.ts, ServingTrace).
  const receivedAtMs = spanClock.now();
  const spans = request.trace === undefined ? null : new SpanSet(request.trace.traceId, selfId, spanClock, MAX_SERVING_SPANS);
  const report = (): ServingTrace | undefined => (spans === null ? undefined : { spans: spans.all(), receivedAtMs, sentAtMs: spanClock.now() });

  // The runner is cancelled when the client aborts, disconnects, or sends anything after its run frame.
  const cancel = new AbortController();
  const onGone = (): void => cancel.abort(new ShoalError('CANCELLED', `${ctx.from} cancelled the request or went away`));
  channel.signal.addEventListener('abort', onGone, { once: true });
  if (channel.signal.aborted) onGone();
  channel.next().then(
    (extra) => {
      if (extra === undefined) return; // the client finished writing, as it should
      onGone();
      channel.abort(new RouterError('protocol_error', `${ctx.from} sent a frame after its run frame on ${INFER_PROTOCOL}`));
    },
    onGone,
  );

  const writer = new RequestWriter(channel, keepaliveIntervalMs);
  let completed = false;
  try {
    const resolved = resolve(request.instanceId, request.task, cancel.signal);
    const events = spans === null ? resolved : traceServing(resolved, spans, request.trace?.parentId ?? null);
    for await (const event of events) {
      if (cancel.signal.aborted) break;
      const frames = framesForEvent(event);
      if (frames === null) {
        throw new ShoalError('PAYLOAD_TOO_LARGE', `one embedding vector is over the ${INFER_MAX_MESSAGE_BYTES}-byte frame limit of ${INFER_PROTOCOL}`);
      }
      const last = frames[frames.length - 1];
      if (spans !== null && event.type === 'end' && last?.type === 'event') frames[frames.length - 1] = { ...last, trace: report() };
      for (const frame of frames) await writer.send(frame);
    }
    completed = !cancel.signal.aborted;
  } catch (error) {
    // The client is gone: there is nobody to tell.
    if (channel.signal.aborted || cancel.signal.aborted) return;
    await writer.send(errorFrame(toShoalError(error), report()));
    completed = true;
  } finally {
    writer.stop();
    channel.signal.removeEventListener('abort', onGone);
    // Leaving early (a send failed) must stop the generation; after a normal end this does nothing.
    if (!completed) onGone();
  }
}

function errorFrame(error: ShoalError, trace?: ServingTrace): ServerFrame {
  return {
    type: 'error',
    code: error.code,
    message: error.message.slice(0, MAX_ERROR_MESSAGE_CHARS),
    param: error.param === null ? null : error.param.slice(0, MAX_ERROR_PARAM_CHARS),
    ...(trace === undefined ? {} : { trace }),
  };
}

export interface RunRemoteOptions {
  /** Give up (INSTANCE_LOST) when nothing arrives for this long while waiting. Default 1500 ms. */
  silenceTimeoutMs?: number;
  /** Connecting and opening the stream. Default 2000 ms. */
  openTimeoutMs?: number;
  /** The traced request this call is part of: it gets the `data-plane` span and the serving node's spans. */
  trace?: RequestTrace;
}

/**
 * Runs `task` on `instanceId` at `nodeId` (this node's own id short-circuits in process) and yields
 * its events. Throws a ShoalError: the serving side's code when it answered with an error;
 * INSTANCE_LOST when the node cannot be reached, the connection or stream is lost, the node goes
 * silent, or the stream ends before the task's `end` event; CANCELLED when `signal` aborts.
 * Leaving the iteration early, or aborting `signal`, resets the stream, which cancels the runner.
 */
export async function* runRemote(
  router: Router,
  nodeId: string,
  instanceId: string,
  task: RunnerTask,
  signal: AbortSignal,
  options: RunRemoteOptions = {},
): AsyncGenerator<TaskEvent, void, undefined> {
  const silenceTimeoutMs = options.silenceTimeoutMs ?? DEFAULT_SILENCE_TIMEOUT_MS;
  const where = `instance ${instanceId} on node ${nodeId}`;
  if (signal.aborted) throw cancelled(signal);
  const lost = new AbortController();
  const stopWatching = router.onPeerDown((peer) => {
    if (peer === nodeId) lost.abort(new ShoalError('INSTANCE_LOST', `the connection to node ${nodeId} was lost while it ran the request on ${where}`));
  });
  const wait = AbortSignal.any([signal, lost.signal]);
  const trace = options.trace;
  const span = trace?.spans.start('data-plane', trace.rootId, { node: nodeId, instanceId }) ?? null;
  let sentMs = 0;
  // The serving node's report, on the final frame, moved onto this node's clock.
  const adopt = (frame: { trace?: ServingTrace | undefined }): void => {
    if (trace !== undefined && frame.trace !== undefined) trace.addRemote(nodeId, frame.trace, sentMs, trace.now());
  };

  let channel: FrameChannel<ServerFrame>;
  try {
    channel = await router.openStream(nodeId, INFER_PROTOCOL, {
      signal: wait,
      timeoutMs: options.openTimeoutMs ?? INFER_OPEN_TIMEOUT_MS,
      maxMessageBytes: INFER_MAX_MESSAGE_BYTES,
      schema: ServerFrame,
    });
  } catch (error) {
    stopWatching();
    trace?.spans.end(span, { error: signal.aborted ? 'CANCELLED' : 'INSTANCE_LOST' });
    if (signal.aborted) throw cancelled(signal);
    throw new ShoalError('INSTANCE_LOST', `could not reach node ${nodeId} to run the request on ${where}: ${errorMessage(error)}`, { cause: error });
  }

  let finished = false;
  let phase: 'send' | 'receive' = 'send';
  // The consumer may be busy elsewhere (writing to a slow HTTP client) when it cancels: reset the
  // stream at once rather than when it next asks for an event.
  const onWaitAbort = (): void => channel.abort(new RouterError('aborted', `the request on ${where} was cancelled or lost`));
  wait.addEventListener('abort', onWaitAbort, { once: true });
  try {
    const run: RunFrameType = { type: 'run', instanceId: instanceId as InstanceId, task };
    if (trace !== undefined && span !== null) run.trace = { traceId: trace.traceId, parentId: span };
    if (trace !== undefined) sentMs = trace.now();
    await channel.send(run, { signal: wait });
    await channel.close();
    phase = 'receive';
    let ended = false;
    const vectors: number[][] = [];
    for (;;) {
      const silence = setTimeout(() => {
        lost.abort(new ShoalError('INSTANCE_LOST', `node ${nodeId} sent nothing for ${silenceTimeoutMs} ms while it ran the request on ${where}: it is frozen or unreachable`));
      }, silenceTimeoutMs);
      let frame: ServerFrame | undefined;
      try {
        frame = await channel.next({ signal: wait });
      } finally {
        clearTimeout(silence);
      }
      if (frame === undefined) {
        if (ended) {
          finished = true;
          return;
        }
        throw new ShoalError('INSTANCE_LOST', `node ${nodeId} closed the request on ${where} before it finished (the node is stopping or the instance was deleted)`);
      }
      if (frame.type === 'keepalive') continue;
      if (frame.type === 'error') {
        finished = true;
        adopt(frame);
        trace?.spans.end(span, { error: frame.code });
        throw new ShoalError(knownErrorCode(frame.code), frame.message, { param: frame.param });
      }
      if (ended) throw new RouterError('protocol_error', `node ${nodeId} sent a ${frame.type} frame after the end of the request on ${where}`);
      if (frame.type === 'vectors') {
        if (vectors.length + frame.vectors.length > MAX_EMBEDDING_INPUTS) {
          throw new RouterError('protocol_error', `node ${nodeId} sent more than ${MAX_EMBEDDING_INPUTS} embedding vectors for the request on ${where}`);
        }
        vectors.push(...frame.vectors);
        continue;
      }
      let event = frame.event;
      if (vectors.length > 0) {
        if (event.type !== 'embeddings') throw new RouterError('protocol_error', `node ${nodeId} sent a ${event.type} event in the middle of an embeddings event on ${where}`);
        event = { type: 'embeddings', vectors: [...vectors, ...event.vectors] };
        vectors.length = 0;
      }
      if (event.type === 'end') {
        ended = true;
        // Before the end is handed on: a reader that stops there finds the trace complete.
        adopt(frame);
        trace?.spans.end(span);
      }
      yield event;
    }
  } catch (error) {
    const shoalError = failure(error);
    trace?.spans.end(span, { error: shoalError.code });
    throw shoalError;
  } finally {
    stopWatching();
    wait.removeEventListener('abort', onWaitAbort);
    // Covers every way out but a clean end or an error answer: the server sees the reset and cancels.
    if (!finished) channel.abort(new RouterError('aborted', `the request on ${where} was abandoned`));
  }

  function failure(error: unknown): ShoalError {
    if (signal.aborted) return cancelled(signal);
    if (lost.signal.aborted) return lost.signal.reason as ShoalError;
    if (!(error instanceof RouterError)) return toShoalError(error);
    if (error.reason === 'frame_too_large' && phase === 'send') {
      return new ShoalError('PAYLOAD_TOO_LARGE', `the request is over the ${INFER_MAX_MESSAGE_BYTES}-byte limit of ${INFER_PROTOCOL}`, { cause: error });
    }
    if (error.reason === 'protocol_error' || error.reason === 'frame_too_large') {
      return new ShoalError('INTERNAL', `node ${nodeId} broke ${INFER_PROTOCOL} on ${where}: ${error.message}`, { cause: error });
    }
    return new ShoalError('INSTANCE_LOST', `the stream to node ${nodeId} failed while it ran the request on ${where}: ${error.message}`, { cause: error });
  }
}

function cancelled(signal: AbortSignal): ShoalError {
  const reason: unknown = signal.reason;
  if (reason instanceof ShoalError && reason.code === 'CANCELLED') return reason;
  return new ShoalError('CANCELLED', 'the request was cancelled', { cause: reason });
}

