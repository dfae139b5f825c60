/** Runs async jobs one at a time, in the order they were queued; a failed job does not stop the next. */
export class Mutex {
  private tail: Promise<unknown> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.catch(() => undefined);
    return result;
  }
}

/** At most `size` holders at once; a waiter whose signal aborts leaves the queue. */
export class Semaphore {
  private free: number;
  private readonly waiters: (() => void)[] = [];
  constructor(size: number) {
    this.free = size;
  }
  async acquire(signal: AbortSignal): Promise<() => void> {
    if (this.free > 0) {
      this.free -= 1;
    } else {
      await new Promise<void>((resolve, reject) => {
        const wake = (): void => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = (): void => {
          const i = this.waiters.indexOf(wake);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(signal.reason);
        };
        if (signal.aborted) return reject(signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
        this.waiters.push(wake);
      });
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiters.shift();
      if (next) next();
      else this.free += 1;
    };
  }
}
