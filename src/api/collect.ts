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
  /** A transcription's result; null for every other task. */
  transcript: Extract<TaskEvent, { type: 'transcript' }> | null;
  /** The stop sequence that ended the answer, if one did. */
  stopSequence: string | null;
  finishReason: FinishReason;
  usage: Usage;
}

export async function collectAnswer(events: AsyncIterator<TaskEvent>, wantLogprobs: boolean): Promise<CollectedAnswer> {
  const answer: CollectedAnswer = { text: '', reasoning: '', toolCalls: [], logprobs: wantLogprobs ? [] : null, vectors: [], transcript: null, stopSequence: null, finishReason: 'stop', usage: { promptTokens: 0, completionTokens: 0 } };
  let ended = false;
  try {
    for (let next = await events.next(); !next.done; next = await events.next()) {
      ended = addEvent(answer, next.value) || ended;
    }
  } finally {
    // Stops the generation when this loop ends early (an error while collecting).
    await events.return?.();
  }
  if (!ended) throw new ShoalError('INTERNAL', 'the task ended without an end event');
  return answer;
}

/** Folds one event into the answer; true for the final `end`. */
function addEvent(answer: CollectedAnswer, event: TaskEvent): boolean {
  switch (event.type) {
    case 'text':
      answer.text += event.text;
      if (event.logprobs) answer.logprobs?.push(...event.logprobs);
      return false;
    case 'reasoning':
      answer.reasoning += event.text;
      return false;
    case 'tool_call':
      answer.toolCalls[event.index] = { id: event.id, name: event.name, arguments: '' };
      return false;
    case 'tool_call_delta':
      answer.toolCalls[event.index]!.arguments += event.arguments;
      return false;
    case 'embeddings':
      answer.vectors = event.vectors;
      return false;
    case 'transcript':
      answer.transcript = event;
      return false;
    case 'end':
      answer.finishReason = event.finishReason;
      answer.usage = event.usage;
      answer.stopSequence = event.stopSequence;
      return true;
    case 'queued':
    case 'start':
      return false;
  }
}
