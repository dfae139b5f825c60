/**
 * Finds where a streamed JSON object or array ends. Grammars allow whitespace after a complete value
 * and a random or obstinate model may keep choosing it over end-of-text; the answer is complete the
 * moment the outermost bracket closes, so generation stops there. Incremental: each character is
 * looked at once.
 */
export class JsonEnd {
  private depth = 0;
  private inString = false;
  private escaped = false;
  private started = false;
  private complete = false;

  get done(): boolean {
    return this.complete;
  }

  /** Feeds text; returns the offset just past the closing bracket when it is in this text, else -1. */
  push(text: string): number {
    if (this.complete) return 0;
    for (let i = 0; i < text.length; i++) {
      const ch = text[i]!;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (ch === '\\') this.escaped = true;
        else if (ch === '"') this.inString = false;
        continue;
      }
      if (ch === '"') {
        this.inString = true;
      } else if (ch === '{' || ch === '[') {
        this.depth += 1;
        this.started = true;
      } else if (ch === '}' || ch === ']') {
        this.depth -= 1;
        if (this.started && this.depth === 0) {
          this.complete = true;
          return i + 1;
        }
      }
    }
    return -1;
  }
}
