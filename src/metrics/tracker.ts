import type { RunnerTask, TaskEvent } from '../wire/task.js';

/**
 * Request bookkeeping for the metrics, pure: the caller passes the time of everything that happens.
 *
 * Definitions (docs/API.md, "Metrics"):
 * - A request is *in flight* from its arrival (the dispatcher's `run` was called and accepted it)
 *   until it ends (its `end` event, an error, a cancellation); *waiting* requests are the in-flight
 *   ones whose first event (`start`) has not arrived yet, i.e. that sit in a runner's queue.
 * - *TTFT* (time to first token) of a generation is arrival to its first `text`, `reasoning` or
 *   `tool_call` event, the same for streamed and non-streamed requests (a non-streamed client gets
 *   its bytes later, but the engine's responsiveness is what is measured).
 * - *Generated tokens*: each non-empty `text`, `reasoning` or `tool_call_delta` event counts one as it
 *   arrives, and the `end` event tops the count up to the runner's `usage.completionTokens` (events
 *   can carry several tokens). A counter never goes down, so in the rare case where events outnumber
 *   tokens the count stays at the event count.
 */

export type TaskKind = RunnerTask['kind'];
export const TASK_KINDS = ['generate', 'embed', 'count'] as const satisfies readonly TaskKind[];
/** `refused`: the dispatcher threw before the request started (unknown model, loading, queue full). */
export const OUTCOMES = ['ok', 'error', 'cancelled', 'refused'] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** Hooks for exporters (Prometheus): called as things happen. */
export interface TrackerObserver {
  firstToken?(ttftMs: number): void;
  generated?(tokens: number): void;
  prompt?(tokens: number): void;
  ended?(kind: TaskKind, outcome: Outcome): void;
}

export interface TrackedRequest {
  readonly kind: TaskKind;
  readonly arrivedMs: number;
}

interface RequestState extends TrackedRequest {
  waiting: boolean;
  done: boolean;
  firstTokenSeen: boolean;
  countedTokens: number;
}

export interface TrackerCounters {
  inFlight: number;
  waiting: number;
  /** Since the tracker was made (monotonic). */
  generatedTokens: number;
  promptTokens: number;
}

export interface RequestTrackerOptions {
  /** TTFTs kept between two `takeTtfts` calls; beyond it a uniform random subset of this size is kept. */
  maxTtftsPerTake: number;
  /** [0, 1), for the reservoir when there are more TTFTs than `maxTtftsPerTake`. */
  random: () => number;
  observer?: TrackerObserver;
}

export class RequestTracker {
  private inFlight = 0;
  private waiting = 0;
  private generatedTokens = 0;
  private promptTokens = 0;
  private ttfts: number[] = [];
  private ttftsSeen = 0;

  constructor(private readonly options: RequestTrackerOptions) {
    if (!Number.isInteger(options.maxTtftsPerTake) || options.maxTtftsPerTake < 1) throw new RangeError('maxTtftsPerTake must be a positive integer');
  }

  arrive(kind: TaskKind, nowMs: number): TrackedRequest {
    const request: RequestState = { kind, arrivedMs: nowMs, waiting: true, done: false, firstTokenSeen: false, countedTokens: 0 };
    this.inFlight += 1;
    this.waiting += 1;
    return request;
  }

  /** A request the dispatcher refused before it started: counted, never in flight. */
  refuse(kind: TaskKind): void {
    this.options.observer?.ended?.(kind, 'refused');
  }

  /** One event of a request's stream, at `nowMs`. An `end` event finishes the request as `ok`. */
  observe(tracked: TrackedRequest, event: TaskEvent, nowMs: number): void {
    const request = tracked as RequestState;
    if (request.done) return;
    // A queue report comes while the request still waits for a slot.
    if (request.waiting && event.type !== 'queued') {
      request.waiting = false;
      this.waiting -= 1;
    }
    switch (event.type) {
      case 'start':
        this.addPrompt(event.promptTokens);
        return;
      case 'text':
      case 'reasoning':
        this.firstToken(request, nowMs);
        if (event.text !== '') this.addGenerated(request, 1);
        return;
      case 'tool_call':
        this.firstToken(request, nowMs);
        return;
      case 'tool_call_delta':
        if (event.arguments !== '') this.addGenerated(request, 1);
        return;
      case 'queued':
      case 'embeddings':
        return;
      case 'end': {
        const missing = event.usage.completionTokens - request.countedTokens;
        if (missing > 0) this.addGenerated(request, missing);
        this.finish(request, 'ok');
        return;
      }
    }
  }

  /** Ends a request (idempotent: only the first call counts). */
  finish(tracked: TrackedRequest, outcome: Exclude<Outcome, 'refused'>): void {
    const request = tracked as RequestState;
    if (request.done) return;
    request.done = true;
    if (request.waiting) {
      request.waiting = false;
      this.waiting -= 1;
    }
    this.inFlight -= 1;
    this.options.observer?.ended?.(request.kind, outcome);
  }

  counters(): TrackerCounters {
    return { inFlight: this.inFlight, waiting: this.waiting, generatedTokens: this.generatedTokens, promptTokens: this.promptTokens };
  }

  /** The TTFTs (ms) recorded since the last call, in arrival order unless the reservoir had to choose. */
  takeTtfts(): number[] {
    const taken = this.ttfts;
    this.ttfts = [];
    this.ttftsSeen = 0;
    return taken;
  }

  private firstToken(request: RequestState, nowMs: number): void {
    if (request.firstTokenSeen || request.kind !== 'generate') return;
    request.firstTokenSeen = true;
    const ttftMs = Math.max(0, nowMs - request.arrivedMs);
    this.options.observer?.firstToken?.(ttftMs);
    // Reservoir sampling (algorithm R): every TTFT of the interval has the same chance to be kept.
    this.ttftsSeen += 1;
    if (this.ttfts.length < this.options.maxTtftsPerTake) {
      this.ttfts.push(ttftMs);
      return;
    }
    const slot = Math.floor(this.options.random() * this.ttftsSeen);
    if (slot < this.options.maxTtftsPerTake) this.ttfts[slot] = ttftMs;
  }

  private addGenerated(request: RequestState, tokens: number): void {
    request.countedTokens += tokens;
    this.generatedTokens += tokens;
    this.options.observer?.generated?.(tokens);
  }

  private addPrompt(tokens: number): void {
    if (!(tokens > 0)) return;
    this.promptTokens += tokens;
    this.options.observer?.prompt?.(tokens);
  }
}
