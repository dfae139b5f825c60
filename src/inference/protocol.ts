import { z } from 'zod';
import { InstanceId } from '../common/ids.js';
import { MAX_EMBEDDING_INPUTS, RunnerTask, TaskEvent } from '../wire/task.js';
import { Span } from '../wire/diagnostics.js';
import { MAX_SERVING_SPANS } from '../tracing/spans.js';

/**
 * `/shoal/infer/1`: one inference request per data-plane stream (docs/DESIGN.md section 6).
 *
 * Client -> server: one `run` frame, then the client closes its writing side.
 * Server -> client: `event` frames in the order the runner produced them (`queued` events first
 * while the request waits for a slot on the serving node; an embeddings event too
 * big for one frame travels as `vectors` frames followed by the `embeddings` event carrying the
 * rest), `keepalive` frames while nothing else is sent, then the end of the stream; or an `error`
 * frame (a ShoalError's fields) and the end of the stream. A traced run frame (`trace`) makes the
 * final frame (the `end` event's, or the error) carry the serving node's spans (`ServingTrace`).
 *
 * A request is complete only when its `end` event has arrived: a stream that ends before it means the
 * serving node went away (a stopping node may close its streams cleanly rather than reset them).
 */
export const INFER_PROTOCOL = '/shoal/infer/1';

/**
 * Largest frame either way. The run frame carries the whole prompt: the HTTP body is at most 20 MiB
 * on the routes that take images (IMAGE_ROUTE_MAX_BODY_BYTES; 4 MiB elsewhere). Base64 image data
 * travels as msgpack strings at its own size, but msgpack can spell a JSON number such as `0.5`
 * (3 bytes) in 9, so a body of numbers (tool schemas) may grow ~2.3x: 20 MiB becomes at most ~46 MiB.
 */
export const INFER_MAX_MESSAGE_BYTES = 48 * 1024 * 1024;
/**
 * Concurrent inference streams per connection, each way. One API node sends all its requests for a
 * serving node over one connection; an instance holds at most 64 running + 256 queued requests, so
 * this covers three busy instances per node pair. Over it libp2p resets the stream (INSTANCE_LOST).
 */
export const INFER_MAX_STREAMS_PER_CONNECTION = 1024;
export const DEFAULT_KEEPALIVE_INTERVAL_MS = 500;
/** The client gives up on a request when nothing, not even a keepalive, arrived for this long. */
export const DEFAULT_SILENCE_TIMEOUT_MS = 1500;
/** Connecting to the serving node and opening the stream. */
export const INFER_OPEN_TIMEOUT_MS = 2000;
/** How long the server waits for the run frame once the stream is open. */
export const RUN_FRAME_TIMEOUT_MS = 10_000;
export const MAX_ERROR_MESSAGE_CHARS = 4096;
export const MAX_ERROR_PARAM_CHARS = 256;
/** Headroom left in a `vectors` frame for its envelope. */
const VECTORS_FRAME_OVERHEAD_BYTES = 1024;
/** msgpack spends at most 9 bytes on a number and 5 on an array header. */
const MAX_NUMBER_BYTES = 9;
const MAX_ARRAY_HEADER_BYTES = 5;

/** A traced request's context (issue #18): the serving node records its spans under `parentId` (the caller's data-plane span). */
export const TraceContext = z.strictObject({ traceId: z.string().min(1).max(32), parentId: z.string().min(1).max(32) });
export type TraceContext = z.infer<typeof TraceContext>;

export const RunFrame = z.strictObject({
  type: z.literal('run'),
  instanceId: InstanceId,
  task: RunnerTask,
  /** Present only when the caller traces this request; the serving node then reports its spans. */
  trace: TraceContext.optional(),
});
export type RunFrame = z.infer<typeof RunFrame>;

/**
 * A traced request's spans from the serving node, with its final frame (the `end` event, or the
 * error): at most MAX_SERVING_SPANS, on the serving node's clock, bracketed by when it took the run
 * frame and when it sent this one, from which the caller estimates the clock offset (tracing/spans.ts).
 */
export const ServingTrace = z.strictObject({
  spans: z.array(Span).max(MAX_SERVING_SPANS),
  receivedAtMs: z.number(),
  sentAtMs: z.number(),
});
export type ServingTrace = z.infer<typeof ServingTrace>;

export const EventFrame = z.strictObject({ type: z.literal('event'), event: TaskEvent, trace: ServingTrace.optional() });
export const VectorsFrame = z.strictObject({
  type: z.literal('vectors'),
  vectors: z.array(z.array(z.number())).min(1).max(MAX_EMBEDDING_INPUTS),
});
/** `code` is checked against ERROR_CODES by the receiver (an unknown one becomes INTERNAL). */
export const ErrorFrame = z.strictObject({
  type: z.literal('error'),
  code: z.string().min(1).max(64),
  message: z.string().max(MAX_ERROR_MESSAGE_CHARS),
  param: z.string().max(MAX_ERROR_PARAM_CHARS).nullable(),
  trace: ServingTrace.optional(),
});
export const KeepaliveFrame = z.strictObject({ type: z.literal('keepalive') });

export const ServerFrame = z.discriminatedUnion('type', [EventFrame, VectorsFrame, ErrorFrame, KeepaliveFrame]);
export type ServerFrame = z.infer<typeof ServerFrame>;

/**
 * Vectors per frame so that a frame of them stays under `maxMessageBytes`, from the vector length
 * (an upper bound on the encoding, not a measurement), and within what a `vectors` frame may hold.
 * 0: not even one vector fits.
 */
export function vectorsPerFrame(dimensions: number, maxMessageBytes: number = INFER_MAX_MESSAGE_BYTES): number {
  const perVector = dimensions * MAX_NUMBER_BYTES + MAX_ARRAY_HEADER_BYTES;
  return Math.min(MAX_EMBEDDING_INPUTS, Math.max(0, Math.floor((maxMessageBytes - VECTORS_FRAME_OVERHEAD_BYTES) / perVector)));
}

/**
 * The frames that carry one event. Everything but a large embeddings event is one frame; a large
 * one is cut into `vectors` frames and a final `embeddings` event with the last batch, in order.
 * Returns null when a single vector would not fit a frame.
 */
export function framesForEvent(event: TaskEvent, maxMessageBytes: number = INFER_MAX_MESSAGE_BYTES): ServerFrame[] | null {
  if (event.type !== 'embeddings' || event.vectors.length === 0) return [{ type: 'event', event }];
  const dimensions = Math.max(...event.vectors.map((vector) => vector.length));
  const batch = vectorsPerFrame(dimensions, maxMessageBytes);
  if (batch === 0) return null;
  if (event.vectors.length <= batch) return [{ type: 'event', event }];
  const frames: ServerFrame[] = [];
  let at = 0;
  while (event.vectors.length - at > batch) {
    frames.push({ type: 'vectors', vectors: event.vectors.slice(at, at + batch) });
    at += batch;
  }
  frames.push({ type: 'event', event: { type: 'embeddings', vectors: event.vectors.slice(at) } });
  return frames;
}
