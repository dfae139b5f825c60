/**
 * Splits a model's raw output stream into answer text, reasoning (`<think>` blocks) and tool calls
 * (`<tool_call>{"name": ..., "arguments": ...}`), holding back anything that might be the start of
 * a tag so that no tag ever leaks into the answer. Pure: text in, events out.
 */

import { JsonEnd } from './json-end.js';

export const THINK_OPEN = '<think>';
export const THINK_CLOSE = '</think>';
export const TOOL_CALL_OPEN = '<tool_call>';
export const TOOL_CALL_CLOSE = '</tool_call>';

export type ParsedEvent =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'tool_call'; index: number; id: string; name: string }
  | { type: 'tool_call_delta'; index: number; arguments: string };

/** off: no tool calls; lazy: the model may open one with `<tool_call>`; forced: the whole output is one call's JSON. */
export type ToolMode = 'off' | 'lazy' | 'forced';

export interface OutputParserOptions {
  /** The prompt already opened a `<think>` block (reasoning templates do this). */
  startInReasoning: boolean;
  toolMode: ToolMode;
  newCallId: () => string;
}

type State = 'start' | 'answer' | 'reasoning' | 'after_reasoning' | 'tool_header' | 'tool_arguments';

// Matches only once the arguments have begun, so whitespace before them never counts as arguments.
const CALL_HEADER = /^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"arguments"\s*:\s*(?=\S)/;

/** Length of the longest suffix of `text` that is a proper prefix of `tag`. */
function partialTagSuffix(text: string, tag: string): number {
  for (let len = Math.min(tag.length - 1, text.length); len > 0; len--) {
    if (text.endsWith(tag.slice(0, len))) return len;
  }
  return 0;
}

export class OutputParser {
  private state: State;
  private buffer = '';
  private calls = 0;
  /** Tracks the current call's JSON, so the call (and the answer) ends at its closing brace. */
  private callEnd: JsonEnd | null = null;

  constructor(private readonly options: OutputParserOptions) {
    this.state = options.toolMode === 'forced' ? 'tool_header' : options.startInReasoning ? 'reasoning' : 'start';
  }

  /** True once a tool call has begun: the engine turns its grammar on from here. */
  get inToolCall(): boolean {
    return this.state === 'tool_header' || this.state === 'tool_arguments';
  }

  get toolCalls(): number {
    return this.calls;
  }

  /** The tool call's JSON is complete: nothing the model says after it belongs to the answer. */
  get callComplete(): boolean {
    return this.callEnd?.done ?? false;
  }

  push(text: string): ParsedEvent[] {
    if (this.callComplete) return [];
    this.buffer += this.inToolCall ? this.feedCall(text) : text;
    const events: ParsedEvent[] = [];
    // Each step consumes what it can; a state change re-runs the loop on what is left.
    for (;;) {
      const before = this.state;
      this.step(events, false);
      if (this.state === before) break;
    }
    return events;
  }

  /** Generation ended: releases whatever was held back. */
  finish(): ParsedEvent[] {
    const events: ParsedEvent[] = [];
    this.step(events, true);
    return events;
  }

  private emit(events: ParsedEvent[], type: 'text' | 'reasoning', text: string): void {
    if (text === '') return;
    const last = events.at(-1);
    if (last && last.type === type) last.text += text;
    else events.push({ type, text });
  }

  private step(events: ParsedEvent[], final: boolean): void {
    switch (this.state) {
      case 'start': {
        // A model may open its own think block, but only before any answer text.
        const trimmed = this.buffer.trimStart();
        if (trimmed.startsWith(THINK_OPEN)) {
          this.buffer = trimmed.slice(THINK_OPEN.length);
          this.state = 'reasoning';
        } else if (!final && (trimmed === '' || THINK_OPEN.startsWith(trimmed))) {
          return;
        } else {
          this.state = 'answer';
        }
        return;
      }
      case 'answer': {
        if (this.options.toolMode === 'lazy') {
          const at = this.buffer.indexOf(TOOL_CALL_OPEN);
          if (at >= 0) {
            this.emit(events, 'text', this.buffer.slice(0, at));
            this.buffer = this.feedCall(this.buffer.slice(at + TOOL_CALL_OPEN.length));
            this.state = 'tool_header';
            return;
          }
        }
        const hold = final || this.options.toolMode !== 'lazy' ? 0 : partialTagSuffix(this.buffer, TOOL_CALL_OPEN);
        this.emit(events, 'text', this.buffer.slice(0, this.buffer.length - hold));
        this.buffer = this.buffer.slice(this.buffer.length - hold);
        return;
      }
      case 'after_reasoning': {
        // Templates put blank lines between the think block and the answer; they are not answer text.
        this.buffer = this.buffer.trimStart();
        if (this.buffer !== '') this.state = 'answer';
        return;
      }
      case 'reasoning': {
        const at = this.buffer.indexOf(THINK_CLOSE);
        if (at >= 0) {
          this.emit(events, 'reasoning', this.buffer.slice(0, at));
          this.buffer = this.buffer.slice(at + THINK_CLOSE.length);
          this.state = 'after_reasoning';
          return;
        }
        const hold = final ? 0 : partialTagSuffix(this.buffer, THINK_CLOSE);
        this.emit(events, 'reasoning', this.buffer.slice(0, this.buffer.length - hold));
        this.buffer = this.buffer.slice(this.buffer.length - hold);
        return;
      }
      case 'tool_header': {
        const match = CALL_HEADER.exec(this.buffer);
        if (match) {
          const name = JSON.parse(`"${match[1]!}"`) as string;
          events.push({ type: 'tool_call', index: this.calls, id: this.options.newCallId(), name });
          this.calls += 1;
          this.buffer = this.buffer.slice(match[0].length);
          this.state = 'tool_arguments';
        } else if (final) {
          this.finishMalformedCall(events);
        }
        return;
      }
      case 'tool_arguments': {
        // The call object's own closing brace (and any whitespace or a closing tag) trails the
        // arguments, so the tail that could be that is held until the end.
        const tail = /[\s}]*(<\/tool_call>)?\s*$/.exec(this.buffer)![0];
        if (final) {
          const rest = this.buffer.trimEnd().replace(/(<\/tool_call>)?\s*$/, '').replace(/\}\s*$/, '');
          if (rest !== '') events.push({ type: 'tool_call_delta', index: this.calls - 1, arguments: rest });
          this.buffer = '';
          return;
        }
        const safe = this.buffer.slice(0, this.buffer.length - tail.length);
        if (safe !== '') events.push({ type: 'tool_call_delta', index: this.calls - 1, arguments: safe });
        this.buffer = tail;
        return;
      }
    }
  }

  private feedCall(text: string): string {
    this.callEnd ??= new JsonEnd();
    const end = this.callEnd.push(text);
    return end >= 0 ? text.slice(0, end) : text;
  }

  /** A call that never got a well-formed header (only without a grammar): keep the text visible. */
  private finishMalformedCall(events: ParsedEvent[]): void {
    this.emit(events, 'text', this.options.toolMode === 'lazy' ? `${TOOL_CALL_OPEN}${this.buffer}` : this.buffer);
    this.buffer = '';
    this.state = 'answer';
  }
}
