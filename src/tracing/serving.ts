// The serving side of a traced request: the runner's event stream, passed through unchanged, with
// its phases recorded as spans (ServingPhases). Used for the local path (the API node serves the
// request itself) and on a serving node for a traced `/shoal/infer/1` request.

import { toShoalError } from '../common/errors.js';
import type { TaskEvent } from '../wire/task.js';
import { ServingPhases, type SpanSet } from './spans.js';

/**
 * `events` with its queue, prefill and decode spans recorded in `spans` under `parentId`. Call it
 * where the runner is asked to run: the queue span starts now. Every span is closed by the time the
 * `end` event is handed on, so a reader that stops at `end` finds them complete.
 */
export function traceServing(events: AsyncIterable<TaskEvent>, spans: SpanSet, parentId: string | null): AsyncIterable<TaskEvent> {
  const phases = new ServingPhases(spans, parentId);
  return observed(events, phases);
}

async function* observed(events: AsyncIterable<TaskEvent>, phases: ServingPhases): AsyncGenerator<TaskEvent, void, undefined> {
  let ended = false;
  try {
    for await (const event of events) {
      phases.observe(event);
      if (event.type === 'end') ended = true;
      yield event;
    }
  } catch (error) {
    phases.fail(toShoalError(error).code);
    throw error;
  } finally {
    if (!ended) phases.fail('cancelled');
  }
}
