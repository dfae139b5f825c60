// FIFO token reservations for a managed llama-server. The server shares one KV cache between its
// slots (unified KV); a burst of long requests that together need more cells than the cache holds
// makes llama-server purge, retry and finally fail decodes. So before a request is sent it reserves
// the most tokens it can occupy (prompt + tokens it may generate), and requests wait here, strictly
// first in first out, until their reservation fits the budget and a slot is free.
//
// Pure: no timers, no promises, no I/O. Every mutation returns the ids it granted, in grant order,
// and the caller starts exactly those requests.

import { ShoalError } from '../../common/errors.js';

export interface ReservationLimits {
  /** Tokens of KV cache shared by all running requests (llama-server's total `-c`). */
  budgetTokens: number;
  /** Requests running at once (llama-server's `--parallel` slots). */
  maxActive: number;
  /** Requests allowed to wait; one more is refused with QUEUE_FULL. */
  maxQueued: number;
  /** The most one request may reserve (one slot's context). Larger is refused with CONTEXT_OVERFLOW. */
  maxRequestTokens: number;
}

interface Waiting {
  id: string;
  /** null until the caller knows the size (the prompt is being tokenized); it blocks those behind it. */
  tokens: number | null;
}

export interface ReservationSnapshot {
  active: number;
  queued: number;
  reservedTokens: number;
}

export class TokenReservations {
  private readonly waiting: Waiting[] = [];
  private readonly active = new Map<string, number>();
  private reserved = 0;

  constructor(readonly limits: ReservationLimits) {
    for (const [name, value] of Object.entries(limits)) {
      if (!Number.isSafeInteger(value) || value < (name === 'maxQueued' ? 0 : 1)) {
        throw new RangeError(`reservation limit ${name} must be a positive integer, got ${value}`);
      }
    }
    if (limits.maxRequestTokens > limits.budgetTokens) {
      throw new RangeError(`maxRequestTokens (${limits.maxRequestTokens}) exceeds budgetTokens (${limits.budgetTokens}): such a request could never run`);
    }
  }

  snapshot(): ReservationSnapshot {
    return { active: this.active.size, queued: this.waiting.length, reservedTokens: this.reserved };
  }

  has(id: string): boolean {
    return this.active.has(id) || this.waiting.some((w) => w.id === id);
  }

  /** Waiting ids, the next to be granted first. */
  waitingIds(): string[] {
    return this.waiting.map((w) => w.id);
  }

  isActive(id: string): boolean {
    return this.active.has(id);
  }

  /**
   * Adds a request at the back of the queue, with its size or null when the size is not known yet.
   * Throws QUEUE_FULL when `maxQueued` requests already wait, CONTEXT_OVERFLOW when the size can
   * never fit. Returns the ids granted by this call (possibly `id` itself).
   */
  enqueue(id: string, tokens: number | null): string[] {
    if (this.has(id)) throw new Error(`reservation ${id} already exists`);
    if (this.waiting.length >= this.limits.maxQueued) {
      throw new ShoalError(
        'QUEUE_FULL',
        `${this.waiting.length} requests are already waiting for this model (limit ${this.limits.maxQueued}): retry later or add replicas`,
      );
    }
    if (tokens !== null) this.checkSize(tokens);
    this.waiting.push({ id, tokens });
    return this.grant();
  }

  /**
   * Sets the size of a waiting request enqueued with an unknown size. A size that can never fit
   * throws CONTEXT_OVERFLOW and changes nothing: the caller fails the request and `release`s it,
   * which lets the queue behind it move.
   */
  setSize(id: string, tokens: number): string[] {
    const entry = this.waiting.find((w) => w.id === id);
    if (!entry) throw new Error(`reservation ${id} is not waiting`);
    if (entry.tokens !== null) throw new Error(`reservation ${id} already has a size`);
    this.checkSize(tokens);
    entry.tokens = tokens;
    return this.grant();
  }

  /**
   * Whether `id`, waiting at the head with no size yet, would be granted `tokens` at once: a slot is
   * free and they fit. A caller may then reserve that upper bound instead of first measuring its
   * exact size, and `shrink` it once the size is known; it costs nobody behind it a wait.
   */
  fitsNow(id: string, tokens: number): boolean {
    const head = this.waiting[0];
    return head?.id === id && head.tokens === null && this.active.size < this.limits.maxActive && this.reserved + tokens <= this.limits.budgetTokens;
  }

  /**
   * Lowers a running request's reservation to what it turned out to need (an upper bound was
   * granted through `fitsNow`). Returns the ids the freed tokens let start.
   */
  shrink(id: string, tokens: number): string[] {
    const current = this.active.get(id);
    if (current === undefined) throw new Error(`reservation ${id} is not active`);
    if (!Number.isSafeInteger(tokens) || tokens < 1 || tokens > current) throw new RangeError(`a reservation of ${current} tokens cannot shrink to ${tokens}`);
    this.active.set(id, tokens);
    this.reserved -= current - tokens;
    return this.grant();
  }

  /**
   * Ends a request, running or waiting: its tokens go back to the budget, or it leaves the queue.
   * Unknown ids are ignored (a request may be released by both its error and its abort path).
   * Returns the ids this frees up to run.
   */
  release(id: string): string[] {
    const tokens = this.active.get(id);
    if (tokens !== undefined) {
      this.active.delete(id);
      this.reserved -= tokens;
      return this.grant();
    }
    const index = this.waiting.findIndex((w) => w.id === id);
    if (index < 0) return [];
    this.waiting.splice(index, 1);
    // Only the head's leaving can let others start.
    return index === 0 ? this.grant() : [];
  }

  private checkSize(tokens: number): void {
    if (!Number.isSafeInteger(tokens) || tokens < 1) throw new RangeError(`a reservation must be a positive integer of tokens, got ${tokens}`);
    if (tokens > this.limits.maxRequestTokens) {
      throw new ShoalError(
        'CONTEXT_OVERFLOW',
        `the request needs ${tokens} tokens of context (prompt plus tokens to generate) but one request may hold at most ${this.limits.maxRequestTokens}: shorten the prompt, lower max_tokens, or place the model with a larger context size`,
      );
    }
  }

  /** Starts waiting requests from the head while they fit; never lets a later one overtake. */
  private grant(): string[] {
    const granted: string[] = [];
    while (this.waiting.length > 0 && this.active.size < this.limits.maxActive) {
      const head = this.waiting[0]!;
      if (head.tokens === null || this.reserved + head.tokens > this.limits.budgetTokens) break;
      this.waiting.shift();
      this.active.set(head.id, head.tokens);
      this.reserved += head.tokens;
      granted.push(head.id);
    }
    return granted;
  }
}
