import type { Logger } from '../common/log.js';

/** Subscribers to one router event; a listener that throws is logged and does not stop the others. */
export class Listeners<T> {
  private readonly set = new Set<(value: T) => void>();
  constructor(private readonly log: Logger, private readonly what: string) {}
  add(listener: (value: T) => void): () => void {
    this.set.add(listener);
    return () => this.set.delete(listener);
  }
  emit(value: T): void {
    for (const listener of this.set) {
      try {
        listener(value);
      } catch (error) {
        this.log.error({ err: error }, `an ${this.what} listener threw`);
      }
    }
  }
}
