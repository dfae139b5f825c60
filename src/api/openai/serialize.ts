import { randomBytes } from 'node:crypto';
import type { FinishReason, TokenLogprob, Usage } from '../../wire/task.js';
import type { CollectedAnswer } from '../collect.js';

/** Builders for OpenAI response bodies. Pure apart from id generation, which callers do once. */

export function openAIId(prefix: 'chatcmpl' | 'cmpl'): string {
  return `${prefix}-${randomBytes(12).toString('hex')}`;
}

export interface ResponseMeta {
  id: string;
  model: string;
  /** Unix seconds. */
  created: number;
}

export interface OpenAIUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** `cached_tokens` is part of `prompt_tokens`, as in OpenAI's usage; 0 when the engine reused nothing. */
  prompt_tokens_details: { cached_tokens: number };
}

export function toOpenAIUsage(usage: Usage): OpenAIUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedPromptTokens ?? 0 },
  };
}

function chatLogprobs(entries: TokenLogprob[]) {
  return {
    content: entries.map((e) => ({
      token: e.token,
      logprob: e.logprob,
      bytes: e.bytes,
      top_logprobs: e.top.map((t) => ({ token: t.token, logprob: t.logprob, bytes: t.bytes })),
    })),
    refusal: null,
  };
}

export function chatCompletionBody(meta: ResponseMeta, answer: CollectedAnswer) {
  const calls = answer.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } }));
  return {
    id: meta.id,
    object: 'chat.completion' as const,
    created: meta.created,
    model: meta.model,
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant' as const,
          // OpenAI sends null content for a reply that is only tool calls.
          content: calls.length > 0 && answer.text === '' ? null : answer.text,
          refusal: null,
          ...(calls.length > 0 ? { tool_calls: calls } : {}),
          ...(answer.reasoning !== '' ? { reasoning_content: answer.reasoning } : {}),
        },
        logprobs: answer.logprobs ? chatLogprobs(answer.logprobs) : null,
        finish_reason: answer.finishReason,
      },
    ],
    usage: toOpenAIUsage(answer.usage),
  };
}

export interface ChunkDelta {
  role?: 'assistant';
  content?: string;
  reasoning_content?: string;
  tool_calls?: { index: number; id?: string; type?: 'function'; function: { name?: string; arguments: string } }[];
}

/** One `chat.completion.chunk`. With `include_usage`, every chunk but the last carries `usage: null`. */
export function chatChunkBody(
  meta: ResponseMeta,
  delta: ChunkDelta,
  finishReason: FinishReason | null,
  includeUsage: boolean,
  logprobs?: TokenLogprob[],
) {
  return {
    id: meta.id,
    object: 'chat.completion.chunk' as const,
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, delta, logprobs: logprobs ? chatLogprobs(logprobs) : null, finish_reason: finishReason }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

export function chatUsageChunkBody(meta: ResponseMeta, usage: Usage) {
  return {
    id: meta.id,
    object: 'chat.completion.chunk' as const,
    created: meta.created,
    model: meta.model,
    choices: [],
    usage: toOpenAIUsage(usage),
  };
}

/** The legacy completions log-probability shape: parallel arrays, one entry per token. */
export function completionLogprobs(entries: TokenLogprob[], textOffset: number) {
  const offsets: number[] = [];
  let at = textOffset;
  for (const e of entries) {
    offsets.push(at);
    at += e.token.length;
  }
  return {
    tokens: entries.map((e) => e.token),
    token_logprobs: entries.map((e) => e.logprob),
    top_logprobs: entries.map((e) => Object.fromEntries(e.top.map((t) => [t.token, t.logprob]))),
    text_offset: offsets,
  };
}

export function completionBody(
  meta: ResponseMeta,
  text: string,
  finishReason: FinishReason | null,
  usage: Usage | null,
  logprobs: ReturnType<typeof completionLogprobs> | null = null,
) {
  return {
    id: meta.id,
    object: 'text_completion' as const,
    created: meta.created,
    model: meta.model,
    // Legacy completions have no tool calls; a grammar-free text answer only ends by stop or length.
    choices: [{ index: 0, text, logprobs, finish_reason: finishReason === 'tool_calls' ? 'stop' : finishReason }],
    ...(usage ? { usage: toOpenAIUsage(usage) } : {}),
  };
}

export function modelBody(id: string, created: number) {
  return { id, object: 'model' as const, created, owned_by: 'shoal' };
}

/** OpenAI's base64 embeddings are the float32 little-endian bytes of the vector. */
export function embeddingBase64(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, i) => bytes.writeFloatLE(value, i * 4));
  return bytes.toString('base64');
}

export function embeddingsBody(model: string, vectors: number[][], encoding: 'float' | 'base64', promptTokens: number) {
  return {
    object: 'list' as const,
    data: vectors.map((vector, index) => ({ object: 'embedding' as const, index, embedding: encoding === 'base64' ? embeddingBase64(vector) : vector })),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}
