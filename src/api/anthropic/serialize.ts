import { randomBytes } from 'node:crypto';
import { ShoalError } from '../../common/errors.js';
import type { FinishReason, TaskEvent, Usage } from '../../wire/task.js';
import type { AnthropicErrorBody } from './errors.js';

/** Builders for Anthropic response bodies and stream events. Pure apart from id generation, which callers do once. */

export function anthropicMessageId(): string {
  return `msg_${randomBytes(12).toString('hex')}`;
}

export type TextBlock = { type: 'text'; text: string };
export type ThinkingBlock = { type: 'thinking'; thinking: string; signature: string };
export type ToolUseBlock = { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };
export type ContentBlock = TextBlock | ThinkingBlock | ToolUseBlock;

export type StopReason = 'end_turn' | 'max_tokens' | 'tool_use' | 'stop_sequence';

/** How a generation ended, as the runner's `end` event says it. */
export interface Ending {
  finishReason: FinishReason;
  stopSequence: string | null;
}

export function toStopReason({ finishReason, stopSequence }: Ending): StopReason {
  switch (finishReason) {
    case 'stop':
      return stopSequence === null ? 'end_turn' : 'stop_sequence';
    case 'length':
      return 'max_tokens';
    case 'tool_calls':
      return 'tool_use';
  }
}

/**
 * Anthropic's split of the prompt: `input_tokens` is the part evaluated afresh, and the prompt is
 * the sum of all three (its docs: "Total input tokens in a request is the summation of
 * `input_tokens`, `cache_creation_input_tokens`, and `cache_read_input_tokens`"). Shoal never
 * writes a cache entry in Anthropic's sense (`cache_control` is not needed: every prompt stays in
 * its slot), so creation is always 0, as Anthropic reports it when caching was not asked for.
 */
export interface AnthropicUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
}

export function toAnthropicUsage(usage: Usage): AnthropicUsage {
  const cached = Math.min(usage.cachedPromptTokens ?? 0, usage.promptTokens);
  return { input_tokens: usage.promptTokens - cached, cache_creation_input_tokens: 0, cache_read_input_tokens: cached, output_tokens: usage.completionTokens };
}

export interface MessageMeta {
  id: string;
  model: string;
}

export function messageBody(meta: MessageMeta, content: ContentBlock[], ending: Ending | null, usage: AnthropicUsage) {
  return {
    id: meta.id,
    type: 'message' as const,
    role: 'assistant' as const,
    model: meta.model,
    content,
    stop_reason: ending ? toStopReason(ending) : null,
    stop_sequence: ending?.stopSequence ?? null,
    usage,
  };
}

export type MessageBody = ReturnType<typeof messageBody>;

export type ContentDelta =
  | { type: 'text_delta'; text: string }
  | { type: 'thinking_delta'; thinking: string }
  | { type: 'input_json_delta'; partial_json: string };

/** Every event Shoal streams; `type` doubles as the SSE `event:` name, so it is always one of these constants. */
export type StreamEvent =
  | { type: 'message_start'; message: MessageBody }
  | { type: 'content_block_start'; index: number; content_block: ContentBlock }
  | { type: 'ping' }
  | { type: 'content_block_delta'; index: number; delta: ContentDelta }
  | { type: 'content_block_stop'; index: number }
  | { type: 'message_delta'; delta: { stop_reason: StopReason; stop_sequence: string | null }; usage: AnthropicUsage }
  | { type: 'message_stop' }
  | AnthropicErrorBody;

/**
 * The engine says what it reused from its cache only at the end, so the start counts the whole
 * prompt as input; `message_delta` then carries the final split, whose counters are cumulative
 * totals that replace the start's (as the SDK's stream accumulator applies them).
 */
export function messageStartEvent(meta: MessageMeta, promptTokens: number): StreamEvent {
  return { type: 'message_start', message: messageBody(meta, [], null, toAnthropicUsage({ promptTokens, completionTokens: 0 })) };
}

export function messageEndEvents(ending: Ending, usage: Usage): StreamEvent[] {
  return [
    { type: 'message_delta', delta: { stop_reason: toStopReason(ending), stop_sequence: ending.stopSequence }, usage: toAnthropicUsage(usage) },
    { type: 'message_stop' },
  ];
}

/** One SSE frame. JSON.stringify escapes CR and LF, and the event name is a constant, so no text can forge a line. */
export function sseFrame(event: StreamEvent): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

export type ContentEvent = Extract<TaskEvent, { type: 'text' | 'reasoning' | 'tool_call' | 'tool_call_delta' }>;

type OpenBlock =
  | { type: 'text'; index: number; text: string }
  | { type: 'thinking'; index: number; thinking: string }
  | { type: 'tool_use'; index: number; id: string; name: string; json: string };

/**
 * Turns a generation's content events into Anthropic content blocks, in order of appearance: each
 * change between text, thinking and a tool call closes the open block and starts the next index.
 * The same instance yields the stream events as they happen and the whole content at the end, so
 * streamed and non-streamed answers cannot disagree.
 */
export class ContentAssembler {
  private readonly blocks: OpenBlock[] = [];
  private open: OpenBlock | null = null;
  private readonly toolBlocks = new Map<number, OpenBlock & { type: 'tool_use' }>();

  push(event: ContentEvent): StreamEvent[] {
    switch (event.type) {
      case 'text':
        return this.append('text', event.text);
      case 'reasoning':
        return this.append('thinking', event.text);
      case 'tool_call': {
        const block: OpenBlock & { type: 'tool_use' } = { type: 'tool_use', index: this.blocks.length, id: event.id, name: event.name, json: '' };
        this.toolBlocks.set(event.index, block);
        return [...this.close(), ...this.start(block)];
      }
      case 'tool_call_delta': {
        const block = this.toolBlocks.get(event.index);
        // Anthropic cannot reopen a closed block, so arguments must follow their call directly.
        if (!block || block !== this.open) {
          throw new ShoalError('INTERNAL', `the runner sent arguments for tool call ${event.index} after another block began`);
        }
        if (event.arguments === '') return [];
        block.json += event.arguments;
        return [{ type: 'content_block_delta', index: block.index, delta: { type: 'input_json_delta', partial_json: event.arguments } }];
      }
    }
  }

  /** Closes the last block; an answer with no content at all still gets one empty text block. */
  finish(): StreamEvent[] {
    if (this.blocks.length === 0) return [...this.start({ type: 'text', index: 0, text: '' }), ...this.close()];
    return this.close();
  }

  /**
   * The whole content, once `finish` ran. A call cut off by max_tokens has `{}` as its input: its
   * JSON is incomplete (a stream client saw the partial JSON as it came).
   */
  content(finish: FinishReason): ContentBlock[] {
    return this.blocks.map((block): ContentBlock => {
      switch (block.type) {
        case 'text':
          return { type: 'text', text: block.text };
        case 'thinking':
          return { type: 'thinking', thinking: block.thinking, signature: '' };
        case 'tool_use':
          return { type: 'tool_use', id: block.id, name: block.name, input: toolInput(block, finish === 'length') };
      }
    });
  }

  private append(type: 'text' | 'thinking', text: string): StreamEvent[] {
    if (text === '') return [];
    const events: StreamEvent[] = [];
    let block = this.open;
    if (block?.type !== type) {
      events.push(...this.close());
      block = type === 'text' ? { type, index: this.blocks.length, text: '' } : { type, index: this.blocks.length, thinking: '' };
      events.push(...this.start(block));
    }
    if (block.type === 'text') {
      block.text += text;
      events.push({ type: 'content_block_delta', index: block.index, delta: { type: 'text_delta', text } });
    } else if (block.type === 'thinking') {
      block.thinking += text;
      events.push({ type: 'content_block_delta', index: block.index, delta: { type: 'thinking_delta', thinking: text } });
    }
    return events;
  }

  private start(block: OpenBlock): StreamEvent[] {
    this.blocks.push(block);
    this.open = block;
    const contentBlock: ContentBlock =
      block.type === 'text'
        ? { type: 'text', text: '' }
        : block.type === 'thinking'
          ? { type: 'thinking', thinking: '', signature: '' }
          : { type: 'tool_use', id: block.id, name: block.name, input: {} };
    const events: StreamEvent[] = [{ type: 'content_block_start', index: block.index, content_block: contentBlock }];
    // Anthropic sends its keep-alive ping right after the first block starts; clients expect it there.
    if (block.index === 0) events.push({ type: 'ping' });
    return events;
  }

  private close(): StreamEvent[] {
    if (!this.open) return [];
    const index = this.open.index;
    this.open = null;
    return [{ type: 'content_block_stop', index }];
  }
}

function toolInput(block: { name: string; json: string }, truncated: boolean): Record<string, unknown> {
  if (block.json === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(block.json);
  } catch (error) {
    if (truncated) return {};
    throw new ShoalError('INTERNAL', `the model's call to tool '${block.name}' has arguments that are not JSON`, { cause: error });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    if (truncated) return {};
    throw new ShoalError('INTERNAL', `the model's call to tool '${block.name}' has arguments that are not a JSON object`);
  }
  return parsed as Record<string, unknown>;
}
