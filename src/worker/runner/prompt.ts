import type { ChatHistoryItem } from 'node-llama-cpp';
import type { ChatMessage, ToolChoice, ToolDefinition } from '../../wire/task.js';
import { TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from './output-parser.js';

/**
 * Turns task messages into the chat history node-llama-cpp renders with the model's own template.
 * Tools are described in the system message and calls travel as `<tool_call>` JSON, the convention
 * most open chat models are trained on; tool results go back as user turns.
 */

const TOOL_RESPONSE_OPEN = '<tool_response>';
const TOOL_RESPONSE_CLOSE = '</tool_response>';

export function toolInstructions(tools: readonly ToolDefinition[], choice: ToolChoice): string {
  const offered = choice.mode === 'tool' ? tools.filter((t) => t.name === choice.name) : tools;
  const signatures = offered
    .map((t) => JSON.stringify({ type: 'function', function: { name: t.name, description: t.description ?? '', parameters: t.parameters } }))
    .join('\n');
  const must = choice.mode === 'auto' ? 'You may call a function when it helps answer.' : 'You must call one of these functions now.';
  return [
    '# Tools',
    '',
    `${must} The functions you can call are listed between <tools> and </tools>:`,
    '<tools>',
    signatures,
    '</tools>',
    '',
    `To call a function, answer with a JSON object holding its name and arguments between ${TOOL_CALL_OPEN} and ${TOOL_CALL_CLOSE}:`,
    TOOL_CALL_OPEN,
    '{"name": "<function name>", "arguments": {<arguments as JSON>}}',
    TOOL_CALL_CLOSE,
  ].join('\n');
}

function renderCalls(message: Extract<ChatMessage, { role: 'assistant' }>): string {
  const calls = (message.toolCalls ?? []).map((call) => {
    let args: unknown = call.arguments;
    try {
      args = JSON.parse(call.arguments);
    } catch {
      // A client may replay arguments that are not JSON; the model sees them as a string.
    }
    return `${TOOL_CALL_OPEN}\n${JSON.stringify({ name: call.name, arguments: args })}\n${TOOL_CALL_CLOSE}`;
  });
  return [message.content, ...calls].filter((part) => part !== '').join('\n');
}

export function toChatHistory(messages: readonly ChatMessage[], tools: readonly ToolDefinition[], choice: ToolChoice): ChatHistoryItem[] {
  const history: ChatHistoryItem[] = [];
  for (const message of messages) {
    const last = history.at(-1);
    switch (message.role) {
      case 'system':
        history.push({ type: 'system', text: message.content });
        break;
      case 'user':
        history.push({ type: 'user', text: message.content });
        break;
      case 'assistant':
        history.push({ type: 'model', response: [renderCalls(message)] });
        break;
      case 'tool': {
        const text = `${TOOL_RESPONSE_OPEN}\n${message.content}\n${TOOL_RESPONSE_CLOSE}`;
        // Results of parallel calls share one user turn, as the model saw the calls together.
        if (last?.type === 'user' && last.text.endsWith(TOOL_RESPONSE_CLOSE)) last.text += `\n${text}`;
        else history.push({ type: 'user', text });
        break;
      }
    }
  }
  if (tools.length > 0 && choice.mode !== 'none') {
    const instructions = toolInstructions(tools, choice);
    const first = history[0];
    if (first?.type === 'system') first.text = `${first.text}\n\n${instructions}`;
    else history.unshift({ type: 'system', text: instructions });
  }
  // A trailing assistant message is continued (prefill); otherwise the model starts a new turn.
  if (history.at(-1)?.type !== 'model') history.push({ type: 'model', response: [] });
  return history;
}
