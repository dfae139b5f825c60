// What every engine child process shares: its output read line by line into the node's log, and
// signals sent to its whole process group.

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

/** Signals a process group; a group that is already gone is not an error. */
export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // Already gone.
  }
}
