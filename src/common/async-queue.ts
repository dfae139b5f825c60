/**
 * A single-consumer queue that turns pushes from callbacks into an async iterator. Producers are
 * bounded elsewhere (a generation never exceeds its context), so the queue itself does not cap size.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiting: ((result: IteratorResult<T>) => void) | null = null;
  private rejectWaiting: ((error: unknown) => void) | null = null;
  private done = false;
  private failure: unknown = undefined;
  private failed = false;

  /** `onAbandon` runs when the consumer stops early (break, throw, `return()`), so the producer can stop too. */
  constructor(private readonly onAbandon: () => void = () => {}) {}

  push(item: T): void {
    if (this.done) return;
    if (this.waiting) {
      const resolve = this.waiting;
      this.clearWaiting();
      resolve({ value: item, done: false });
    } else {
      this.items.push(item);
    }
  }

  /** Ends the stream after the items already pushed. */
  end(): void {
    if (this.done) return;
    this.done = true;
    if (this.waiting && this.items.length === 0) {
      const resolve = this.waiting;
      this.clearWaiting();
      resolve({ value: undefined, done: true });
    }
  }

  /** Ends the stream with an error, delivered after the items already pushed. */
  fail(error: unknown): void {
    if (this.done) return;
    this.failed = true;
    this.failure = error;
    this.done = true;
    if (this.waiting && this.items.length === 0) {
      const reject = this.rejectWaiting!;
      this.clearWaiting();
      reject(error);
    }
  }

  get ended(): boolean {
    return this.done;
  }

  private clearWaiting(): void {
    this.waiting = null;
    this.rejectWaiting = null;
  }

  private next(): Promise<IteratorResult<T>> {
    if (this.items.length > 0) return Promise.resolve({ value: this.items.shift() as T, done: false });
    if (this.failed) return Promise.reject(this.failure);
    if (this.done) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve, reject) => {
      this.waiting = resolve;
      this.rejectWaiting = reject;
    });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => this.next(),
      return: () => {
        if (!this.done) {
          this.done = true;
          this.items.length = 0;
          this.onAbandon();
        }
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
