// Server-sent events, parsed from text chunks as they arrive (WHATWG "event stream interpretation").
// The dashboard reads every stream with fetch (not EventSource) so it can send the admin token as a
// header; this parser is the part of that which needs no browser.

export interface SseEvent {
  /** `message` when the stream named none. */
  event: string;
  data: string;
  /** The last `id:` seen on the stream so far (it carries over to later events). */
  id: string | null;
}

/** Largest event the parser buffers; a stream that never ends an event is cut off instead of eating memory. */
export const MAX_SSE_EVENT_CHARS = 8 * 1024 * 1024;

export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private dataChars = 0;
  private eventName = '';
  private lastId: string | null = null;
  /** The previous chunk ended in '\r': a '\n' starting the next one belongs to the same line break. */
  private pendingCr = false;
  /** The server's `retry:` hint in milliseconds, when it sent one. */
  retryMs: number | null = null;

  /** Feeds decoded text; returns the events it completed. */
  push(chunk: string): SseEvent[] {
    let text = chunk;
    if (this.pendingCr && text.startsWith('\n')) text = text.slice(1);
    this.pendingCr = false;
    this.buffer += text;
    const events: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < this.buffer.length; i += 1) {
      const c = this.buffer.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this.buffer.slice(start, i);
      if (c === 13) {
        if (i + 1 === this.buffer.length) this.pendingCr = true;
        else if (this.buffer.charCodeAt(i + 1) === 10) i += 1;
      }
      start = i + 1;
      const event = this.line(line);
      if (event) events.push(event);
    }
    this.buffer = this.buffer.slice(start);
    if (this.buffer.length + this.dataChars > MAX_SSE_EVENT_CHARS) {
      throw new Error(`an event on this stream is larger than ${MAX_SSE_EVENT_CHARS} characters`);
    }
    return events;
  }

  private line(line: string): SseEvent | null {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return null;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.eventName = value;
        break;
      case 'data':
        this.data.push(value);
        this.dataChars += value.length + 1;
        break;
      case 'id':
        if (!value.includes('\0')) this.lastId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        // Unknown fields are ignored, as the standard says.
        break;
    }
    return null;
  }

  private dispatch(): SseEvent | null {
    const hadData = this.data.length > 0;
    const event: SseEvent = { event: this.eventName === '' ? 'message' : this.eventName, data: this.data.join('\n'), id: this.lastId };
    this.data = [];
    this.dataChars = 0;
    this.eventName = '';
    return hadData ? event : null;
  }
}
