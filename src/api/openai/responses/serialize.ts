import { randomBytes } from 'node:crypto';
import { assertNever, ShoalError } from '../../../common/errors.js';
import type { FinishReason, TaskEvent, Usage } from '../../../wire/task.js';
import { toOpenAIError } from '../errors.js';
import type { CreateResponseRequest } from './schemas.js';

/**
 * Builders for Responses API bodies and stream events. `ResponseAssembler` turns a task's events into
 * both the stream events and the final response object, so streamed and non-streamed answers are
 * built by the same code and cannot drift apart.
 */

export type ResponsesIdPrefix = 'resp' | 'msg' | 'fc' | 'call' | 'rs';

export function responsesId(prefix: ResponsesIdPrefix): string {
  return `${prefix}_${randomBytes(24).toString('hex')}`;
}

type ItemStatus = 'in_progress' | 'completed' | 'incomplete';

export interface OutputTextPart {
  type: 'output_text';
  text: string;
  annotations: never[];
  logprobs: never[];
}
export interface ReasoningTextPart {
  type: 'reasoning_text';
  text: string;
}
export interface MessageOutputItem {
  type: 'message';
  id: string;
  status: ItemStatus;
  role: 'assistant';
  content: OutputTextPart[];
}
export interface FunctionCallOutputItem {
  type: 'function_call';
  id: string;
  call_id: string;
  name: string;
  arguments: string;
  status: ItemStatus;
}
export interface ReasoningOutputItem {
  type: 'reasoning';
  id: string;
  summary: never[];
  content: ReasoningTextPart[];
  status: ItemStatus;
}
export type OutputItem = MessageOutputItem | FunctionCallOutputItem | ReasoningOutputItem;

export type ResponseStatus = 'in_progress' | 'completed' | 'incomplete' | 'failed';
/** The subset of OpenAI's `ResponseErrorCode` that Shoal's failures map to. */
export type ResponseErrorCode = 'server_error' | 'rate_limit_exceeded' | 'invalid_prompt';

export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number; cache_write_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** The request settings a response object repeats back. */
export type ResponseEcho = ReturnType<typeof responseEcho>;

export interface ResponseBody extends ResponseEcho {
  id: string;
  object: 'response';
  /** Unix seconds. */
  created_at: number;
  status: ResponseStatus;
  /** Unix seconds; only for status `completed`. */
  completed_at: number | null;
  error: { code: ResponseErrorCode; message: string } | null;
  incomplete_details: { reason: 'max_output_tokens' } | null;
  output: OutputItem[];
  /** Absent until the response ends (the schema has no null usage). */
  usage?: ResponseUsage;
}

export interface StreamEvent {
  type: string;
  sequence_number: number;
  [field: string]: unknown;
}

export function responseEcho(request: CreateResponseRequest) {
  return {
    model: request.model,
    instructions: request.instructions ?? null,
    max_output_tokens: request.max_output_tokens ?? null,
    parallel_tool_calls: request.parallel_tool_calls ?? true,
    previous_response_id: request.previous_response_id ?? null,
    reasoning: { effort: request.reasoning?.effort ?? null, summary: null },
    store: request.store ?? true,
    temperature: request.temperature ?? 1,
    top_p: request.top_p ?? 1,
    text: { format: request.text?.format ?? { type: 'text' as const } },
    tool_choice: request.tool_choice ?? ('auto' as const),
    tools: (request.tools ?? []).map((tool) => ({
      type: 'function' as const,
      name: tool.name,
      description: tool.description ?? null,
      parameters: tool.parameters ?? null,
      // Calls are always constrained to the parameters schema, which is what strict promises.
      strict: tool.strict ?? true,
    })),
    truncation: 'disabled' as const,
    metadata: request.metadata ?? {},
    ...(request.user === undefined ? {} : { user: request.user }),
  };
}

export function responseUsage(usage: Usage): ResponseUsage {
  return {
    input_tokens: usage.promptTokens,
    // Part of input_tokens, as in OpenAI's usage. Nothing is "written" in OpenAI's sense: every
    // prompt lands in a slot's KV cache anyway, unasked and unbilled.
    input_tokens_details: { cached_tokens: usage.cachedPromptTokens ?? 0, cache_write_tokens: 0 },
    output_tokens: usage.completionTokens,
    // The engine reports one completion count; reasoning tokens are inside output_tokens, not split out.
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

/** The `error.code` of a failed response, derived from the family's one status mapping. */
export function responseErrorCode(error: ShoalError): ResponseErrorCode {
  const type = toOpenAIError(error).body.error.type;
  if (type === 'rate_limit_error') return 'rate_limit_exceeded';
  if (type === 'invalid_request_error') return 'invalid_prompt';
  return 'server_error';
}

export interface AssemblerOptions {
  id: string;
  /** Unix seconds. */
  createdAt: number;
  echo: ResponseEcho;
  newId?: (prefix: ResponsesIdPrefix) => string;
  /** Unix seconds, for `completed_at`. */
  now?: () => number;
}

export interface Finished {
  events: StreamEvent[];
  response: ResponseBody;
}

/**
 * Builds one response from a task's events (after `start`). Every method returns the stream events
 * it produced, numbered in order; callers that do not stream ignore them and keep the final response.
 */
export class ResponseAssembler {
  private sequence = 0;
  private readonly output: OutputItem[] = [];
  /** The item still being generated: always the last one in `output`. */
  private open: OutputItem | null = null;
  private readonly calls = new Map<number, FunctionCallOutputItem>();
  private readonly newId: (prefix: ResponsesIdPrefix) => string;
  private readonly now: () => number;

  constructor(private readonly options: AssemblerOptions) {
    this.newId = options.newId ?? responsesId;
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000));
  }

  /** `response.created` and `response.in_progress`. */
  begin(): StreamEvent[] {
    const response = this.snapshot('in_progress');
    return [this.event('response.created', { response }), this.event('response.in_progress', { response: this.snapshot('in_progress') })];
  }

  push(event: TaskEvent): StreamEvent[] {
    const events: StreamEvent[] = [];
    switch (event.type) {
      case 'text': {
        if (event.text === '') break;
        const item = this.message(events);
        item.content[0]!.text += event.text;
        events.push(this.event('response.output_text.delta', { item_id: item.id, output_index: this.index(), content_index: 0, delta: event.text, logprobs: [] }));
        break;
      }
      case 'reasoning': {
        if (event.text === '') break;
        const item = this.reasoning(events);
        item.content[0]!.text += event.text;
        events.push(this.event('response.reasoning_text.delta', { item_id: item.id, output_index: this.index(), content_index: 0, delta: event.text }));
        break;
      }
      case 'tool_call': {
        this.close(events, 'completed');
        const item: FunctionCallOutputItem = {
          type: 'function_call',
          id: this.newId('fc'),
          call_id: this.newId('call'),
          name: event.name,
          arguments: '',
          status: 'in_progress',
        };
        this.calls.set(event.index, item);
        this.add(events, item);
        break;
      }
      case 'tool_call_delta': {
        const item = this.calls.get(event.index);
        if (!item || item !== this.open) {
          throw new ShoalError('INTERNAL', `the runner sent arguments for tool call ${event.index}, which is not the call being generated`);
        }
        item.arguments += event.arguments;
        events.push(this.event('response.function_call_arguments.delta', { item_id: item.id, output_index: this.index(), delta: event.arguments }));
        break;
      }
      case 'queued':
      case 'start':
      case 'embeddings':
      case 'transcript':
      case 'end':
        throw new ShoalError('INTERNAL', `the runner sent an unexpected '${event.type}' event in the middle of a generation`);
      default:
        assertNever(event, 'task event');
    }
    return events;
  }

  /** Closes the output; `length` makes the response `incomplete` (max_output_tokens or a full context). */
  finish(finishReason: FinishReason, usage: Usage): Finished {
    const events: StreamEvent[] = [];
    const truncated = finishReason === 'length';
    // An answer that is nothing at all is still an (empty) assistant message, so clients find one.
    if (this.output.length === 0) this.message(events);
    this.close(events, truncated ? 'incomplete' : 'completed');
    const response = this.snapshot(truncated ? 'incomplete' : 'completed', {
      completed_at: truncated ? null : this.now(),
      incomplete_details: truncated ? { reason: 'max_output_tokens' } : null,
      usage: responseUsage(usage),
    });
    events.push(this.event(truncated ? 'response.incomplete' : 'response.completed', { response }));
    return { events, response };
  }

  /** The `response.failed` event for a generation that broke off; the item being generated stays incomplete. */
  fail(error: ShoalError): Finished {
    if (this.open) this.open.status = 'incomplete';
    this.open = null;
    const response = this.snapshot('failed', { error: { code: responseErrorCode(error), message: error.message } });
    return { events: [this.event('response.failed', { response })], response };
  }

  private event(type: string, fields: Record<string, unknown>): StreamEvent {
    return { type, sequence_number: this.sequence++, ...fields };
  }

  private index(): number {
    return this.output.length - 1;
  }

  private snapshot(status: ResponseStatus, end: Partial<Pick<ResponseBody, 'completed_at' | 'error' | 'incomplete_details' | 'usage'>> = {}): ResponseBody {
    const { echo } = this.options;
    return {
      id: this.options.id,
      object: 'response',
      created_at: this.options.createdAt,
      status,
      completed_at: end.completed_at ?? null,
      error: end.error ?? null,
      incomplete_details: end.incomplete_details ?? null,
      ...echo,
      output: structuredClone(this.output),
      ...(end.usage ? { usage: end.usage } : {}),
    };
  }

  private add(events: StreamEvent[], item: OutputItem): void {
    this.output.push(item);
    this.open = item;
    events.push(this.event('response.output_item.added', { output_index: this.index(), item: structuredClone(item) }));
  }

  private message(events: StreamEvent[]): MessageOutputItem {
    if (this.open?.type === 'message') return this.open;
    this.close(events, 'completed');
    const item: MessageOutputItem = { type: 'message', id: this.newId('msg'), status: 'in_progress', role: 'assistant', content: [] };
    this.add(events, item);
    const part: OutputTextPart = { type: 'output_text', text: '', annotations: [], logprobs: [] };
    item.content.push(part);
    events.push(this.event('response.content_part.added', { item_id: item.id, output_index: this.index(), content_index: 0, part: structuredClone(part) }));
    return item;
  }

  private reasoning(events: StreamEvent[]): ReasoningOutputItem {
    if (this.open?.type === 'reasoning') return this.open;
    this.close(events, 'completed');
    const item: ReasoningOutputItem = { type: 'reasoning', id: this.newId('rs'), summary: [], content: [], status: 'in_progress' };
    this.add(events, item);
    const part: ReasoningTextPart = { type: 'reasoning_text', text: '' };
    item.content.push(part);
    events.push(this.event('response.content_part.added', { item_id: item.id, output_index: this.index(), content_index: 0, part: structuredClone(part) }));
    return item;
  }

  /** Emits the `done` events of the item being generated, if any. */
  private close(events: StreamEvent[], status: ItemStatus): void {
    const item = this.open;
    if (!item) return;
    this.open = null;
    const where = { item_id: item.id, output_index: this.index() };
    switch (item.type) {
      case 'message': {
        const part = item.content[0]!;
        events.push(this.event('response.output_text.done', { ...where, content_index: 0, text: part.text, logprobs: [] }));
        events.push(this.event('response.content_part.done', { ...where, content_index: 0, part: structuredClone(part) }));
        break;
      }
      case 'reasoning': {
        const part = item.content[0]!;
        events.push(this.event('response.reasoning_text.done', { ...where, content_index: 0, text: part.text }));
        events.push(this.event('response.content_part.done', { ...where, content_index: 0, part: structuredClone(part) }));
        break;
      }
      case 'function_call':
        events.push(this.event('response.function_call_arguments.done', { ...where, name: item.name, arguments: item.arguments }));
        break;
    }
    item.status = status;
    events.push(this.event('response.output_item.done', { output_index: this.index(), item: structuredClone(item) }));
  }
}

/** `DELETE /v1/responses/{id}` (OpenAI documents the body by example only). */
export function deletedResponseBody(id: string) {
  return { id, object: 'response' as const, deleted: true as const };
}
