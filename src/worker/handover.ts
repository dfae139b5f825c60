// Moving an instance onto another engine without failing or cutting a request (issue #14): the worker
// holds each serving instance behind an InstanceFront, whose engine can be swapped while requests run.
// Each engine keeps its own RecordedRunner (so a stall's kill hits the engine that stalled), and each
// engine's requests are counted below that wrapper, where the recorder's pump drives every request's
// stream to its end whatever its consumer does: a count of zero means the engine holds nothing more.

import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { InstanceRunner, RunnerStatus } from './runner-contract.js';
import type { RecordedRunner } from './recorded-runner.js';

/** An engine's runner that knows how many of its requests are still open in the engine. */
export class CountedRunner implements InstanceRunner {
  readonly run?: (task: RunnerTask, signal: AbortSignal) => AsyncIterable<TaskEvent>;
  private open = 0;
  private readonly idleWaiters: Array<() => void> = [];

  constructor(readonly inner: InstanceRunner) {
    const run = inner.run?.bind(inner);
    if (run) this.run = (task, signal) => this.counted(run, task, signal);
  }

  status(): RunnerStatus {
    return this.inner.status();
  }

  whenReady(signal?: AbortSignal): Promise<void> {
    return this.inner.whenReady(signal);
  }

  stop(): Promise<void> {
    return this.inner.stop();
  }

  kill(reason: string): void {
    this.inner.kill?.(reason);
  }

  stderrTail(): string[] {
    return this.inner.stderrTail?.() ?? [];
  }

  /** Resolves once no request admitted so far is open in the engine. */
  idle(): Promise<void> {
    if (this.open === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private counted(run: NonNullable<InstanceRunner['run']>, task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    // Counted at admission, synchronously: a request routed here before a swap is seen by the drain.
    const events = run(task, signal);
    this.open += 1;
    let done = false;
    const release = (): void => {
      if (done) return;
      done = true;
      this.open -= 1;
      if (this.open === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
    };
    return {
      [Symbol.asyncIterator]: () => {
        const iterator = events[Symbol.asyncIterator]();
        return {
          next: async () => {
            try {
              const step = await iterator.next();
              if (step.done === true) release();
              return step;
            } catch (error) {
              release();
              throw error;
            }
          },
          return: async (value?: unknown) => {
            try {
              return (await iterator.return?.(value)) ?? { done: true, value: undefined };
            } finally {
              release();
            }
          },
        };
      },
    };
  }
}

/** One engine as the worker holds it: counted, then recorded and watched. */
export interface HeldEngine {
  counted: CountedRunner;
  recorded: RecordedRunner;
}

/**
 * The stable runner of a serving instance: what `worker.get(id).runner` returns whatever engine
 * serves it. New requests go to the current engine; an engine swapped out keeps serving what it
 * already took (in flight and queued) until it is drained, and its load still counts here meanwhile.
 */
export class InstanceFront implements InstanceRunner {
  private current: HeldEngine;
  private readonly draining = new Set<HeldEngine>();

  constructor(engine: HeldEngine) {
    this.current = engine;
  }

  get engine(): HeldEngine {
    return this.current;
  }

  /** Every engine held: the current one, then those still draining. */
  engines(): HeldEngine[] {
    return [this.current, ...this.draining];
  }

  run(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    const run = this.current.recorded.run;
    if (!run) throw new TypeError('an instance front holds only request-serving engines');
    return run(task, signal);
  }

  status(): RunnerStatus {
    const status = this.current.recorded.status();
    let { inFlight, queued } = status;
    for (const old of this.draining) {
      const drained = old.recorded.status();
      inFlight += drained.inFlight;
      queued += drained.queued;
    }
    return { ...status, inFlight, queued };
  }

  whenReady(signal?: AbortSignal): Promise<void> {
    return this.current.recorded.whenReady(signal);
  }

  kill(reason: string): void {
    this.current.recorded.kill(reason);
  }

  stderrTail(): string[] {
    return this.current.recorded.stderrTail();
  }

  /**
   * Routes new requests to `next` at once (the caller waited for it to be ready), then lets the old
   * engine finish every request it took and stops it. Resolves once the old engine is stopped.
   */
  async swap(next: HeldEngine): Promise<void> {
    const old = this.current;
    this.current = next;
    this.draining.add(old);
    try {
      await old.counted.idle();
      await old.recorded.stop();
    } finally {
      this.draining.delete(old);
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.engines().map((engine) => engine.recorded.stop()));
  }
}
