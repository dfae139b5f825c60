/**
 * A fixed-capacity FIFO: pushing onto a full ring evicts the oldest entry. Every bounded history in
 * the metrics and logs code (samples, log lines) is one of these, so its memory never grows.
 */
export class Ring<T> implements Iterable<T> {
  private readonly slots: (T | undefined)[];
  private head = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`a ring needs a positive integer capacity, got ${capacity}`);
    this.slots = new Array<T | undefined>(capacity);
  }

  get size(): number {
    return this.count;
  }

  /** Adds at the newest end; returns the entry evicted to make room, if the ring was full. */
  push(item: T): T | undefined {
    if (this.count < this.capacity) {
      this.slots[(this.head + this.count) % this.capacity] = item;
      this.count += 1;
      return undefined;
    }
    const evicted = this.slots[this.head];
    this.slots[this.head] = item;
    this.head = (this.head + 1) % this.capacity;
    return evicted;
  }

  /** Removes and returns the oldest entry. */
  shift(): T | undefined {
    if (this.count === 0) return undefined;
    const item = this.slots[this.head];
    this.slots[this.head] = undefined;
    this.head = (this.head + 1) % this.capacity;
    this.count -= 1;
    return item;
  }

  /** 0 is the oldest entry, -1 the newest; undefined outside the ring. */
  at(index: number): T | undefined {
    if (!Number.isInteger(index)) return undefined;
    const i = index < 0 ? this.count + index : index;
    if (i < 0 || i >= this.count) return undefined;
    return this.slots[(this.head + i) % this.capacity];
  }

  oldest(): T | undefined {
    return this.at(0);
  }

  newest(): T | undefined {
    return this.at(-1);
  }

  clear(): void {
    this.slots.fill(undefined);
    this.head = 0;
    this.count = 0;
  }

  /** Oldest first. */
  toArray(): T[] {
    const out = new Array<T>(this.count);
    for (let i = 0; i < this.count; i += 1) out[i] = this.slots[(this.head + i) % this.capacity] as T;
    return out;
  }

  *[Symbol.iterator](): Iterator<T> {
    for (let i = 0; i < this.count; i += 1) yield this.slots[(this.head + i) % this.capacity] as T;
  }
}
