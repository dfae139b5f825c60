// The API node's collector of traces (issue #18). Tracing is decided once per request, when it
// arrives, from the cluster's `tracing` setting; a traced request is carried through its handler in
// an AsyncLocalStorage, so the dispatcher and the data plane find it without any route passing it
// along. When the answer's last byte is out, the trace is assembled and stored.

import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../common/log.js';
import type { Dispatcher, ModelListing } from '../api/dispatch.js';
import type { HttpTracing, TracedHttpRequest, TracesControl } from '../api/control/traces-port.js';
import type { Trace, TraceSummary } from '../wire/diagnostics.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import { RequestTrace, type SpanClock } from './spans.js';
import type { TraceStore } from './store.js';

/** Unix ms with sub-millisecond resolution, on this node's clock. */
export const wallClockMs = (): number => performance.timeOrigin + performance.now();

export const spanClock: SpanClock = { now: wallClockMs, spanId: () => randomBytes(8).toString('hex') };

/** Where the dispatcher and the data plane look for the request they work for, if it is traced. */
export interface TraceLookup {
  current(): RequestTrace | undefined;
}

export interface TracerOptions {
  nodeId: string;
  /** The cluster-wide switch (settings `tracing`), read once per arriving request. */
  enabled: () => boolean;
  store: TraceStore;
  log: Logger;
  clock?: SpanClock;
}

export class Tracer implements HttpTracing, TracesControl, TraceLookup {
  private readonly active = new AsyncLocalStorage<RequestTrace>();
  private readonly clock: SpanClock;

  constructor(private readonly options: TracerOptions) {
    this.clock = options.clock ?? spanClock;
  }

  begin(request: { method: string; route: string }): TracedHttpRequest | null {
    if (!this.options.enabled()) return null;
    const trace = new RequestTrace(randomBytes(16).toString('hex'), this.options.nodeId, `${request.method} ${request.route}`, this.clock, { method: request.method });
    return {
      enter: (fn) => this.active.run(trace, fn),
      finish: (status) => this.finish(trace, status),
    };
  }

  current(): RequestTrace | undefined {
    const trace = this.active.getStore();
    // Something started during a request may run on after it: it is no longer part of the trace.
    return trace === undefined || trace.finished ? undefined : trace;
  }

  list(limit: number): TraceSummary[] {
    return this.options.store.list(limit);
  }

  get(traceId: string): Promise<Trace | null> {
    return this.options.store.get(traceId);
  }

  /**
   * `inner` with the `respond` span of each traced request: from the task's first event reaching this
   * node until the answer's last byte. An untraced request gets `inner`'s own stream, untouched.
   */
  wrap(inner: Dispatcher): Dispatcher {
    return {
      models: (): ModelListing[] => inner.models(),
      run: (task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> => {
        const trace = this.current();
        if (trace === undefined) return inner.run(task, signal);
        trace.dispatched = true;
        trace.modelId = task.model;
        const events = inner.run(task, signal);
        return { [Symbol.asyncIterator]: () => respondSpan(events[Symbol.asyncIterator](), trace) };
      },
    };
  }

  private finish(trace: RequestTrace, status: number): void {
    if (trace.finished) return;
    trace.finished = true;
    // Only a request that ran a task is worth keeping (the control routes, /healthz and the like are not).
    if (!trace.dispatched) return;
    const whole = trace.finish(status);
    this.options.store.save(whole).catch((error: unknown) => this.options.log.warn({ err: error, traceId: whole.traceId }, 'a trace could not be stored'));
  }
}

function respondSpan(events: AsyncIterator<TaskEvent>, trace: RequestTrace): AsyncIterator<TaskEvent> {
  return {
    next: async () => {
      const result = await events.next();
      // A queue report is the engine still waiting, not the answer going out.
      if (result.done !== true && result.value.type !== 'queued') trace.responded();
      return result;
    },
    return: async (value?: unknown) => (events.return ? events.return(value) : { done: true, value: undefined }),
    throw: async (error?: unknown) => {
      if (events.throw) return events.throw(error);
      throw error;
    },
  };
}
