import { ShoalError } from '../common/errors.js';
import type { InstanceId, NodeId } from '../common/ids.js';
import { promptImages, type RunnerTask, type TaskEvent } from '../wire/task.js';
import type { Dispatcher, ModelListing } from '../api/dispatch.js';
import type { ModelCapability } from '../wire/capability.js';
import type { InstanceState } from '../master/state/instances.js';
import type { ClusterState } from '../master/state/state.js';
import type { RunnerReport } from '../wire/telemetry.js';
import type { InstanceStatus, Worker } from '../worker/worker.js';
import { PrefixRoutes, prefixKeys } from './prefix-routes.js';
import { chooseRoute, type RouteCandidate } from './routing.js';
import { traceServing } from '../tracing/serving.js';
import type { RequestTrace } from '../tracing/spans.js';
import type { TraceLookup } from '../tracing/tracer.js';

/** What a node's default model offers when another node serves it (it is not in cluster state). */
const DEFAULT_CAPABILITIES: ModelCapability[] = ['chat', 'completion', 'embeddings', 'tools'];

export interface ClusterDispatcherOptions {
  selfId: NodeId;
  /** This node's instances: read for routing, and run in process. */
  worker: Pick<Worker, 'status' | 'get'>;
  state: () => ClusterState;
  /** Another node's runners as last reported, or null. */
  runnersOf: (nodeId: NodeId) => { runners: RunnerReport[] } | null;
  connected: (nodeId: NodeId) => boolean;
  /** Streams a task from a runner on another node over the data plane (typed errors, INSTANCE_LOST); `trace` when the request is traced. */
  remote: (nodeId: NodeId, instanceId: InstanceId, task: RunnerTask, signal: AbortSignal, trace?: RequestTrace) => AsyncIterable<TaskEvent>;
  /** The traced request being dispatched, if any: it gets the `route` span and, on the local path, the serving spans. */
  tracing?: TraceLookup;
  /** Sees each routed task with the instance chosen for it and passes its events on (performance envelopes). */
  observe?: (served: ServingInstance, task: RunnerTask, signal: AbortSignal, events: AsyncIterable<TaskEvent>) => AsyncIterable<TaskEvent>;
}

/** The instance a task was routed to, as the dispatcher knew it then. */
export interface ServingInstance {
  nodeId: NodeId;
  instanceId: InstanceId;
  modelId: string;
  backend: string;
  /** Its requests in flight and queued before this one: live for this node's runners, the last report for another's. */
  load: number;
}

function capabilityFor(task: RunnerTask): ModelCapability {
  if (task.kind === 'embed') return 'embeddings';
  if (task.kind === 'transcribe') return 'transcription';
  if (task.kind === 'count') return task.prompt.kind === 'chat' ? 'chat' : 'completion';
  if (task.tools.length > 0 && task.toolChoice.mode !== 'none') return 'tools';
  return task.prompt.kind === 'chat' ? 'chat' : 'completion';
}

/** Everything a task needs of its model: a prompt with images needs `vision` on top of its own capability. */
export function capabilitiesFor(task: RunnerTask): ModelCapability[] {
  const needed = [capabilityFor(task)];
  if ((task.kind === 'generate' || task.kind === 'count') && promptImages(task.prompt).length > 0) needed.push('vision');
  return needed;
}

function formatParams(count: number | null): string | null {
  if (count === null) return null;
  if (count >= 1e9) return `${(count / 1e9).toFixed(1)}B`;
  if (count >= 1e6) return `${(count / 1e6).toFixed(1)}M`;
  return `${(count / 1e3).toFixed(1)}K`;
}

function localListing(instance: InstanceStatus): ModelListing {
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

/** What placement reserved for an instance: one replica's share, or every part of a pooled one. */
function placedMemory(placed: InstanceState): { bytes: number; gpuBytes: number } {
  const parts = placed.shape === 'pooled' ? placed.placements : placed.placements.slice(0, 1);
  const sum = (list: typeof parts): number => list.reduce((total, p) => total + p.estimatedBytes, 0);
  return { bytes: sum(parts), gpuBytes: sum(parts.filter((p) => !p.backend.endsWith('-cpu'))) };
}

/**
 * Routes each task to a runner anywhere in the cluster (docs/DESIGN.md section 6): this node's own runners
 * directly, another node's over the data plane. Candidates are what runners report (readings), so a
 * node's default model is reachable from every member too; cluster state adds capabilities and windows.
 */
export class ClusterDispatcher implements Dispatcher {
  /** Requests this node has open on each remote runner, keyed `nodeId/instanceId`. */
  private readonly sentOpen = new Map<string, number>();
  /** Which instance last served each prompt, so a conversation's next turn finds its cache again. */
  private readonly prefixes = new PrefixRoutes();

  constructor(private readonly options: ClusterDispatcherOptions) {}

  private candidates(modelId?: string): RouteCandidate[] {
    const { selfId, worker, state, runnersOf, connected } = this.options;
    const out: RouteCandidate[] = [];
    for (const instance of worker.status()) {
      if (modelId !== undefined && instance.modelId !== modelId) continue;
      out.push({
        nodeId: selfId,
        instanceId: instance.instanceId,
        modelId: instance.modelId,
        role: instance.role,
        state: instance.state,
        reason: instance.reason,
        load: instance.inFlight + instance.queued,
        sentOpen: 0,
        local: true,
      });
    }
    for (const member of Object.values(state().members)) {
      if (member.nodeId === selfId || member.status !== 'active' || !connected(member.nodeId)) continue;
      for (const runner of runnersOf(member.nodeId)?.runners ?? []) {
        if (modelId !== undefined && runner.modelId !== modelId) continue;
        out.push({
          nodeId: member.nodeId,
          instanceId: runner.instanceId,
          modelId: runner.modelId,
          role: runner.role,
          state: runner.state,
          reason: runner.reason,
          load: runner.inFlight + runner.queued,
          sentOpen: this.sentOpen.get(`${member.nodeId}/${runner.instanceId}`) ?? 0,
          local: false,
        });
      }
    }
    return out;
  }

  private capabilitiesOf(instanceId: InstanceId, fallback: ModelCapability[]): ModelCapability[] {
    const placed = this.options.state().instances[instanceId];
    return placed ? placed.capabilities : fallback;
  }

  models(): ModelListing[] {
    const listings = new Map<string, ModelListing>();
    const local = new Map(this.options.worker.status().map((i) => [i.instanceId as string, i]));
    for (const c of this.candidates()) {
      if (c.role === 'donor') continue;
      const mine = local.get(c.instanceId);
      const placed = this.options.state().instances[c.instanceId];
      const listing: ModelListing = mine
        ? localListing(mine)
        : {
            id: c.modelId,
            created: Math.floor((placed?.createdAtMs ?? Date.now()) / 1000),
            ready: c.state === 'ready',
            capabilities: this.capabilitiesOf(c.instanceId, DEFAULT_CAPABILITIES),
            contextSize: placed?.contextTokens ?? null,
            details: { family: 'llama', parameterSize: null, quantization: null, sizeBytes: null },
          };
      listing.memory = placed ? placedMemory(placed) : null;
      const known = listings.get(c.modelId);
      // Prefer a ready instance's facts; one ready replica makes the model ready.
      if (!known || (!known.ready && listing.ready)) listings.set(c.modelId, listing);
    }
    return [...listings.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  run(task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    // Decided when the request arrived (tracing/tracer.ts); an untraced one takes no other path.
    const trace = this.options.tracing?.current();
    if (trace === undefined) return this.dispatch(task, signal);
    const span = trace.spans.start('route', trace.rootId, { model: task.model });
    try {
      return this.dispatch(task, signal, trace, span);
    } catch (error) {
      trace.spans.end(span, { error: error instanceof ShoalError ? error.code : 'INTERNAL' });
      throw error;
    }
  }

  private dispatch(task: RunnerTask, signal: AbortSignal, trace?: RequestTrace, routeSpan: string | null = null): AsyncIterable<TaskEvent> {
    const candidates = this.candidates(task.model);
    // Only generation fills a cache worth coming back to.
    const keys = task.kind === 'generate' ? prefixKeys(task) : [];
    const holder = this.prefixes.holder(keys, (r) => candidates.some((c) => c.nodeId === r.nodeId && c.instanceId === r.instanceId));
    const choice = chooseRoute(candidates, holder);
    if (choice.kind === 'none') {
      // Placed, but no runner of it is heard from: its nodes are down (it keeps its place and comes
      // back with them) or it waits for the approval of its downloads. Retry, not "not found".
      const instances = Object.values(this.options.state().instances).filter((i) => i.modelId === task.model);
      if (instances.length > 0) {
        const waiting = instances.find((i) => i.awaitingApproval !== undefined);
        throw new ShoalError(
          'MODEL_LOADING',
          waiting !== undefined
            ? `model '${task.model}' waits for the approval of its downloads: approve with \`shoal models approve ${waiting.instanceId}\` or in the dashboard`
            : `model '${task.model}' is placed, but none of its runners is heard from yet: its nodes are starting it, or down and it serves again when they return (see \`shoal status\`)`,
        );
      }
      const placed = this.models().map((m) => m.id);
      throw new ShoalError(
        'MODEL_NOT_FOUND',
        `model '${task.model}' is not placed on this cluster${placed.length > 0 ? `; placed models: ${placed.join(', ')}` : ''}: place it with \`shoal models launch ${task.model}\``,
        { param: 'model' },
      );
    }
    if (choice.kind === 'loading') throw new ShoalError('MODEL_LOADING', `model '${task.model}' is not ready yet (${choice.reasons.join('; ')}): retry shortly`);
    if (choice.kind === 'failed') throw new ShoalError('MODEL_FAILED', `model '${task.model}' failed on every node (${choice.reasons.join('; ')})`);
    const target = choice.candidate;
    const local = target.local ? this.options.worker.get(target.instanceId) : undefined;
    const capabilities = local?.capabilities ?? this.capabilitiesOf(target.instanceId, DEFAULT_CAPABILITIES);
    const missing = capabilitiesFor(task).find((needed) => !capabilities.includes(needed));
    if (missing !== undefined) {
      const hint = missing === 'vision' ? ': send images to a vision model (its card sets capabilities.vision and names a projector), or send text only' : '';
      throw new ShoalError('CAPABILITY_MISSING', `model '${task.model}' does not support ${missing}; its capabilities are ${capabilities.join(', ')}${hint}`, { param: 'model' });
    }
    trace?.spans.end(routeSpan, { target: target.local ? 'local' : target.nodeId, instanceId: target.instanceId });
    this.prefixes.served(keys, { nodeId: target.nodeId, instanceId: target.instanceId });
    const events = local?.runner.run ? this.runLocal(local.runner.run.bind(local.runner), task, signal, trace) : this.tracked(target, task, signal, trace);
    if (this.options.observe === undefined) return events;
    const backend = local?.backend ?? this.options.state().instances[target.instanceId]?.placements.find((p) => p.nodeId === target.nodeId)?.backend ?? 'unknown';
    return this.options.observe({ nodeId: target.nodeId, instanceId: target.instanceId, modelId: target.modelId, backend, load: target.load }, task, signal, events);
  }

  /** This node's own runner; a traced request gets its serving spans here, under the request's root. */
  private runLocal(run: (task: RunnerTask, signal: AbortSignal) => AsyncIterable<TaskEvent>, task: RunnerTask, signal: AbortSignal, trace?: RequestTrace): AsyncIterable<TaskEvent> {
    const events = run(task, signal);
    return trace === undefined ? events : traceServing(events, trace.spans, trace.rootId);
  }

  private async *tracked(target: RouteCandidate, task: RunnerTask, signal: AbortSignal, trace?: RequestTrace): AsyncIterable<TaskEvent> {
    const key = `${target.nodeId}/${target.instanceId}`;
    this.sentOpen.set(key, (this.sentOpen.get(key) ?? 0) + 1);
    try {
      yield* this.options.remote(target.nodeId, target.instanceId, task, signal, trace);
    } finally {
      const left = (this.sentOpen.get(key) ?? 1) - 1;
      if (left <= 0) this.sentOpen.delete(key);
      else this.sentOpen.set(key, left);
    }
  }
}
