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
import { CountedRunner, InstanceFront, type HeldEngine } from './handover.js';
import { ShoalError, errorMessage, type ErrorCode } from '../common/errors.js';

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

/**
 * How a handover ended. `moved`: the instance serves through the new engine and the old one is
 * stopped. `kept`: the old engine still serves and `reason` says why (the new one did not become
 * ready, the instance was stopped meanwhile, or it was already on that backend).
 */
export type HandoverOutcome =
  | { outcome: 'moved'; instanceId: InstanceId; from: string; to: string }
  | { outcome: 'kept'; instanceId: InstanceId; backend: string; code: ErrorCode | 'UNCHANGED'; reason: string };

/** Runs this node's model instances (or parts of them), one supervised engine process each. */
export class Worker implements AsyncDisposable {
  private readonly instances = new Map<InstanceId, LocalInstance>();
  /** Each attached instance's runner as wrapped: its flight recorder and hang watchdog. */
  private readonly recorded = new Map<InstanceId, RecordedRunner>();
  /** The swappable front of each instance that serves requests (rpc donors have none). */
  private readonly fronts = new Map<InstanceId, InstanceFront>();
  /** What the default model was placed with, to start it again on another engine. */
  private readonly defaults = new Map<InstanceId, { modelPath: string }>();
  /** Handovers under way per instance (the new engine still loading), aborted by `stop`. */
  private readonly handovers = new Map<InstanceId, { controller: AbortController; ended: Promise<void> }>();
  private readonly listeners = new Set<() => void>();

  constructor(private readonly options: WorkerOptions) {}

  get threads(): number {
    return this.options.threads;
  }

  get gpu(): GpuChoice {
    return this.options.gpu;
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
    this.defaults.set(instanceId, { modelPath });
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
    if (instance.runner.run === undefined) {
      const runner = this.record(instance, instance.runner);
      return this.hold({ ...instance, runner }, runner);
    }
    const engine = this.engine(instance, instance.runner);
    const front = new InstanceFront(engine);
    this.fronts.set(instance.instanceId, front);
    return this.hold({ ...instance, runner: front }, engine.recorded);
  }

  private hold(held: LocalInstance, recorded: RecordedRunner): LocalInstance {
    this.instances.set(held.instanceId, held);
    this.recorded.set(held.instanceId, recorded);
    this.changed();
    return held;
  }

  private record(instance: Pick<LocalInstance, 'instanceId' | 'modelId'>, runner: InstanceRunner): RecordedRunner {
    return new RecordedRunner(runner, {
      instanceId: instance.instanceId,
      modelId: instance.modelId,
      log: this.options.log.child({ instanceId: instance.instanceId, modelId: instance.modelId }),
      ...(this.options.stallTimeoutMs !== undefined ? { stallTimeoutMs: this.options.stallTimeoutMs } : {}),
      ...(this.options.recordMoment ? { recordMoment: this.options.recordMoment } : {}),
    });
  }

  private engine(instance: Pick<LocalInstance, 'instanceId' | 'modelId'>, runner: InstanceRunner): HeldEngine {
    const counted = new CountedRunner(runner);
    return { counted, recorded: this.record(instance, counted) };
  }

  /**
   * Moves a serving instance onto `next` (a runner not started by anyone else) without failing or
   * cutting a request: `next` loads beside the current engine, which serves on meanwhile; once it is
   * ready, new requests go to it at once, and the old engine finishes every request it already took
   * (in flight and waiting for a slot) before it is stopped. Both engines hold the model in memory
   * from `next`'s load until that drain ends. When `next` does not become ready the current engine
   * keeps serving and the outcome says why; this never throws.
   */
  async handOver(instanceId: InstanceId, next: InstanceRunner, backend: string): Promise<HandoverOutcome> {
    const instance = this.instances.get(instanceId);
    const front = this.fronts.get(instanceId);
    const log = this.options.log.child({ instanceId, modelId: instance?.modelId });
    if (instance === undefined || front === undefined || next.run === undefined) {
      await next.stop().catch(() => undefined);
      const reason = instance === undefined ? 'the instance is not held here' : 'the instance or the new engine serves no requests';
      return { outcome: 'kept', instanceId, backend: instance?.backend ?? backend, code: 'NOT_FOUND', reason };
    }
    if (this.handovers.has(instanceId)) {
      await next.stop().catch(() => undefined);
      return { outcome: 'kept', instanceId, backend: instance.backend, code: 'UNCHANGED', reason: 'another engine is already loading for this instance' };
    }
    const engine = this.engine(instance, next);
    const controller = new AbortController();
    // `ended` resolves once the load is over and, when it failed or the instance went, the new engine
    // has stopped: a stop or detach waits for it, so no engine outlives the worker.
    let loadEnded!: () => void;
    this.handovers.set(instanceId, { controller, ended: new Promise<void>((resolve) => (loadEnded = resolve)) });
    try {
      try {
        await engine.recorded.whenReady(controller.signal);
      } catch (error) {
        await engine.recorded.stop().catch(() => undefined);
        const reason = `the ${backend} engine did not become ready: ${errorMessage(error)}`;
        log.warn({ backend: instance.backend, next: backend }, `${reason}; ${instance.backend} keeps serving ${instance.modelId}`);
        return { outcome: 'kept', instanceId, backend: instance.backend, code: errorCode(error), reason };
      }
      if (this.fronts.get(instanceId) !== front) {
        await engine.recorded.stop().catch(() => undefined);
        return { outcome: 'kept', instanceId, backend: instance.backend, code: 'NOT_FOUND', reason: 'the instance was stopped while its new engine loaded' };
      }
    } finally {
      this.handovers.delete(instanceId);
      loadEnded();
    }
    const from = instance.backend;
    // The instance stays held throughout: the same entry, its backend and engine changed together.
    instance.backend = backend;
    this.recorded.set(instanceId, engine.recorded);
    const drained = front.swap(engine);
    this.changed();
    log.info({ from, to: backend }, `${instance.modelId} now serves through ${backend}; the ${from} engine finishes its open requests and stops`);
    try {
      await drained;
    } catch (error) {
      // The move stands: the old engine holds no request; what is left of it is its stop's to clean up.
      log.warn({ err: error }, `the ${from} engine did not stop cleanly after the move: ${errorMessage(error)}`);
    }
    this.changed();
    return { outcome: 'moved', instanceId, from, to: backend };
  }

  /**
   * Hands each default-model instance not yet on `served`'s backend over to it, one at a time
   * (engine-factory.ts `moveDefaultModel` decides when). Cluster-placed parts move through
   * InstanceHost.moveParts, which records their new backend in cluster state.
   */
  async moveDefaultTo(served: ServedBy): Promise<HandoverOutcome[]> {
    const outcomes: HandoverOutcome[] = [];
    for (const [instanceId, { modelPath }] of this.defaults) {
      const instance = this.instances.get(instanceId);
      if (instance === undefined) continue;
      if (instance.backend === served.backend) {
        outcomes.push({ outcome: 'kept', instanceId, backend: instance.backend, code: 'UNCHANGED', reason: `it already runs on ${served.backend}` });
        continue;
      }
      const window = { contextSize: this.options.contextSize, sequences: this.options.sequences };
      let next: InstanceRunner;
      try {
        next = served.runner({ instanceId, modelId: instance.modelId, modelPath, capabilities: instance.capabilities, ...window, onChange: () => this.changed() });
      } catch (error) {
        outcomes.push({ outcome: 'kept', instanceId, backend: instance.backend, code: errorCode(error), reason: `the ${served.backend} engine could not be created: ${errorMessage(error)}` });
        continue;
      }
      outcomes.push(await this.handOver(instanceId, next, served.backend));
    }
    return outcomes;
  }

  /** Stops and forgets an instance; its open requests end with RUNNER_STOPPED. */
  async detach(instanceId: InstanceId): Promise<void> {
    const instance = this.instances.get(instanceId);
    if (!instance) return;
    // An engine loading to take this instance over is not needed any more.
    const loading = this.handovers.get(instanceId);
    loading?.controller.abort();
    this.instances.delete(instanceId);
    this.recorded.delete(instanceId);
    this.fronts.delete(instanceId);
    this.defaults.delete(instanceId);
    this.changed();
    await Promise.all([instance.runner.stop(), loading?.ended]);
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
    for (const front of this.fronts.values()) for (const engine of front.engines()) engine.recorded.observe();
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
    const loading = [...this.handovers.values()];
    for (const { controller } of loading) controller.abort();
    const all = [...this.instances.values()];
    this.instances.clear();
    this.recorded.clear();
    this.fronts.clear();
    this.defaults.clear();
    await Promise.all([...all.map((instance) => instance.runner.stop()), ...loading.map(({ ended }) => ended)]);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

function errorCode(error: unknown): ErrorCode {
  return error instanceof ShoalError ? error.code : 'MODEL_FAILED';
}
