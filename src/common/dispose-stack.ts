/**
 * Stops what was started, last started first: a small stand-in for TC39's `AsyncDisposableStack`,
 * which Node 20 lacks. One stack serves both a clean stop and a start that failed half way, so the two
 * can never disagree on the order. Every step runs even when an earlier one failed (a part that fails
 * to stop must not keep the others running); the first failure is rethrown once all have run.
 */
export class DisposeStack implements AsyncDisposable {
  private steps: (() => unknown)[] = [];
  private disposed = false;

  /** Runs `step` at disposal, before every step deferred earlier. */
  defer(step: () => unknown): void {
    if (this.disposed) throw new Error('DisposeStack: defer() after disposeAsync(): the step would never run');
    this.steps.push(step);
  }

  /** Disposes `value` at disposal (like `defer`), and returns it so a part can be started and registered in one line. */
  use<T extends AsyncDisposable | Disposable | null | undefined>(value: T): T {
    if (value === null || value === undefined) return value;
    if (Symbol.asyncDispose in value) this.defer(() => value[Symbol.asyncDispose]());
    else this.defer(() => value[Symbol.dispose]());
    return value;
  }

  /** Runs every step, newest first, once; a second call finds nothing left to run. */
  async disposeAsync(): Promise<void> {
    this.disposed = true;
    const steps = this.steps.reverse();
    this.steps = [];
    let failure: { error: unknown } | null = null;
    for (const step of steps) {
      try {
        await step();
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure !== null) throw failure.error;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.disposeAsync();
  }
}
