/**
 * The order between the cluster core and the disk: core calls run at once (they are synchronous and
 * pure), their effects run one at a time behind every earlier effect. A durable effect that fails voids
 * everything the core did after it, so the owner rebuilds the core from what the disk holds; calls made
 * while it does so wait for the rebuilt core, because the old one still holds the records the disk
 * refused and would number new records after them (the log store asserts its idx are contiguous).
 */
export interface EffectChainHooks<E> {
  run(effect: E): Promise<void>;
  /** The effect that threw and why; the owner fails its waiters and rebuilds its core before resolving. */
  failed(effect: E, error: unknown): Promise<void>;
  /** A core call threw (bad input from a peer): nothing ran, the chain carries on. */
  rejected(error: unknown): void;
}

export class EffectChain<E> {
  private tail: Promise<void> = Promise.resolve();
  /** Bumped by every failure; effects queued under an older generation describe records the disk never got. */
  private generation = 0;
  private rebuilding = false;
  /** Calls queued behind a rebuild; later calls queue behind them so the core sees them in order. */
  private deferred = 0;
  private closed = false;

  constructor(private readonly hooks: EffectChainHooks<E>) {}

  /** Runs `call` against the current core now, or once a rebuild in progress has finished. */
  feed(call: () => E[]): void {
    if (this.closed) return;
    if (this.rebuilding || this.deferred > 0) {
      this.deferred++;
      this.tail = this.tail.then(() => {
        this.deferred--;
        this.callNow(call);
      });
      return;
    }
    this.callNow(call);
  }

  /** Stops taking calls and resolves once every call already taken and every effect queued has run. */
  async close(): Promise<void> {
    this.closed = true;
    // Deferred calls queue their effects when they run, behind what was awaited.
    for (let awaited: Promise<void> | null = null; awaited !== this.tail; ) {
      awaited = this.tail;
      await awaited.catch(() => undefined);
    }
  }

  private callNow(call: () => E[]): void {
    let effects: E[];
    try {
      effects = call();
    } catch (error) {
      this.hooks.rejected(error);
      return;
    }
    if (effects.length === 0) return;
    const generation = this.generation;
    this.tail = this.tail.then(() => this.run(effects, generation));
  }

  private async run(effects: E[], generation: number): Promise<void> {
    if (generation !== this.generation) return;
    for (const effect of effects) {
      try {
        await this.hooks.run(effect);
      } catch (error) {
        this.generation++;
        this.rebuilding = true;
        try {
          await this.hooks.failed(effect, error);
        } finally {
          this.rebuilding = false;
        }
        return;
      }
    }
  }
}
