// Span building for traced requests (issue #18): plain data in, plain data out. The API node keeps one
// RequestTrace per traced request; a serving node keeps one SpanSet per request it runs for a traced
// caller and hands its spans back with the final frame. Clocks and ids are injected, so this runs in
// unit tests alone.

import type { Attributes, Scalar, Span, Trace } from '../wire/diagnostics.js';
import type { TaskEvent } from '../wire/task.js';

/** Most spans a serving node returns for one request (queue, prefill and decode batches); further decode batches merge into the last. */
export const MAX_SERVING_SPANS = 64;
/** Most spans one stored trace holds, from every node; spans past it are counted in the root's `droppedSpans`. */
export const MAX_SPANS_PER_TRACE = 256;
/** A decode span closes after this many streamed pieces (one token each from the engines)... */
export const DECODE_BATCH_TOKENS = 32;
/** ...or once it has lasted this long, whichever comes first. */
export const DECODE_BATCH_MS = 250;

/** Where a span set reads the time (fractional Unix ms on its node's clock) and takes fresh span ids. */
export interface SpanClock {
  now(): number;
  spanId(): string;
}

/**
 * The spans one node records for one request, at most `max` of them. An open span has `endMs` equal
 * to its start until it closes; `all()` closes what is still open, marked `unfinished`.
 */
export class SpanSet {
  private readonly list: Span[] = [];
  private readonly open = new Set<Span>();
  private readonly byId = new Map<string, Span>();
  /** Spans refused because the set was full. */
  dropped = 0;

  constructor(
    readonly traceId: string,
    readonly nodeId: string,
    readonly clock: SpanClock,
    readonly max: number,
  ) {}

  /** Opens a span now (or at `atMs`) and returns its id, or null when the set is full. */
  start(name: string, parentId: string | null, attributes: Attributes = {}, atMs: number = this.clock.now()): string | null {
    if (this.list.length >= this.max) {
      this.dropped++;
      return null;
    }
    const span: Span = { spanId: this.clock.spanId(), parentId, traceId: this.traceId, nodeId: this.nodeId, name, startMs: atMs, endMs: atMs, attributes: { ...attributes } };
    this.list.push(span);
    this.open.add(span);
    this.byId.set(span.spanId, span);
    return span.spanId;
  }

  /** Closes a span now (or at `atMs`), adding `attributes`; closing a closed or unknown span does nothing. */
  end(spanId: string | null, attributes: Attributes = {}, atMs: number = this.clock.now()): void {
    const span = spanId === null ? undefined : this.byId.get(spanId);
    if (span === undefined || !this.open.has(span)) return;
    this.open.delete(span);
    span.endMs = Math.max(span.startMs, atMs);
    Object.assign(span.attributes, attributes);
  }

  /** Sets attributes on a span, open or closed. */
  annotate(spanId: string | null, attributes: Attributes): void {
    const span = spanId === null ? undefined : this.byId.get(spanId);
    if (span !== undefined) Object.assign(span.attributes, attributes);
  }

  /** Spans that still fit. */
  room(): number {
    return this.max - this.list.length;
  }

  isOpen(spanId: string | null): boolean {
    const span = spanId === null ? undefined : this.byId.get(spanId);
    return span !== undefined && this.open.has(span);
  }

  /** Adds spans recorded elsewhere (closed, and never ended or annotated here), as far as room is left. */
  adopt(spans: readonly Span[]): void {
    for (const span of spans) {
      if (this.list.length >= this.max) this.dropped++;
      else this.list.push(span);
    }
  }

  /** Every span, what is still open closed now with `unfinished: true`; in the order they started. */
  all(atMs: number = this.clock.now()): Span[] {
    for (const span of [...this.open]) this.end(span.spanId, { unfinished: true }, atMs);
    return [...this.list].sort((a, b) => a.startMs - b.startMs);
  }
}

/** Pieces of answer a runner streams: each is one token from the engines Shoal runs. */
function tokensIn(event: TaskEvent): number {
  switch (event.type) {
    case 'text':
      return event.logprobs !== undefined && event.logprobs.length > 0 ? event.logprobs.length : 1;
    case 'reasoning':
    case 'tool_call':
    case 'tool_call_delta':
      return 1;
    default:
      return 0;
  }
}

/**
 * The serving node's phases of one request, from the runner's event stream: `queue` from the run
 * call to the engine's `start` event, `prefill` from there to the first token (or the embeddings, or
 * the end), then `decode` spans of up to DECODE_BATCH_TOKENS tokens or DECODE_BATCH_MS each, back to
 * back. Once the set is full, further tokens count into the last decode span, which then runs on.
 */
export class ServingPhases {
  private readonly queue: string | null;
  private prefill: string | null = null;
  private decode: string | null = null;
  private batchTokens = 0;
  private batchStartMs = 0;
  private batches = 0;
  private tokens = 0;

  constructor(
    private readonly spans: SpanSet,
    private readonly parentId: string | null,
  ) {
    this.queue = spans.start('queue', parentId);
  }

  observe(event: TaskEvent): void {
    const now = this.spans.clock.now();
    if (event.type === 'start') {
      this.spans.end(this.queue, {}, now);
      this.prefill = this.spans.start('prefill', this.parentId, { promptTokens: event.promptTokens }, now);
      return;
    }
    if (event.type === 'end') {
      this.spans.end(this.queue, {}, now);
      this.spans.end(this.prefill, {}, now);
      this.closeBatch(now, { finishReason: event.finishReason, completionTokens: event.usage.completionTokens });
      return;
    }
    if (event.type === 'embeddings') {
      this.spans.end(this.prefill, { vectors: event.vectors.length }, now);
      return;
    }
    const tokens = tokensIn(event);
    if (tokens === 0) return;
    if (this.spans.isOpen(this.prefill)) this.spans.end(this.prefill, {}, now);
    if (this.decode === null) this.openBatch(now);
    this.batchTokens += tokens;
    this.tokens += tokens;
    if (this.batchTokens >= DECODE_BATCH_TOKENS || now - this.batchStartMs >= DECODE_BATCH_MS) {
      // The next batch starts where this one ended; with no room left, this one runs on.
      if (this.spans.room() > 0) {
        this.closeBatch(now, {});
        this.openBatch(now);
      }
    }
  }

  /** The stream failed or was abandoned: what is open ends now, with the reason. */
  fail(reason: Scalar): void {
    const now = this.spans.clock.now();
    this.spans.end(this.queue, { error: reason }, now);
    this.spans.end(this.prefill, { error: reason }, now);
    this.closeBatch(now, { error: reason });
  }

  private openBatch(now: number): void {
    this.decode = this.spans.start('decode', this.parentId, { batch: this.batches }, now);
    this.batches++;
    this.batchTokens = 0;
    this.batchStartMs = now;
  }

  private closeBatch(now: number, attributes: Attributes): void {
    if (this.decode === null) return;
    this.spans.end(this.decode, { tokens: this.batchTokens, totalTokens: this.tokens, ...attributes }, now);
    this.decode = null;
  }
}

/** What a serving node sends back with its final frame: its spans and the two moments that bracket them, on its clock. */
export interface ServingReport {
  spans: Span[];
  /** When it took the run frame. */
  receivedAtMs: number;
  /** When it sent the final frame. */
  sentAtMs: number;
}

/**
 * The serving node's clock minus the API node's, from one exchange, as NTP estimates it: the run
 * frame left at `sentMs` (API clock) and arrived at `report.receivedAtMs` (serving clock); the final
 * frame left at `report.sentAtMs` and arrived at `receivedMs`. Assuming the two transits take equally
 * long, the offset is the mean of the two apparent transit times; the generation in between cancels
 * out. The error is at most half the round trip's transit, and with this estimate every serving
 * span lands inside the API node's [sentMs, receivedMs].
 */
export function clockOffsetMs(sentMs: number, receivedMs: number, report: Pick<ServingReport, 'receivedAtMs' | 'sentAtMs'>): number {
  return (report.receivedAtMs - sentMs + (report.sentAtMs - receivedMs)) / 2;
}

/**
 * One traced request on the API node that took it: the root `http` span, every span its parts add
 * (route, data-plane, respond) and the serving nodes' spans, moved onto this node's clock.
 */
export class RequestTrace {
  readonly spans: SpanSet;
  readonly rootId: string;
  readonly startedAtMs: number;
  modelId: string | null = null;
  /** Set once a task ran under this request: a request that never dispatched keeps no trace. */
  dispatched = false;
  finished = false;
  private readonly offsets: Record<string, number> = {};
  private respondId: string | null = null;
  private respondEvents = 0;

  constructor(
    readonly traceId: string,
    readonly nodeId: string,
    readonly route: string,
    clock: SpanClock,
    attributes: Attributes = {},
  ) {
    this.spans = new SpanSet(traceId, nodeId, clock, MAX_SPANS_PER_TRACE);
    this.startedAtMs = clock.now();
    // The set is empty, so the root always fits.
    this.rootId = this.spans.start('http', null, { route, ...attributes }, this.startedAtMs)!;
  }

  now(): number {
    return this.spans.clock.now();
  }

  /**
   * Takes a serving node's report for the exchange sent at `sentMs` and answered at `receivedMs`: its
   * spans shifted by the estimated offset, named for the node it came from and this trace.
   */
  addRemote(nodeId: string, report: ServingReport, sentMs: number, receivedMs: number): void {
    const offset = clockOffsetMs(sentMs, receivedMs, report);
    this.offsets[nodeId] = offset;
    this.spans.adopt(report.spans.map((span) => ({ ...span, traceId: this.traceId, nodeId, startMs: span.startMs - offset, endMs: span.endMs - offset })));
  }

  /** An event of the task reached this node's route: the first opens `respond`, which lasts until the last byte. */
  responded(): void {
    if (this.respondEvents === 0) this.respondId = this.spans.start('respond', this.rootId);
    this.respondEvents++;
  }

  /** The whole trace once the answer's last byte is out: what is still open closes now. */
  finish(status: number): Trace {
    this.finished = true;
    const endMs = this.now();
    this.spans.end(this.respondId, { events: this.respondEvents }, endMs);
    this.spans.end(this.rootId, { status, ...(this.spans.dropped > 0 ? { droppedSpans: this.spans.dropped } : {}) }, endMs);
    const spans = this.spans.all(endMs);
    const nodes = [this.nodeId, ...new Set(spans.map((s) => s.nodeId).filter((n) => n !== this.nodeId))];
    return {
      traceId: this.traceId,
      startedAtMs: this.startedAtMs,
      durationMs: Math.max(0, endMs - this.startedAtMs),
      apiNodeId: this.nodeId,
      route: this.route,
      modelId: this.modelId,
      status,
      nodes,
      spanCount: spans.length,
      spans,
      offsets: { ...this.offsets },
    };
  }
}
