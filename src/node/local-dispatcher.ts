import { ShoalError } from '../common/errors.js';
import type { ModelId } from '../common/ids.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { Dispatcher, ModelCapability, ModelListing } from '../api/dispatch.js';
import type { InstanceStatus, Worker } from '../worker/worker.js';

function capabilityFor(task: RunnerTask): ModelCapability {
  if (task.kind === 'embed') return 'embeddings';
  if (task.kind === 'count') return task.prompt.kind === 'chat' ? 'chat' : 'completion';
  if (task.tools.length > 0 && task.toolChoice.mode !== 'none') return 'tools';
  return task.prompt.kind === 'chat' ? 'chat' : 'completion';
}

function formatParams(count: number | null): string | null {
  if (count === null) return null;
  if (count >= 1e9) return `${(count / 1e9).toFixed(1)}B`;
  if (count >= 1e6) return `${(count / 1e6).toFixed(1)}M`;
  return `${(count / 1e3).toFixed(1)}K`;
}

function listing(instance: InstanceStatus): ModelListing {
  return {
    id: instance.modelId,
    created: instance.placedAt,
    ready: instance.state === 'ready',
    capabilities: instance.capabilities,
    contextSize: instance.contextSize,
    details: {
      family: instance.model?.architecture ?? 'llama',
      parameterSize: formatParams(instance.model?.parameterCount ?? null),
      quantization: instance.model?.fileType ?? null,
      sizeBytes: instance.model?.sizeBytes ?? null,
    },
  };
}

/** Routes tasks to this node's own instances (the single-node case of DESIGN.md section 6). */
export class LocalDispatcher implements Dispatcher {
  constructor(private readonly worker: Worker) {}

  models(): ModelListing[] {
    const listings = new Map<string, ModelListing>();
    for (const instance of this.worker.status()) {
      const known = listings.get(instance.modelId);
      // Prefer a ready instance's facts; one ready replica makes the model ready.
      if (!known || (!known.ready && instance.state === 'ready')) listings.set(instance.modelId, listing(instance));
    }
    return [...listings.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  run(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    const instance = this.worker.instanceFor(task.model as ModelId);
    if (!instance) {
      const placed = this.models().map((m) => m.id);
      throw new ShoalError(
        'MODEL_NOT_FOUND',
        `model '${task.model}' is not placed on this cluster${placed.length > 0 ? `; placed models: ${placed.join(', ')}` : ''}`,
        { param: 'model' },
      );
    }
    const needed = capabilityFor(task);
    if (!instance.capabilities.includes(needed)) {
      throw new ShoalError('CAPABILITY_MISSING', `model '${task.model}' does not support ${needed}; its capabilities are ${instance.capabilities.join(', ')}`, {
        param: 'model',
      });
    }
    const status = instance.runner.status();
    if (status.state === 'starting' || status.state === 'restarting') {
      throw new ShoalError('MODEL_LOADING', `model '${task.model}' is not ready yet (${status.reason ?? 'loading'}): retry shortly`);
    }
    return instance.runner.run(task, signal);
  }
}
