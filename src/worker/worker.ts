import { newInstanceId, type InstanceId, type ModelId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import type { ModelCapability } from '../api/dispatch.js';
import type { GpuChoice } from './runner/protocol.js';
import { RunnerSupervisor, type RunnerStatus } from './runner/supervisor.js';

export interface WorkerOptions {
  log: Logger;
  /** Engine threads per runner. */
  threads: number;
  gpu: GpuChoice;
  /** Tokens of context per concurrent request. */
  contextSize: number;
  /** Concurrent requests per instance, batched as sequences of one context. */
  sequences: number;
}

export interface LocalInstance {
  instanceId: InstanceId;
  modelId: ModelId;
  modelPath: string;
  capabilities: ModelCapability[];
  /** Unix seconds when the instance was placed. */
  placedAt: number;
  runner: RunnerSupervisor;
}

export interface InstanceStatus extends RunnerStatus {
  instanceId: InstanceId;
  modelId: ModelId;
  capabilities: ModelCapability[];
  placedAt: number;
}

/** Runs this node's model instances, one supervised runner child each. */
export class Worker implements AsyncDisposable {
  private readonly instances = new Map<InstanceId, LocalInstance>();

  constructor(private readonly options: WorkerOptions) {}

  place(modelId: ModelId, modelPath: string, capabilities: ModelCapability[]): LocalInstance {
    const instanceId = newInstanceId();
    const runner = new RunnerSupervisor({
      log: this.options.log.child({ instanceId, modelId }),
      config: {
        modelPath,
        contextSize: this.options.contextSize,
        sequences: this.options.sequences,
        threads: this.options.threads,
        gpu: this.options.gpu,
      },
    });
    const instance: LocalInstance = { instanceId, modelId, modelPath, capabilities, placedAt: Math.floor(Date.now() / 1000), runner };
    this.instances.set(instanceId, instance);
    return instance;
  }

  /** The instance serving `modelId` with the fewest requests in flight, preferring ready ones. */
  instanceFor(modelId: ModelId): LocalInstance | undefined {
    let best: LocalInstance | undefined;
    let bestScore = Infinity;
    for (const instance of this.instances.values()) {
      if (instance.modelId !== modelId) continue;
      const status = instance.runner.status();
      const score = (status.state === 'ready' ? 0 : 1_000_000) + status.inFlight + status.queued;
      if (score < bestScore) {
        best = instance;
        bestScore = score;
      }
    }
    return best;
  }

  status(): InstanceStatus[] {
    return [...this.instances.values()].map((instance) => ({
      instanceId: instance.instanceId,
      modelId: instance.modelId,
      capabilities: instance.capabilities,
      placedAt: instance.placedAt,
      ...instance.runner.status(),
    }));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.instances.values()].map((instance) => instance.runner.stop()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
