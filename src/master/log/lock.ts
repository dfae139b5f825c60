/** A readers-writer lock: reads run together; structural changes (rotation, truncation, compaction) run alone. */
export class RwLock {
  private readers = 0;
  private writer = false;
  private readonly waiting: { exclusive: boolean; grant: () => void }[] = [];

  async shared<T>(fn: () => Promise<T>): Promise<T> {
    if (this.writer || this.waiting.length > 0) await new Promise<void>((grant) => this.waiting.push({ exclusive: false, grant }));
    else this.readers += 1;
    try {
      return await fn();
    } finally {
      this.readers -= 1;
      this.pump();
    }
  }

  async exclusive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.writer || this.readers > 0 || this.waiting.length > 0) await new Promise<void>((grant) => this.waiting.push({ exclusive: true, grant }));
    else this.writer = true;
    try {
      return await fn();
    } finally {
      this.writer = false;
      this.pump();
    }
  }

  private pump(): void {
    while (this.waiting.length > 0 && !this.writer) {
      const next = this.waiting[0]!;
      if (next.exclusive) {
        if (this.readers > 0) return;
        this.waiting.shift();
        this.writer = true;
        next.grant();
        return;
      }
      this.waiting.shift();
      this.readers += 1;
      next.grant();
    }
  }
}
