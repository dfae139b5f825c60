// Times each generation the API node dispatches and hands the finished ones to the envelope store
// (envelope.ts). It sits on the token path, so per event it does one comparison and, for the first
// token and the end, one clock read: no allocation per token beyond the promise any async step makes.

import { performance } from 'node:perf_hooks';
import type { ServingInstance } from '../inference/dispatcher.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { EnvelopeStore } from './envelope.js';

export class EnvelopeMeter {
  /** Requests this node has open on each instance, keyed `nodeId/instanceId`: live, where reports lag. */
  private readonly open = new Map<string, number>();

  constructor(
    private readonly store: EnvelopeStore,
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  /** Passes `events` on unchanged, recording the request's speed when it ends well. */
  observe(served: ServingInstance, task: RunnerTask, signal: AbortSignal, events: AsyncIterable<TaskEvent>): AsyncIterable<TaskEvent> {
    if (task.kind !== 'generate') return events;
    const key = `${served.nodeId}/${served.instanceId}`;
    const openBefore = this.open.get(key) ?? 0;
    // The instance's own count when it is live (this node's runners), this node's when reports lag.
    const inFlight = Math.max(served.load, openBefore) + 1;
    this.open.set(key, openBefore + 1);
    const startedMs = this.nowMs();
    let firstMs: number | null = null;
    let closed = false;
    const close = (): void => {
      if (closed) return;
      closed = true;
      signal.removeEventListener('abort', close);
      const left = (this.open.get(key) ?? 1) - 1;
      if (left <= 0) this.open.delete(key);
      else this.open.set(key, left);
    };
    if (signal.aborted) close();
    else signal.addEventListener('abort', close, { once: true });

    const onResult = (result: IteratorResult<TaskEvent>): IteratorResult<TaskEvent> => {
      if (result.done === true) {
        close();
        return result;
      }
      const event = result.value;
      if (firstMs === null && (event.type === 'text' || event.type === 'reasoning' || event.type === 'tool_call')) firstMs = this.nowMs();
      else if (event.type === 'end') {
        const endMs = this.nowMs();
        // A request cancelled before its end is no measure of the engine's speed.
        const cancelled = closed;
        close();
        if (!cancelled && firstMs !== null) {
          const tokens = event.usage.completionTokens;
          // The first token's time is prefill's; the speed is of the tokens after it.
          const tokensPerS = tokens >= 2 ? ((tokens - 1) * 1000) / Math.max(1, endMs - firstMs) : null;
          this.store.record(
            { modelId: served.modelId, backend: served.backend, nodeId: served.nodeId },
            { inFlight, tokensPerS, ttftMs: Math.max(0, firstMs - startedMs), latencyMs: Math.max(0, endMs - startedMs) },
          );
        }
      }
      return result;
    };
    const onError = (error: unknown): never => {
      close();
      throw error;
    };
    return {
      [Symbol.asyncIterator]: () => {
        const inner = events[Symbol.asyncIterator]();
        return {
          next: () => inner.next().then(onResult, onError),
          return: async (value?: unknown) => {
            close();
            return inner.return ? inner.return(value) : { done: true, value: undefined };
          },
          throw: async (error?: unknown) => {
            close();
            if (inner.throw) return inner.throw(error);
            throw error;
          },
        };
      },
    };
  }
}
