// What Shoal says to a managed llama-server and how its answers become TaskEvents. Pure: tasks in,
// JSON bodies out; parsed stream chunks in, events out. The HTTP and the process live in
// llama-server.ts.
//
// Semantics follow the `llama_cpp` engine (src/worker/runner/llama-cpp-engine.ts), so a request
// answers the same on either engine: OpenAI-style sampling (no top-k, no min-p), a token limit
// clamped to what is left of the context, stop sequences reported by which one matched, log
// probabilities for the chosen token plus `top` alternatives. Tools: when the model's chat template
// renders tools, llama-server does it natively (its template, its parser, its lazy grammar);
// otherwise Shoal's own convention is used, exactly as the llama_cpp engine does (instructions in
// the system message, `<tool_call>` JSON parsed by OutputParser, a JSON-schema grammar when a call is
// required).

import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { ShoalError, type ErrorCode } from '../../common/errors.js';
import type { ChatMessage, CountTask, FinishReason, InferenceTask, TaskEvent, TaskImage, TokenLogprob, ToolChoice, ToolDefinition, Usage } from '../../wire/task.js';
import { toolCallSchema } from '../runner/grammar-schema.js';
import { OutputParser, TOOL_CALL_CLOSE, type ParsedEvent, type ToolMode } from '../runner/output-parser.js';
import { toChatHistory } from '../runner/prompt.js';

/** How one generate task's tools are served. */
export interface ToolPlan {
  mode: ToolMode;
  /** llama-server renders and parses the tools itself (the template supports them). */
  native: boolean;
}

export function toolPlan(task: Pick<InferenceTask, 'prompt' | 'tools' | 'toolChoice'>, templateSupportsTools: boolean): ToolPlan {
  const active = task.tools.length > 0 && task.toolChoice.mode !== 'none';
  if (!active) return { mode: 'off', native: false };
  const mode: ToolMode = task.toolChoice.mode === 'auto' ? 'lazy' : 'forced';
  return { mode, native: task.prompt.kind === 'chat' && templateSupportsTools };
}

// ---------------------------------------------------------------------------------------------
// Request bodies

type OaiMessage = Record<string, unknown>;

/** An image as an OpenAI content part: llama-server takes data URLs (and decodes them with its own image loader). */
function imagePart(image: TaskImage): Record<string, unknown> {
  return { type: 'image_url', image_url: { url: `data:${image.mediaType};base64,${image.data}` } };
}

/**
 * A user turn's content: the plain string without images (what every template expects), else the
 * images then the text as content parts; llama-server puts a media marker where each image was.
 */
function userContent(text: string, images: readonly TaskImage[] | undefined): string | Array<Record<string, unknown>> {
  if (images === undefined || images.length === 0) return text;
  return [...images.map(imagePart), { type: 'text', text }];
}

/**
 * Where each user message's images go in toChatHistory's turns, by turn index. A user message is
 * always a turn of its own (only tool results merge into the turn before), so its turn is the last
 * but one of the history of the messages up to it (the last is the opened reply).
 */
function historyImages(messages: readonly ChatMessage[], tools: readonly ToolDefinition[], choice: ToolChoice): Map<number, TaskImage[]> {
  const out = new Map<number, TaskImage[]>();
  messages.forEach((message, i) => {
    if (message.role !== 'user' || message.images === undefined || message.images.length === 0) return;
    out.set(toChatHistory(messages.slice(0, i + 1), tools, choice).length - 2, message.images);
  });
  return out;
}

/** Messages for llama-server's chat endpoint, with the tools its template renders (native) or ours. */
export function chatMessages(messages: readonly ChatMessage[], tools: readonly ToolDefinition[], choice: ToolChoice, native: boolean): OaiMessage[] {
  if (native || tools.length === 0 || choice.mode === 'none') {
    return messages.map((message): OaiMessage => {
      switch (message.role) {
        case 'system':
          return { role: message.role, content: message.content };
        case 'user':
          return { role: message.role, content: userContent(message.content, message.images) };
        case 'assistant':
          return {
            role: 'assistant',
            content: message.content,
            ...(message.reasoning !== undefined ? { reasoning_content: message.reasoning } : {}),
            ...(message.toolCalls && message.toolCalls.length > 0
              ? { tool_calls: message.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } })) }
              : {}),
          };
        case 'tool':
          return { role: 'tool', tool_call_id: message.toolCallId, ...(message.name !== undefined ? { name: message.name } : {}), content: message.content };
      }
    });
  }
  // Shoal's convention, rendered by the same code the llama_cpp engine uses, then handed to the
  // template as plain turns.
  const history = toChatHistory(messages, tools, choice);
  const images = historyImages(messages, tools, choice);
  const last = history.at(-1);
  // toChatHistory ends with an empty model turn to open the reply; llama-server opens it itself.
  if (last?.type === 'model' && last.response.length === 0) history.pop();
  return history.map((item, index): OaiMessage => {
    switch (item.type) {
      case 'system':
        return { role: 'system', content: typeof item.text === 'string' ? item.text : String(item.text) };
      case 'user':
        return { role: 'user', content: userContent(item.text, images.get(index)) };
      case 'model':
        return { role: 'assistant', content: item.response.filter((part): part is string => typeof part === 'string').join('') };
    }
  });
}

function oaiTools(tools: readonly ToolDefinition[]): Array<Record<string, unknown>> {
  return tools.map((tool) => ({
    type: 'function',
    function: { name: tool.name, ...(tool.description !== undefined ? { description: tool.description } : {}), parameters: tool.parameters },
  }));
}

/**
 * Sampling as the llama_cpp engine does it: OpenAI semantics, with top-k, min-p and the repetition
 * penalty off unless the task sets them (the server's own defaults, 40 / 0.05 / 1.0, would change
 * sampling), and a random seed when none is given.
 */
function samplingFields(task: InferenceTask): Record<string, unknown> {
  const { temperature, topP, seed, presencePenalty, frequencyPenalty, topK, minP, repeatPenalty, repeatLastN } = task.sampling;
  return {
    temperature,
    top_p: temperature > 0 ? topP : 1,
    top_k: topK ?? 0,
    min_p: minP ?? 0,
    seed: seed ?? randomBytes(4).readUInt32LE(0),
    presence_penalty: presencePenalty,
    frequency_penalty: frequencyPenalty,
    repeat_penalty: repeatPenalty ?? 1,
    ...(repeatLastN !== undefined ? { repeat_last_n: repeatLastN } : {}),
  };
}

/** Stop strings sent to the server: the task's, plus the end of a call when Shoal parses calls lazily. */
export function serverStops(task: InferenceTask, plan: ToolPlan): string[] {
  const stops = [...task.stop];
  if (plan.mode === 'lazy' && !plan.native && !stops.includes(TOOL_CALL_CLOSE)) stops.push(TOOL_CALL_CLOSE);
  return stops;
}

/** The alternatives to ask for: at least 1, or the server sends no probabilities at all. */
function probsWanted(task: InferenceTask): number {
  return task.logprobs === null ? 0 : Math.max(1, task.logprobs.top);
}

export function chatRequestBody(task: InferenceTask & { prompt: { kind: 'chat' } }, plan: ToolPlan, nPredict: number): Record<string, unknown> {
  const stops = serverStops(task, plan);
  const body: Record<string, unknown> = {
    messages: chatMessages(task.prompt.messages, task.tools, task.toolChoice, plan.native),
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: nPredict,
    cache_prompt: true,
    ...samplingFields(task),
  };
  if (stops.length > 0) {
    body.stop = stops;
    // The OpenAI-shaped stream does not say which stop matched; the verbose block of the final
    // chunk does (`stopping_word`).
    body.verbose = true;
  }
  if (plan.native) {
    // A named tool is offered alone and required: llama-server knows no named tool_choice.
    const offered = task.toolChoice.mode === 'tool' ? task.tools.filter((t) => t.name === (task.toolChoice as { name: string }).name) : task.tools;
    if (offered.length === 0) throw namedToolMissing(task.toolChoice);
    body.tools = oaiTools(offered);
    body.tool_choice = task.toolChoice.mode === 'auto' ? 'auto' : 'required';
    body.parallel_tool_calls = false;
  } else if (plan.mode === 'forced') {
    body.response_format = { type: 'json_schema', json_schema: { name: 'tool_call', schema: toolCallSchema(task.tools, task.toolChoice) } };
  }
  if (plan.mode !== 'forced' || plan.native) {
    // `json_object` without a schema constrains nothing in llama-server (an empty schema reads as
    // none), so the object is spelled out.
    if (task.format.kind === 'json') body.response_format = { type: 'json_schema', json_schema: { name: 'response', schema: { type: 'object' } } };
    else if (task.format.kind === 'json_schema') body.response_format = { type: 'json_schema', json_schema: { name: 'response', schema: task.format.schema } };
  }
  const probs = probsWanted(task);
  if (probs > 0) {
    body.logprobs = true;
    body.top_logprobs = probs;
  }
  return body;
}

/** A text prompt with images in llama-server's multimodal form: one media marker per image, before the text. */
export interface MultimodalPrompt {
  prompt_string: string;
  /** The images' bytes, base64, in marker order. */
  multimodal_data: string[];
}

/**
 * `marker` is the server's media marker (`/props` media_marker, random per process, so user text
 * cannot spell it by accident). The server tokenizes `prompt_string` with special-token parsing on:
 * the runner makes sure the text spells no control token first (llama-server.ts).
 */
export function multimodalPrompt(text: string, images: readonly TaskImage[], marker: string): MultimodalPrompt {
  return { prompt_string: marker.repeat(images.length) + text, multimodal_data: images.map((image) => image.data) };
}

/**
 * `prompt`: token ids, or a text prompt with images (multimodalPrompt), which only the server can
 * tokenize around its media markers.
 */
export function completionRequestBody(task: InferenceTask, plan: ToolPlan, prompt: readonly number[] | MultimodalPrompt, nPredict: number): Record<string, unknown> {
  const stops = serverStops(task, plan);
  const body: Record<string, unknown> = {
    // Token ids, tokenized by Shoal with special-token parsing off: user text that spells a control
    // token stays text, as in the llama_cpp engine.
    prompt,
    stream: true,
    n_predict: nPredict,
    cache_prompt: true,
    ...samplingFields(task),
  };
  if (stops.length > 0) body.stop = stops;
  if (plan.mode === 'forced') body.json_schema = toolCallSchema(task.tools, task.toolChoice);
  else if (task.format.kind === 'json') body.json_schema = { type: 'object' };
  else if (task.format.kind === 'json_schema') body.json_schema = task.format.schema;
  const probs = probsWanted(task);
  if (probs > 0) body.n_probs = probs;
  return body;
}

/** The body for `/v1/chat/completions/input_tokens`: the same rendering the generation would use. */
export function chatCountBody(
  prompt: { kind: 'chat'; messages: ChatMessage[] },
  tools: readonly ToolDefinition[],
  choice: ToolChoice,
  templateSupportsTools: boolean,
): Record<string, unknown> {
  const active = tools.length > 0 && choice.mode !== 'none';
  const native = active && templateSupportsTools;
  const body: Record<string, unknown> = { messages: chatMessages(prompt.messages, tools, choice, native) };
  if (native) {
    const offered = choice.mode === 'tool' ? tools.filter((t) => t.name === choice.name) : tools;
    body.tools = oaiTools(offered);
  }
  return body;
}

export function countTaskChoice(task: CountTask): ToolChoice {
  return { mode: task.tools.length > 0 ? 'auto' : 'none' };
}

function namedToolMissing(choice: ToolChoice): ShoalError {
  return new ShoalError('BAD_REQUEST', `tool_choice names '${choice.mode === 'tool' ? choice.name : ''}', which is not among the tools`, { param: 'tool_choice' });
}

// ---------------------------------------------------------------------------------------------
// Server-sent events

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const DATA = Buffer.from('data');

/**
 * Splits a text/event-stream into the `data:` payloads of its events, straight from the socket's
 * bytes: lines are found as bytes (a UTF-8 character never contains LF, so a chunk split inside one
 * is safe) and only payloads are decoded, one string each.
 */
export class SseDecoder {
  /** The bytes after the last LF, until the line's end arrives. */
  private rest: Buffer | null = null;
  private data: string[] = [];

  push(chunk: Buffer): string[] {
    const buffer = this.rest === null ? chunk : Buffer.concat([this.rest, chunk]);
    const out: string[] = [];
    let start = 0;
    for (let newline = buffer.indexOf(LF, start); newline >= 0; newline = buffer.indexOf(LF, start)) {
      this.line(buffer, start, newline, out);
      start = newline + 1;
    }
    this.rest = start < buffer.length ? buffer.subarray(start) : null;
    return out;
  }

  /** The stream ended: an event without its blank line still counts. */
  flush(): string[] {
    const out: string[] = [];
    if (this.rest !== null) this.line(this.rest, 0, this.rest.length, out);
    this.rest = null;
    this.line(Buffer.alloc(0), 0, 0, out);
    return out;
  }

  private line(buffer: Buffer, start: number, end: number, out: string[]): void {
    if (end > start && buffer[end - 1] === CR) end -= 1;
    if (end === start) {
      if (this.data.length > 0) out.push(this.data.length === 1 ? this.data[0]! : this.data.join('\n'));
      this.data = [];
      return;
    }
    if (buffer[start] === COLON) return; // a comment (llama-server's keep-alive ping)
    // Only `data` matters here; other fields (event, id, retry) are skipped.
    const fieldEnd = start + DATA.length;
    if (fieldEnd > end || buffer.compare(DATA, 0, DATA.length, start, fieldEnd) !== 0) return;
    if (fieldEnd === end) {
      this.data.push('');
      return;
    }
    if (buffer[fieldEnd] !== COLON) return;
    const valueStart = buffer[fieldEnd + 1] === SPACE ? fieldEnd + 2 : fieldEnd + 1;
    this.data.push(buffer.toString('utf8', Math.min(valueStart, end), end));
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

const ServerErrorBody = z.object({
  error: z.object({ message: z.string().optional(), type: z.string().optional(), code: z.number().optional() }).loose(),
});

const ERROR_TYPES: Record<string, ErrorCode> = {
  invalid_request_error: 'BAD_REQUEST',
  exceed_context_size_error: 'CONTEXT_OVERFLOW',
  not_supported_error: 'CAPABILITY_MISSING',
  unavailable_error: 'MODEL_LOADING',
};

/** A llama-server error response (or an `error` event mid-stream) as a ShoalError. */
export function serverError(status: number | null, body: unknown): ShoalError {
  const parsed = ServerErrorBody.safeParse(body);
  const message = parsed.success ? (parsed.data.error.message ?? 'no message') : typeof body === 'string' ? body.slice(0, 500) : JSON.stringify(body)?.slice(0, 500);
  const type = parsed.success ? parsed.data.error.type : undefined;
  const code: ErrorCode = (type !== undefined ? ERROR_TYPES[type] : undefined) ?? (status === 503 ? 'MODEL_LOADING' : status !== null && status >= 400 && status < 500 ? 'BAD_REQUEST' : 'INTERNAL');
  const param = code === 'BAD_REQUEST' && /schema|grammar/i.test(message) ? 'schema' : null;
  return new ShoalError(code, `llama-server refused the request${status !== null ? ` (HTTP ${status})` : ''}: ${message}`, { param });
}

const ContextExceeded = z.object({ error: z.object({ type: z.literal('exceed_context_size_error'), n_prompt_tokens: z.number().int(), n_ctx: z.number().int() }).loose() });

/** The sizes in llama-server's refusal of a prompt that does not fit its slot; null for any other answer. */
export function contextExceeded(body: unknown): { promptTokens: number; contextTokens: number } | null {
  const parsed = ContextExceeded.safeParse(body);
  return parsed.success ? { promptTokens: parsed.data.error.n_prompt_tokens, contextTokens: parsed.data.error.n_ctx } : null;
}

const PromptProgress = z.object({ prompt_progress: z.object({ total: z.number().int().nonnegative() }).loose() });

/**
 * The prompt's token count from a stream chunk of a request sent with `return_progress`: the
 * server's first chunk reports prompt progress, before any generated text. Null for other chunks.
 */
export function promptProgressTotal(chunk: unknown): number | null {
  const parsed = PromptProgress.safeParse(chunk);
  return parsed.success ? parsed.data.prompt_progress.total : null;
}

// ---------------------------------------------------------------------------------------------
// Stream translation

const Probability = z.object({ token: z.string(), logprob: z.number(), bytes: z.array(z.number().int()).optional() });
const TokenProbabilities = z.array(Probability.extend({ top_logprobs: z.array(Probability).optional() }));

const CompletionChunk = z.object({
  content: z.string().optional(),
  stop: z.boolean().optional(),
  stop_type: z.string().optional(),
  stopping_word: z.string().optional(),
  tokens_predicted: z.number().int().optional(),
  tokens_evaluated: z.number().int().optional(),
  completion_probabilities: TokenProbabilities.optional(),
  timings: z.object({ cache_n: z.number().int().nonnegative().optional() }).loose().optional(),
  error: z.unknown().optional(),
});

const ToolCallDelta = z.object({
  index: z.number().int().nonnegative().optional(),
  id: z.string().optional(),
  function: z.object({ name: z.string().optional(), arguments: z.string().optional() }).optional(),
});

const ChatChunk = z.object({
  choices: z
    .array(
      z.object({
        delta: z
          .object({
            content: z.string().nullable().optional(),
            reasoning_content: z.string().nullable().optional(),
            tool_calls: z.array(ToolCallDelta).optional(),
          })
          .optional(),
        finish_reason: z.string().nullable().optional(),
        logprobs: z.object({ content: TokenProbabilities.nullable().optional() }).nullable().optional(),
      }),
    )
    .optional(),
  usage: z
    .object({
      prompt_tokens: z.number().int(),
      completion_tokens: z.number().int(),
      prompt_tokens_details: z.object({ cached_tokens: z.number().int().nonnegative().optional() }).loose().optional(),
    })
    .optional(),
  timings: z.object({ cache_n: z.number().int().nonnegative().optional() }).loose().optional(),
  __verbose: z.object({ stop_type: z.string().optional(), stopping_word: z.string().optional() }).optional(),
  error: z.unknown().optional(),
});

export interface TranslatorOptions {
  plan: ToolPlan;
  /** The task's own stop sequences: only these are reported as the matched stop. */
  userStops: readonly string[];
  /** Alternatives per token when log probabilities were asked for; null when not. */
  logprobsTop: number | null;
  /** The prompt's token count, for usage when the server does not report it. */
  promptTokens: number;
  /**
   * The chat request asked for the verbose block (it had stop strings), so the final chunk says how
   * generation stopped; without it, a chat that stopped did so at end-of-text.
   */
  verbose?: boolean;
  newCallId?: () => string;
}

function toTokenLogprob(entry: z.infer<typeof TokenProbabilities>[number], top: number): TokenLogprob {
  const bytes = (p: z.infer<typeof Probability>): number[] => p.bytes ?? [...Buffer.from(p.token, 'utf8')];
  return {
    token: entry.token,
    logprob: entry.logprob,
    bytes: bytes(entry),
    top: (entry.top_logprobs ?? []).slice(0, top).map((p) => ({ token: p.token, logprob: p.logprob, bytes: bytes(p) })),
  };
}

/**
 * Turns llama-server's stream, `/completion` chunks or `/v1/chat/completions` chunks, into TaskEvents
 * (without `start`, which the runner sends once it knows the prompt's size) and builds the `end`.
 */
export class StreamTranslator {
  private readonly parser: OutputParser | null;
  private pendingLogprobs: TokenLogprob[] = [];
  private serverFinish: string | null = null;
  private stopType: string | null = null;
  private stoppingWord: string | null = null;
  private usage: Usage | null = null;
  private nativeCalls = new Map<number, { id: string; name: string }>();
  private finished = false;

  constructor(private readonly options: TranslatorOptions) {
    // Shoal parses the raw text (reasoning tags, its own tool calls) unless the server already did.
    this.parser = options.plan.native
      ? null
      : new OutputParser({ startInReasoning: false, toolMode: options.plan.mode, newCallId: options.newCallId ?? newCallId });
  }

  /** True once the server sent its final chunk. */
  get done(): boolean {
    return this.finished;
  }

  completionChunk(raw: unknown): TaskEvent[] {
    const chunk = CompletionChunk.parse(raw);
    if (chunk.error !== undefined) throw serverError(null, raw);
    const events = this.text(chunk.content ?? '', chunk.completion_probabilities);
    if (chunk.stop) {
      this.finished = true;
      this.stopType = chunk.stop_type ?? null;
      this.stoppingWord = chunk.stopping_word ?? null;
      this.serverFinish = chunk.stop_type === 'limit' ? 'length' : 'stop';
      this.usage = withCached(
        { promptTokens: chunk.tokens_evaluated ?? this.options.promptTokens, completionTokens: chunk.tokens_predicted ?? 0 },
        chunk.timings?.cache_n,
      );
    }
    return events;
  }

  chatChunk(raw: unknown): TaskEvent[] {
    const chunk = ChatChunk.parse(raw);
    if (chunk.error !== undefined) throw serverError(null, raw);
    const events: TaskEvent[] = [];
    if (chunk.__verbose) {
      this.stopType = chunk.__verbose.stop_type ?? null;
      this.stoppingWord = chunk.__verbose.stopping_word ?? null;
    }
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta;
      if (delta?.reasoning_content) events.push({ type: 'reasoning', text: delta.reasoning_content });
      events.push(...this.text(delta?.content ?? '', choice.logprobs?.content ?? undefined));
      for (const call of delta?.tool_calls ?? []) events.push(...this.nativeCall(call));
      if (choice.finish_reason) this.serverFinish = choice.finish_reason;
    }
    if (chunk.usage) {
      this.usage = withCached(
        { promptTokens: chunk.usage.prompt_tokens, completionTokens: chunk.usage.completion_tokens },
        chunk.usage.prompt_tokens_details?.cached_tokens ?? chunk.timings?.cache_n,
      );
      this.finished = true;
    }
    return events;
  }

  private nativeCall(call: z.infer<typeof ToolCallDelta>): TaskEvent[] {
    const index = call.index ?? 0;
    const events: TaskEvent[] = [];
    if (!this.nativeCalls.has(index)) {
      const name = call.function?.name;
      if (!name) return events; // arguments before a name: nothing to attach them to
      const id = call.id && call.id !== '' ? call.id : (this.options.newCallId ?? newCallId)();
      this.nativeCalls.set(index, { id, name });
      events.push({ type: 'tool_call', index, id, name });
    }
    const args = call.function?.arguments;
    if (args) events.push({ type: 'tool_call_delta', index, arguments: args });
    return events;
  }

  private text(text: string, probabilities: z.infer<typeof TokenProbabilities> | undefined): TaskEvent[] {
    if (probabilities && this.options.logprobsTop !== null) {
      const top = this.options.logprobsTop;
      this.pendingLogprobs.push(...probabilities.map((entry) => toTokenLogprob(entry, top)));
    }
    if (text === '') return [];
    return this.forward(this.parser ? this.parser.push(text) : [{ type: 'text', text }]);
  }

  /** Attaches held log probabilities to the first answer text, as the llama_cpp engine does. */
  private forward(parsed: ParsedEvent[]): TaskEvent[] {
    return parsed.map((event): TaskEvent => {
      if (event.type === 'text' && this.pendingLogprobs.length > 0) {
        const logprobs = this.pendingLogprobs;
        this.pendingLogprobs = [];
        return { type: 'text', text: event.text, logprobs };
      }
      return event;
    });
  }

  /** Releases what the parser held back and builds the `end` event. */
  finish(): TaskEvent[] {
    const events = this.parser ? this.forward(this.parser.finish()) : [];
    const calls = this.parser ? this.parser.toolCalls : this.nativeCalls.size;
    let finishReason: FinishReason;
    if (this.serverFinish === 'length') finishReason = 'length';
    else if (calls > 0 || this.serverFinish === 'tool_calls') finishReason = 'tool_calls';
    else finishReason = 'stop';
    const word = this.stopType === 'word' ? this.stoppingWord : null;
    const stopSequence = word !== null && this.options.userStops.includes(word) ? word : null;
    const usage = this.usage ?? { promptTokens: this.options.promptTokens, completionTokens: 0 };
    // llama-server counts the end-of-text token it sampled; the llama_cpp engine does not, and the
    // same request must report the same usage on either engine.
    const endOfText = this.stopType !== null ? this.stopType === 'eos' : this.serverFinish !== 'length' && !this.options.verbose;
    if (endOfText && usage.completionTokens > 0) usage.completionTokens -= 1;
    events.push({ type: 'end', finishReason, stopSequence, usage });
    return events;
  }
}

/**
 * The prompt tokens llama-server took from the slot's cache (`n_prompt_cached`: the final chunk's
 * `timings.cache_n` on `/completion`, `usage.prompt_tokens_details.cached_tokens` on chat), absent
 * when none were, as the llama_cpp engine reports it. Clamped to the prompt: a count the server
 * made of some other prompt must not claim more than this one holds.
 */
function withCached(usage: Usage, cached: number | undefined): Usage {
  const count = Math.min(cached ?? 0, usage.promptTokens);
  return count > 0 ? { ...usage, cachedPromptTokens: count } : usage;
}

function newCallId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}
