/**
 * Finds stop sequences in streamed text. Text that could still turn out to be the start of a stop
 * sequence is held back, so nothing that belongs to a stop sequence is ever emitted.
 */
export class StopMatcher {
  private held = '';
  private stopped = false;
  private matched: string | null = null;

  constructor(private readonly stops: readonly string[]) {}

  /** The stop sequence that ended the text, once one has. */
  get matchedStop(): string | null {
    return this.matched;
  }

  /** Feeds generated text; returns what is safe to emit and whether a stop sequence was hit. */
  push(text: string): { text: string; stopped: boolean } {
    if (this.stopped) return { text: '', stopped: true };
    if (this.stops.length === 0) return { text, stopped: false };
    const buffer = this.held + text;
    let first = -1;
    for (const stop of this.stops) {
      const at = buffer.indexOf(stop);
      if (at >= 0 && (first < 0 || at < first)) {
        first = at;
        this.matched = stop;
      }
    }
    if (first >= 0) {
      this.stopped = true;
      this.held = '';
      return { text: buffer.slice(0, first), stopped: true };
    }
    const keep = this.longestPartialSuffix(buffer);
    this.held = buffer.slice(buffer.length - keep);
    return { text: buffer.slice(0, buffer.length - keep), stopped: false };
  }

  /** The held-back text, once generation ended without completing a stop sequence. */
  flush(): string {
    const rest = this.stopped ? '' : this.held;
    this.held = '';
    return rest;
  }

  private longestPartialSuffix(buffer: string): number {
    let best = 0;
    for (const stop of this.stops) {
      for (let len = Math.min(stop.length - 1, buffer.length); len > best; len--) {
        if (buffer.endsWith(stop.slice(0, len))) {
          best = len;
          break;
        }
      }
    }
    return best;
  }
}
