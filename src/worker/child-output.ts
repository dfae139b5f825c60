// What every engine child process shares: its output read line by line into the node's log, and
// signals sent to its whole process group.

import { STDERR_TAIL_LINE_CHARS, STDERR_TAIL_LINES } from '../wire/diagnostics.js';

/** Longest line forwarded from a child's output; longer ones are cut. */
export const MAX_FORWARDED_LINE_CHARS = 4096;

/** Calls `onLine` for each non-empty line of `stream`, cut at MAX_FORWARDED_LINE_CHARS. */
export function forwardLines(stream: NodeJS.ReadableStream | null, onLine: (line: string) => void): void {
  if (!stream) return;
  let buffer = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffer += chunk;
    let newline = buffer.indexOf('\n');
    while (newline >= 0) {
      const line = buffer.slice(0, newline).trimEnd();
      buffer = buffer.slice(newline + 1);
      if (line !== '') onLine(line.slice(0, MAX_FORWARDED_LINE_CHARS));
      newline = buffer.indexOf('\n');
    }
    if (buffer.length > MAX_FORWARDED_LINE_CHARS) {
      onLine(buffer.slice(0, MAX_FORWARDED_LINE_CHARS));
      buffer = '';
    }
  });
}

/**
 * The last lines of an engine's stderr, for diagnostics: at most `lines` lines, each cut at
 * `lineChars`. Kept across restarts, since the lines before a crash are the ones that explain it.
 */
export class LineTail {
  private readonly kept: string[] = [];

  constructor(
    private readonly lines = STDERR_TAIL_LINES,
    private readonly lineChars = STDERR_TAIL_LINE_CHARS,
  ) {}

  push(line: string): void {
    this.kept.push(line.length <= this.lineChars ? line : line.slice(0, this.lineChars));
    if (this.kept.length > this.lines) this.kept.shift();
  }

  /** Oldest first. */
  snapshot(): string[] {
    return [...this.kept];
  }
}

/** Signals a process group; a group that is already gone is not an error. */
export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}
