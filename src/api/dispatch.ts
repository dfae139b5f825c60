import type { InferenceTask, TaskEvent } from '../wire/task.js';

export interface ModelListing {
  id: string;
  /** Unix seconds when the model became known to this node. */
  created: number;
  ready: boolean;
}

/**
 * What the API needs from the rest of the node: which models can be asked for, and a way to run a
 * task on one of them. Throws MODEL_NOT_FOUND, MODEL_LOADING, MODEL_FAILED or QUEUE_FULL up front;
 * failures after the first event arrive through the stream.
 */
export interface Dispatcher {
  models(): ModelListing[];
  run(task: InferenceTask, signal: AbortSignal): AsyncIterable<TaskEvent>;
}
