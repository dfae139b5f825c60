import type { ChatMessage, InferenceTask } from '../../wire/task.js';
import { generateTask } from '../task-builder.js';
import type { ChatCompletionMessage, ChatCompletionRequest, CompletionRequest } from './schemas.js';

/** OpenAI's documented default for /v1/completions when `max_tokens` is absent. */
export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

function contentText(content: ChatCompletionMessage['content']): string {
  if (content === null) return '';
  if (typeof content === 'string') return content;
  return content.map((part) => part.text).join('');
}

function toMessage(message: ChatCompletionMessage): ChatMessage {
  // `developer` is OpenAI's newer name for the system role.
  const role = message.role === 'developer' ? 'system' : message.role;
  return { role, content: contentText(message.content) };
}

function stopList(stop: ChatCompletionRequest['stop']): string[] {
  if (stop === null || stop === undefined) return [];
  return typeof stop === 'string' ? [stop] : stop;
}

export function chatRequestToTask(request: ChatCompletionRequest): InferenceTask {
  return generateTask({
    model: request.model,
    prompt: { kind: 'chat', messages: request.messages.map(toMessage) },
    sampling: {
      maxTokens: request.max_completion_tokens ?? request.max_tokens ?? null,
      temperature: request.temperature ?? 1,
      topP: request.top_p ?? 1,
      seed: request.seed ?? null,
    },
    stop: stopList(request.stop),
  });
}

export function completionRequestToTask(request: CompletionRequest): InferenceTask {
  const text = typeof request.prompt === 'string' ? request.prompt : request.prompt[0]!;
  return generateTask({
    model: request.model,
    prompt: { kind: 'text', text },
    sampling: {
      maxTokens: request.max_tokens ?? COMPLETIONS_DEFAULT_MAX_TOKENS,
      temperature: request.temperature ?? 1,
      topP: request.top_p ?? 1,
      seed: request.seed ?? null,
    },
    stop: stopList(request.stop),
  });
}
