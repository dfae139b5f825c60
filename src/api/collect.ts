import { ShoalError } from '../common/errors.js';
import type { FinishReason, TaskEvent, TokenLogprob, Usage } from '../wire/task.js';

export interface CollectedToolCall {
  id: string;
  name: string;
  /** JSON text of the arguments. */
  arguments: string;
}

/** A whole answer gathered from a task's events, for non-streamed responses of any API family. */
export interface CollectedAnswer {
  text: string;
  reasoning: string;
  toolCalls: CollectedToolCall[];
  /** Null unless the task asked for log probabilities. */
  logprobs: TokenLogprob[] | null;
  vectors: number[][];
  finishReason: FinishReason;
  usage: Usage;
}

export async function collectAnswer(events: AsyncIterator<TaskEvent>, wantLogprobs: boolean): Promise<CollectedAnswer> {
  let text = '';
  let reasoning = '';
  const toolCalls: CollectedToolCall[] = [];
  const logprobs: TokenLogprob[] = [];
  let vectors: number[][] = [];
  let end: { finishReason: FinishReason; usage: Usage } | null = null;
  for (let next = await events.next(); !next.done; next = await events.next()) {
    const event = next.value;
    switch (event.type) {
      case 'text':
        text += event.text;
        if (event.logprobs) logprobs.push(...event.logprobs);
        break;
      case 'reasoning':
        reasoning += event.text;
        break;
      case 'tool_call':
        toolCalls[event.index] = { id: event.id, name: event.name, arguments: '' };
        break;
      case 'tool_call_delta':
        toolCalls[event.index]!.arguments += event.arguments;
        break;
      case 'embeddings':
        vectors = event.vectors;
        break;
      case 'end':
        end = event;
        break;
      case 'start':
        break;
    }
  }
  if (!end) throw new ShoalError('INTERNAL', 'the task ended without an end event');
  return { text, reasoning, toolCalls, logprobs: wantLogprobs ? logprobs : null, vectors, finishReason: end.finishReason, usage: end.usage };
}
