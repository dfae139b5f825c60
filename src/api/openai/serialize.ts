import { randomBytes } from 'node:crypto';
import type { FinishReason, Usage } from '../../wire/task.js';

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
}

export function toOpenAIUsage(usage: Usage): OpenAIUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

export function chatCompletionBody(meta: ResponseMeta, text: string, finishReason: FinishReason, usage: Usage) {
  return {
    id: meta.id,
    object: 'chat.completion' as const,
    created: meta.created,
    model: meta.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant' as const, content: text, refusal: null },
        logprobs: null,
        finish_reason: finishReason,
      },
    ],
    usage: toOpenAIUsage(usage),
  };
}

export interface ChunkDelta {
  role?: 'assistant';
  content?: string;
}

/** One `chat.completion.chunk`. With `include_usage`, every chunk but the last carries `usage: null`. */
export function chatChunkBody(
  meta: ResponseMeta,
  delta: ChunkDelta,
  finishReason: FinishReason | null,
  includeUsage: boolean,
) {
  return {
    id: meta.id,
    object: 'chat.completion.chunk' as const,
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
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

export function completionBody(meta: ResponseMeta, text: string, finishReason: FinishReason | null, usage: Usage | null) {
  return {
    id: meta.id,
    object: 'text_completion' as const,
    created: meta.created,
    model: meta.model,
    choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason }],
    ...(usage ? { usage: toOpenAIUsage(usage) } : {}),
  };
}

export function modelBody(id: string, created: number) {
  return { id, object: 'model' as const, created, owned_by: 'shoal' };
}
