import type { ModelCapability } from '../wire/capability.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';

export interface ModelListing {
  id: string;
  /** Unix seconds when the model became known to this node. */
  created: number;
  ready: boolean;
  capabilities: ModelCapability[];
  /** Tokens of context per request on the serving instance, once known. */
  contextSize: number | null;
  /** GGUF facts for `/api/show`-style endpoints, once known. */
  details: { family: string; parameterSize: string | null; quantization: string | null; sizeBytes: number | null };
  /**
   * Memory the serving instance holds, for `/api/ps`: what placement estimated for it (one replica, or
   * every part of a pooled instance) and the part of that on GPU backends. Null where no placement
   * sized it (a node's own default model); absent where the dispatcher does not know.
   */
  memory?: { bytes: number; gpuBytes: number } | null;
}

/**
 * What the API needs from the rest of the node: which models can be asked for, and a way to run a
 * task on one of them. Throws MODEL_NOT_FOUND, CAPABILITY_MISSING, MODEL_LOADING, MODEL_FAILED or
 * QUEUE_FULL up front; failures after the first event arrive through the stream.
 */
export interface Dispatcher {
  models(): ModelListing[];
  run(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent>;
}
