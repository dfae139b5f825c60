import { assertNever, ShoalError } from '../../../common/errors.js';
import {
  MAX_MESSAGES,
  promptImages,
  type ChatMessage,
  type TaskImage,
  type InferenceTask,
  type OutputFormat,
  type ToolChoice as TaskToolChoice,
  type ToolDefinition,
} from '../../../wire/task.js';
import { ImageIntake } from '../../images.js';
import { generateTask } from '../../task-builder.js';
import type { CreateResponseRequest, FunctionTool, InputImage, InputItem, TextFormat, ToolChoice } from './schemas.js';

/** Arguments schema for a function declared without `parameters`: an object with nothing in it. */
export const NO_PARAMETERS = { type: 'object', properties: {}, additionalProperties: false };

type AssistantMessage = Extract<ChatMessage, { role: 'assistant' }>;

export interface NormalizedRequest {
  task: InferenceTask;
  /** The conversation without the instructions: what a later `previous_response_id` continues from. */
  conversation: ChatMessage[];
}

function partsText(parts: readonly { text: string }[]): string {
  return parts.map((part) => part.text).join('');
}

function reasoningText(item: Extract<InputItem, { type: 'reasoning' }>): string {
  // Shoal's own reasoning items carry the full text; summaries stand in when a client only has those.
  return item.content ? partsText(item.content) : partsText(item.summary);
}

type MessageInput = Extract<InputItem, { type: 'message' }>;

/** A message item's text, and its images (decoded, in order) when it is a user message; images anywhere else are refused. */
function messageParts(item: MessageInput, index: number, images: ImageIntake): { text: string; taken: TaskImage[] } {
  const text: string[] = [];
  const taken: TaskImage[] = [];
  item.content.forEach((part, partIndex) => {
    if (part.type !== 'input_image') {
      text.push(part.text);
      return;
    }
    const param = `input[${index}].content[${partIndex}]`;
    if (item.role !== 'user') throw new ShoalError('BAD_REQUEST', `'${param}' is an image in a ${item.role} message: images go in user messages`, { param });
    taken.push(inputImage(part, param, images));
  });
  return { text: text.join(''), taken };
}

function inputImage(part: InputImage, param: string, images: ImageIntake): TaskImage {
  if (part.file_id !== undefined && part.file_id !== null) {
    throw new ShoalError('UNSUPPORTED_PARAMETER', `unsupported parameter '${param}.file_id': Shoal has no Files API; send the image inline as a data URL in image_url`, {
      param: `${param}.file_id`,
    });
  }
  if (part.image_url === undefined || part.image_url === null) {
    throw new ShoalError('BAD_REQUEST', `'${param}' needs image_url: a data URL (data:image/png;base64,...)`, { param: `${param}.image_url` });
  }
  return images.url(part.image_url, `${param}.image_url`);
}

/**
 * Appends Responses items to a conversation. Assistant-side items in a row (reasoning, message,
 * function calls) form one assistant turn, as they come out of one generation.
 */
export function appendItems(conversation: readonly ChatMessage[], items: readonly InputItem[]): ChatMessage[] {
  const messages = [...conversation];
  const callNames = new Map<string, string>();
  for (const message of messages) {
    if (message.role === 'assistant') for (const call of message.toolCalls ?? []) callNames.set(call.id, call.name);
  }
  const images = new ImageIntake(promptImages({ kind: 'chat', messages }));
  const holder: { turn: AssistantMessage | null } = { turn: null };
  const openTurn = (): AssistantMessage => {
    if (holder.turn) return holder.turn;
    const turn: AssistantMessage = { role: 'assistant', content: '' };
    messages.push(turn);
    holder.turn = turn;
    return turn;
  };

  items.forEach((item, index) => {
    switch (item.type) {
      case 'message': {
        const { text, taken } = messageParts(item, index, images);
        if (item.role !== 'assistant') {
          holder.turn = null;
          if (item.role === 'user') messages.push({ role: 'user', content: text, ...(taken.length > 0 ? { images: taken } : {}) });
          else messages.push({ role: 'system', content: text });
          return;
        }
        // A second answer is a new turn; an answer after the turn's reasoning belongs to it.
        if (holder.turn && (holder.turn.content !== '' || holder.turn.toolCalls)) holder.turn = null;
        openTurn().content = text;
        return;
      }
      case 'reasoning': {
        const current = holder.turn;
        if (current && (current.content !== '' || current.toolCalls || current.reasoning !== undefined)) holder.turn = null;
        openTurn().reasoning = reasoningText(item);
        return;
      }
      case 'function_call': {
        const turn = openTurn();
        turn.toolCalls = [...(turn.toolCalls ?? []), { id: item.call_id, name: item.name, arguments: item.arguments }];
        callNames.set(item.call_id, item.name);
        return;
      }
      case 'function_call_output': {
        const name = callNames.get(item.call_id);
        if (name === undefined) {
          throw new ShoalError(
            'BAD_REQUEST',
            `no function_call with call_id '${item.call_id}' comes before this function_call_output: include the call in input, or continue with previous_response_id`,
            { param: `input[${index}].call_id` },
          );
        }
        holder.turn = null;
        messages.push({ role: 'tool', toolCallId: item.call_id, name, content: partsText(item.output) });
        return;
      }
      default:
        assertNever(item, 'input item');
    }
  });
  return messages;
}

function toolDefinitions(tools: readonly FunctionTool[]): ToolDefinition[] {
  const seen = new Set<string>();
  return tools.map((tool, index) => {
    if (seen.has(tool.name)) {
      throw new ShoalError('BAD_REQUEST', `tools has two functions named '${tool.name}': give each a distinct name`, { param: `tools[${index}].name` });
    }
    seen.add(tool.name);
    return {
      name: tool.name,
      ...(tool.description ? { description: tool.description } : {}),
      parameters: tool.parameters ?? NO_PARAMETERS,
    };
  });
}

function toolChoice(choice: ToolChoice | undefined, tools: readonly ToolDefinition[]): TaskToolChoice {
  if (choice === undefined || choice === 'auto') return { mode: 'auto' };
  if (choice === 'none') return { mode: 'none' };
  if (tools.length === 0) {
    throw new ShoalError('BAD_REQUEST', `tool_choice asks for a function call but 'tools' is empty: declare the function in tools`, { param: 'tool_choice' });
  }
  if (choice === 'required') return { mode: 'required' };
  if (!tools.some((tool) => tool.name === choice.name)) {
    throw new ShoalError('BAD_REQUEST', `tool_choice names function '${choice.name}', which is not in 'tools'`, { param: 'tool_choice.name' });
  }
  return { mode: 'tool', name: choice.name };
}

function outputFormat(format: TextFormat | undefined): OutputFormat {
  if (format === undefined) return { kind: 'text' };
  switch (format.type) {
    case 'text':
      return { kind: 'text' };
    case 'json_object':
      return { kind: 'json' };
    case 'json_schema':
      return { kind: 'json_schema', schema: format.schema };
    default:
      return assertNever(format, 'text format');
  }
}

/** A create-response request, continuing `history` (the stored conversation of `previous_response_id`), as one task. */
export function responseRequestToTask(request: CreateResponseRequest, history: readonly ChatMessage[]): NormalizedRequest {
  const conversation = appendItems(history, request.input);
  const messages: ChatMessage[] = request.instructions ? [{ role: 'system', content: request.instructions }, ...conversation] : conversation;
  if (messages.length > MAX_MESSAGES) {
    throw new ShoalError('BAD_REQUEST', `the conversation has ${messages.length} messages, more than the ${MAX_MESSAGES} Shoal takes: start a new conversation`, {
      param: request.previous_response_id ? 'previous_response_id' : 'input',
    });
  }
  const tools = toolDefinitions(request.tools ?? []);
  const task = generateTask({
    model: request.model,
    prompt: { kind: 'chat', messages },
    sampling: {
      maxTokens: request.max_output_tokens ?? null,
      temperature: request.temperature ?? 1,
      topP: request.top_p ?? 1,
    },
    tools,
    toolChoice: toolChoice(request.tool_choice, tools),
    format: outputFormat(request.text?.format),
  });
  return { task, conversation };
}
