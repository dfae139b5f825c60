import { ShoalError } from '../common/errors.js';
import type { ModelId } from '../common/ids.js';
import type { InferenceTask, TaskEvent } from '../wire/task.js';
import type { Dispatcher, ModelListing } from '../api/dispatch.js';
import type { Worker } from '../worker/worker.js';

/** Routes tasks to this node's own instances (the single-node case of DESIGN.md section 6). */
export class LocalDispatcher implements Dispatcher {
  private readonly knownSince = new Map<string, number>();

  constructor(private readonly worker: Worker) {}

  models(): ModelListing[] {
    const listings = new Map<string, ModelListing>();
    for (const instance of this.worker.status()) {
      const created = this.createdAt(instance.modelId);
      const ready = instance.state === 'ready' || (listings.get(instance.modelId)?.ready ?? false);
      listings.set(instance.modelId, { id: instance.modelId, created, ready });
    }
    return [...listings.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  run(task: InferenceTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    const instance = this.worker.instanceFor(task.model as ModelId);
    if (!instance) {
      const placed = this.models().map((m) => m.id);
      throw new ShoalError(
        'MODEL_NOT_FOUND',
        `model '${task.model}' is not placed on this cluster${placed.length > 0 ? `; placed models: ${placed.join(', ')}` : ''}`,
        { param: 'model' },
      );
    }
    const status = instance.runner.status();
    if (status.state === 'starting' || status.state === 'restarting') {
      throw new ShoalError('MODEL_LOADING', `model '${task.model}' is not ready yet (${status.reason ?? 'loading'}): retry shortly`);
    }
    return instance.runner.generate(task, signal);
  }

  private createdAt(modelId: string): number {
    let created = this.knownSince.get(modelId);
    if (created === undefined) {
      created = Math.floor(Date.now() / 1000);
      this.knownSince.set(modelId, created);
    }
    return created;
  }
}
