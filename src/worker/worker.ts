import { newInstanceId, type InstanceId, type ModelId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import type { RecordMoment } from '../diagnostics/recorder.js';
import type { RunnerDiagnostics } from '../wire/diagnostics.js';
import type { ModelCapability } from '../wire/capability.js';
import type { InstanceRole } from '../wire/instance-role.js';
import type { InstanceRunner, RunnerStatus } from './runner-contract.js';
import type { GpuChoice, RunnerConfig } from './runner/protocol.js';
import { RunnerSupervisor } from './runner/supervisor.js';
import { RecordedRunner } from './recorded-runner.js';

export interface WorkerOptions {
  log: Logger;
  /** Engine threads per runner. */
  threads: number;
  gpu: GpuChoice;
  /** Tokens of context per concurrent request (the default model's instance). */
  contextSize: number;
  /** Concurrent requests per instance, batched as sequences of one context (the default model's instance). */
  sequences: number;
  /** The hang watchdog's silence limit per generation (recorded-runner.ts). Default 60 000. */
  stallTimeoutMs?: number;
  /** Where runner crashes, stalls and open breakers are recorded as node moments. */
  recordMoment?: RecordMoment;
}

export interface LocalInstance {
  instanceId: InstanceId;
  modelId: ModelId;
  role: InstanceRole;
  /** The backend tag it runs with. */
  backend: string;
  capabilities: ModelCapability[];
  /** Unix seconds when the instance was placed. */
  placedAt: number;
  /** Placed by this node alone (the default model), not by the cluster's state. */
  local: boolean;
  runner: InstanceRunner;
}

export interface InstanceStatus extends RunnerStatus {
  instanceId: InstanceId;
  modelId: ModelId;
  role: InstanceRole;
  backend: string;
  capabilities: ModelCapability[];
  placedAt: number;
  local: boolean;
}

/** An engine other than the node-llama-cpp runner child for the default model, and its backend tag. */
export interface ServedBy {
  backend: string;
  runner(spec: { instanceId: InstanceId; modelId: ModelId; modelPath: string; capabilities: ModelCapability[]; contextSize: number; sequences: number; onChange: () => void }): InstanceRunner;
}

/** Runs this node's model instances (or parts of them), one supervised engine process each. */
export class Worker implements AsyncDisposable {
  private readonly instances = new Map<InstanceId, LocalInstance>();
  /** Each attached instance's runner as wrapped: its flight recorder and hang watchdog. */
  private readonly recorded = new Map<InstanceId, RecordedRunner>();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly options: WorkerOptions) {}

  get threads(): number {
    return this.options.threads;
  }

  /**
   * Starts the node's own default-model instance: through `served` when given (the managed
   * llama-server, default-engine.ts says when), else with the node-llama-cpp runner child.
   */
  place(modelId: ModelId, modelPath: string, capabilities: ModelCapability[], served: ServedBy | null = null): LocalInstance {
    const instanceId = newInstanceId();
    const onChange = (): void => this.changed();
    const window = { contextSize: this.options.contextSize, sequences: this.options.sequences };
    const runner = served ? served.runner({ instanceId, modelId, modelPath, capabilities, ...window, onChange }) : this.llamaCppRunner(instanceId, modelId, modelPath, window);
    return this.attach({ instanceId, modelId, role: 'full', backend: served?.backend ?? 'llama_cpp-cpu', capabilities, placedAt: Math.floor(Date.now() / 1000), local: true, runner });
  }

  /** A node-llama-cpp runner child with the given window, for a cluster-placed instance or the default model. */
  llamaCppRunner(instanceId: InstanceId, modelId: ModelId, modelPath: string, window: Pick<RunnerConfig, 'contextSize' | 'sequences' | 'kvCacheType' | 'flashAttention'>): RunnerSupervisor {
    return new RunnerSupervisor({
      log: this.options.log.child({ instanceId, modelId }),
      config: { modelPath, ...window, threads: this.options.threads, gpu: this.options.gpu },
      onChange: () => this.changed(),
    });
  }

  /** Holds an instance; its runner is wrapped in a flight recorder and hang watchdog (the returned instance holds the wrapper). */
  attach(instance: LocalInstance): LocalInstance {
    const runner = new RecordedRunner(instance.runner, {
      instanceId: instance.instanceId,
      modelId: instance.modelId,
      log: this.options.log.child({ instanceId: instance.instanceId, modelId: instance.modelId }),
      ...(this.options.stallTimeoutMs !== undefined ? { stallTimeoutMs: this.options.stallTimeoutMs } : {}),
      ...(this.options.recordMoment ? { recordMoment: this.options.recordMoment } : {}),
    });
    const held = { ...instance, runner };
    this.instances.set(instance.instanceId, held);
    this.recorded.set(instance.instanceId, runner);
    this.changed();
    return held;
  }

  /** Stops and forgets an instance; its open requests end with RUNNER_STOPPED. */
  async detach(instanceId: InstanceId): Promise<void> {
    const instance = this.instances.get(instanceId);
    if (!instance) return;
    this.instances.delete(instanceId);
    this.recorded.delete(instanceId);
    this.changed();
    await instance.runner.stop();
  }

  get(instanceId: InstanceId): LocalInstance | undefined {
    return this.instances.get(instanceId);
  }

  /** Fires when an instance is attached or detached, or a runner changes state or load. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  changed(): void {
    for (const runner of this.recorded.values()) runner.observe();
    for (const listener of this.listeners) listener();
  }

  status(): InstanceStatus[] {
    return [...this.instances.values()].map((instance) => ({
      instanceId: instance.instanceId,
      modelId: instance.modelId,
      role: instance.role,
      backend: instance.backend,
      capabilities: instance.capabilities,
      placedAt: instance.placedAt,
      local: instance.local,
      ...instance.runner.status(),
    }));
  }

  /** Each instance's runner with its flight recorder and its engine's stderr tail, for `GET /diagnostics/node`. */
  diagnostics(): RunnerDiagnostics[] {
    return [...this.instances.values()].map((instance) => {
      const status = instance.runner.status();
      const recorded = this.recorded.get(instance.instanceId);
      return {
        instanceId: instance.instanceId,
        modelId: instance.modelId,
        backend: instance.backend,
        role: instance.role,
        state: status.state,
        reason: status.reason,
        pid: status.pid,
        restarts: status.restarts,
        inFlight: status.inFlight,
        queued: status.queued,
        recorder: recorded?.recorder.entries() ?? [],
        stderrTail: recorded?.stderrTail() ?? [],
      };
    });
  }

  async stop(): Promise<void> {
    const all = [...this.instances.values()];
    this.instances.clear();
    this.recorded.clear();
    await Promise.all(all.map((instance) => instance.runner.stop()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
