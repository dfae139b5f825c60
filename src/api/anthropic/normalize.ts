import { ShoalError } from '../../common/errors.js';
import {
  MAX_MESSAGES,
  MAX_TOOLS,
  type ChatMessage,
  type CountTask,
  type InferenceTask,
  type TaskImage,
  type ToolCall,
  type ToolChoice,
  type ToolDefinition,
} from '../../wire/task.js';
import { ImageIntake } from '../images.js';
import { generateTask } from '../task-builder.js';
import type { CountTokensRequest, ImageBlockParam, MessagesRequest, TextBlockParam, ToolChoiceParam, ToolParam } from './schemas.js';

/**
 * Separate blocks are separate passages (Claude Code, for one, splits its system prompt into
 * blocks); joining them with nothing between would fuse the last word of one with the first of the next.
 */
export const BLOCK_SEPARATOR = '\n\n';

/** What a tool result flagged `is_error` says to the model, which has no other way to see the flag. */
export const TOOL_ERROR_PREFIX = 'Error: ';

function joinText(blocks: readonly TextBlockParam[]): string {
  return blocks.map((block) => block.text).join(BLOCK_SEPARATOR);
}

function toolResultText(content: TextBlockParam[] | undefined, isError: boolean): string {
  const text = joinText(content ?? []);
  return isError ? `${TOOL_ERROR_PREFIX}${text}` : text;
}

function imageOf(block: ImageBlockParam, param: string, images: ImageIntake): TaskImage {
  const source = block.source;
  if (source.type !== 'base64') {
    throw new ShoalError('UNSUPPORTED_PARAMETER', `unsupported parameter '${param}.source': ${source.type} image sources are not supported; send the image as source.type 'base64'`, {
      param: `${param}.source.type`,
    });
  }
  return images.base64(source.data, `${param}.source.data`);
}

/**
 * Anthropic conversations in task terms: tool_use blocks become the assistant's tool calls (arguments
 * as JSON text), each tool_result becomes a `tool` message, thinking blocks become `reasoning`.
 * A trailing assistant message stays last, so the engine continues it (Anthropic's prefill).
 */
export function toChatMessages(system: TextBlockParam[] | undefined, messages: MessagesRequest['messages']): ChatMessage[] {
  const out: ChatMessage[] = [];
  if (system && system.length > 0) out.push({ role: 'system', content: joinText(system) });
  const toolNames = new Map<string, string>();
  const images = new ImageIntake();
  messages.forEach((message, i) => {
    if (message.role === 'assistant') {
      const text: string[] = [];
      const reasoning: string[] = [];
      const toolCalls: ToolCall[] = [];
      for (const block of message.content) {
        if (block.type === 'text') text.push(block.text);
        else if (block.type === 'thinking') reasoning.push(block.thinking);
        else {
          toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input) });
          toolNames.set(block.id, block.name);
        }
      }
      if (toolCalls.length > MAX_TOOLS) {
        throw new ShoalError('BAD_REQUEST', `messages[${i}] has ${toolCalls.length} tool_use blocks; at most ${MAX_TOOLS} are supported`, { param: `messages[${i}].content` });
      }
      out.push({
        role: 'assistant',
        content: text.join(BLOCK_SEPARATOR),
        ...(reasoning.length > 0 ? { reasoning: reasoning.join(BLOCK_SEPARATOR) } : {}),
        ...(toolCalls.length > 0 ? { toolCalls } : {}),
      });
      return;
    }
    // Blocks keep their order: text and images before a tool result stay before it.
    let pending: TextBlockParam[] = [];
    let pendingImages: TaskImage[] = [];
    const flush = (): void => {
      if (pending.length > 0 || pendingImages.length > 0) out.push({ role: 'user', content: joinText(pending), ...(pendingImages.length > 0 ? { images: pendingImages } : {}) });
      pending = [];
      pendingImages = [];
    };
    message.content.forEach((block, blockIndex) => {
      if (block.type === 'text') {
        pending.push(block);
        return;
      }
      if (block.type === 'image') {
        pendingImages.push(imageOf(block, `messages[${i}].content[${blockIndex}]`, images));
        return;
      }
      flush();
      const name = toolNames.get(block.tool_use_id);
      out.push({
        role: 'tool',
        toolCallId: block.tool_use_id,
        ...(name !== undefined ? { name } : {}),
        content: toolResultText(block.content, block.is_error === true),
      });
    });
    flush();
  });
  if (out.length > MAX_MESSAGES) {
    throw new ShoalError('BAD_REQUEST', `the conversation becomes ${out.length} messages (each tool_result is one); at most ${MAX_MESSAGES} are supported`, {
      param: 'messages',
    });
  }
  return out;
}

export function toToolDefinitions(tools: ToolParam[] | undefined): ToolDefinition[] {
  const seen = new Set<string>();
  return (tools ?? []).map((tool, i) => {
    if (seen.has(tool.name)) throw new ShoalError('BAD_REQUEST', `tools[${i}].name '${tool.name}' is used by an earlier tool: tool names must be unique`, { param: `tools[${i}].name` });
    seen.add(tool.name);
    return {
      name: tool.name,
      ...(tool.description !== undefined ? { description: tool.description } : {}),
      parameters: tool.input_schema,
    };
  });
}

export function toToolChoice(choice: ToolChoiceParam | undefined, tools: readonly ToolDefinition[]): ToolChoice {
  if (choice === undefined) return { mode: 'auto' };
  if ((choice.type === 'any' || choice.type === 'tool') && tools.length === 0) {
    throw new ShoalError('BAD_REQUEST', `tool_choice '${choice.type}' needs tools: declare them in the tools parameter`, { param: 'tool_choice' });
  }
  switch (choice.type) {
    case 'auto':
      return { mode: 'auto' };
    case 'none':
      return { mode: 'none' };
    case 'any':
      return { mode: 'required' };
    case 'tool':
      if (!tools.some((tool) => tool.name === choice.name)) {
        throw new ShoalError('BAD_REQUEST', `tool_choice.name '${choice.name}' is not one of the tools: declare it in the tools parameter`, { param: 'tool_choice.name' });
      }
      return { mode: 'tool', name: choice.name };
  }
}

/**
 * `thinking` and `metadata` are accepted without changing the task: the engine separates a model's
 * reasoning whatever the request says, and `metadata.user_id` only identifies the caller.
 */
export function messagesRequestToTask(request: MessagesRequest): InferenceTask {
  const tools = toToolDefinitions(request.tools);
  return generateTask({
    model: request.model,
    prompt: { kind: 'chat', messages: toChatMessages(request.system, request.messages) },
    sampling: {
      maxTokens: request.max_tokens,
      temperature: request.temperature ?? 1,
      topP: request.top_p ?? 1,
    },
    stop: request.stop_sequences ?? [],
    tools,
    toolChoice: toToolChoice(request.tool_choice, tools),
  });
}

export function countRequestToTask(request: CountTokensRequest): CountTask {
  return {
    kind: 'count',
    model: request.model,
    prompt: { kind: 'chat', messages: toChatMessages(request.system, request.messages) },
    tools: toToolDefinitions(request.tools),
  };
}
