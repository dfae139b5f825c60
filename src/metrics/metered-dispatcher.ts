import { performance } from 'node:perf_hooks';
import type { Dispatcher, ModelListing } from '../api/dispatch.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { RequestTracker, TrackedRequest } from './tracker.js';

/**
 * A Dispatcher that reports every task's life to a RequestTracker and otherwise changes nothing:
 * the same events, the same errors, the same cancellation.
 *
 * A request is finished in the tracker by whichever comes first: its `end` event, the stream
 * finishing or failing, the consumer's `return()`, or the request's abort signal. The signal matters:
 * a route that gives up early aborts it but may never pull the iterator again, and the request must
 * not stay "in flight" for ever.
 */
export class MeteredDispatcher implements Dispatcher {
  constructor(
    private readonly inner: Dispatcher,
    private readonly tracker: RequestTracker,
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  models(): ModelListing[] {
    return this.inner.models();
  }

  run(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    const arrivedMs = this.nowMs();
    let inner: AsyncIterable<TaskEvent>;
    try {
      inner = this.inner.run(task, signal);
    } catch (error) {
      this.tracker.refuse(task.kind);
      throw error;
    }
    const request = this.tracker.arrive(task.kind, arrivedMs);
    // Listened for from the start, not from the first pull: a route may give up before it iterates.
    const onAbort = (): void => finish('cancelled');
    const finish = (outcome: 'ok' | 'error' | 'cancelled'): void => {
      signal.removeEventListener('abort', onAbort);
      this.tracker.finish(request, outcome);
    };
    if (signal.aborted) finish('cancelled');
    else signal.addEventListener('abort', onAbort, { once: true });
    return { [Symbol.asyncIterator]: () => this.observe(inner[Symbol.asyncIterator](), request, signal, finish) };
  }

  private observe(events: AsyncIterator<TaskEvent>, request: TrackedRequest, signal: AbortSignal, finish: (outcome: 'ok' | 'error' | 'cancelled') => void): AsyncIterator<TaskEvent> {
    const { tracker } = this;
    return {
      next: async () => {
        let result: IteratorResult<TaskEvent>;
        try {
          result = await events.next();
        } catch (error) {
          finish(signal.aborted ? 'cancelled' : 'error');
          throw error;
        }
        if (result.done === true) {
          // A stream that ends without an `end` event is a broken one.
          finish('error');
          return result;
        }
        tracker.observe(request, result.value, this.nowMs());
        if (result.value.type === 'end') finish('ok');
        return result;
      },
      return: async (value?: unknown) => {
        finish('cancelled');
        return events.return ? events.return(value) : { done: true, value: undefined };
      },
      throw: async (error?: unknown) => {
        finish('error');
        if (events.throw) return events.throw(error);
        throw error;
      },
    };
  }
}
