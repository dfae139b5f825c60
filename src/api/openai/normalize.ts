import type { ChatMessage, EmbeddingTask, InferenceTask, OutputFormat, TaskImage, ToolChoice, ToolDefinition } from '../../wire/task.js';
import { ShoalError } from '../../common/errors.js';
import { ImageIntake } from '../images.js';
import { generateTask } from '../task-builder.js';
import type { ChatCompletionMessage, ChatCompletionRequest, CompletionRequest, EmbeddingRequest, UserContentPart } from './schemas.js';

/** OpenAI's documented default for /v1/completions when `max_tokens` is absent. */
export const COMPLETIONS_DEFAULT_MAX_TOKENS = 16;

function contentText(content: string | { text: string }[] | null | undefined): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  return content.map((part) => part.text).join('');
}

/** A user message: its text parts joined, its images (in order) before them, as the task puts them. */
function userMessage(content: UserContentPart[], index: number, images: ImageIntake): ChatMessage {
  const taken: TaskImage[] = [];
  const text: string[] = [];
  content.forEach((part, partIndex) => {
    if (part.type === 'text') text.push(part.text);
    else taken.push(images.url(part.image_url.url, `messages[${index}].content[${partIndex}].image_url.url`));
  });
  return { role: 'user', content: text.join(''), ...(taken.length > 0 ? { images: taken } : {}) };
}

function toMessage(message: ChatCompletionMessage, index: number, images: ImageIntake): ChatMessage {
  switch (message.role) {
    // `developer` is OpenAI's newer name for the system role.
    case 'system':
    case 'developer':
      return { role: 'system', content: contentText(message.content) };
    case 'user':
      return userMessage(message.content, index, images);
    case 'assistant':
      return {
        role: 'assistant',
        content: contentText(message.content),
        ...(message.reasoning_content ? { reasoning: message.reasoning_content } : {}),
        ...(message.tool_calls ? { toolCalls: message.tool_calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })) } : {}),
      };
    case 'tool':
      return { role: 'tool', toolCallId: message.tool_call_id, content: contentText(message.content) };
  }
}

function messages(list: readonly ChatCompletionMessage[]): ChatMessage[] {
  const images = new ImageIntake();
  return list.map((message, index) => toMessage(message, index, images));
}

function stopList(stop: ChatCompletionRequest['stop']): string[] {
  if (stop === null || stop === undefined) return [];
  return typeof stop === 'string' ? [stop] : stop;
}

function tools(request: ChatCompletionRequest): ToolDefinition[] {
  return (request.tools ?? []).map((tool) => ({
    name: tool.function.name,
    ...(tool.function.description !== undefined ? { description: tool.function.description } : {}),
    parameters: tool.function.parameters ?? { type: 'object', properties: {} },
  }));
}

function toolChoice(request: ChatCompletionRequest, defined: ToolDefinition[]): ToolChoice {
  const choice = request.tool_choice;
  if (choice === undefined || choice === 'auto') return { mode: 'auto' };
  if (choice === 'none') return { mode: 'none' };
  if (defined.length === 0) throw new ShoalError('BAD_REQUEST', "tool_choice needs 'tools' to choose from", { param: 'tool_choice' });
  if (choice === 'required') return { mode: 'required' };
  if (!defined.some((t) => t.name === choice.function.name)) {
    throw new ShoalError('BAD_REQUEST', `tool_choice names '${choice.function.name}', which is not in 'tools'`, { param: 'tool_choice' });
  }
  return { mode: 'tool', name: choice.function.name };
}

function format(request: ChatCompletionRequest): OutputFormat {
  const rf = request.response_format;
  if (!rf || rf.type === 'text') return { kind: 'text' };
  if (rf.type === 'json_object') return { kind: 'json' };
  return rf.json_schema.schema ? { kind: 'json_schema', schema: rf.json_schema.schema } : { kind: 'json' };
}

export function chatRequestToTask(request: ChatCompletionRequest): InferenceTask {
  if (request.top_logprobs !== null && request.top_logprobs !== undefined && request.logprobs !== true) {
    throw new ShoalError('BAD_REQUEST', "top_logprobs needs 'logprobs': true", { param: 'top_logprobs' });
  }
  const defined = tools(request);
  return generateTask({
    model: request.model,
    prompt: { kind: 'chat', messages: messages(request.messages) },
    sampling: {
      maxTokens: request.max_completion_tokens ?? request.max_tokens ?? null,
      temperature: request.temperature ?? 1,
      topP: request.top_p ?? 1,
      seed: request.seed ?? null,
      presencePenalty: request.presence_penalty ?? 0,
      frequencyPenalty: request.frequency_penalty ?? 0,
    },
    stop: stopList(request.stop),
    tools: defined,
    toolChoice: toolChoice(request, defined),
    format: format(request),
    logprobs: request.logprobs === true ? { top: request.top_logprobs ?? 0 } : null,
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
      presencePenalty: request.presence_penalty ?? 0,
      frequencyPenalty: request.frequency_penalty ?? 0,
    },
    stop: stopList(request.stop),
    logprobs: request.logprobs === null || request.logprobs === undefined ? null : { top: request.logprobs },
  });
}

export function embeddingRequestToTask(request: EmbeddingRequest): EmbeddingTask {
  // OpenAI refuses over-long inputs rather than cutting them.
  return { kind: 'embed', model: request.model, inputs: typeof request.input === 'string' ? [request.input] : request.input, truncate: false, normalize: true };
}
