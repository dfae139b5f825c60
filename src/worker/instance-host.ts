// The worker's shell: keeps this node's runners in step with the instances replicated state places on
// it (assignments.ts decides; this carries it out), guards memory before starting a part, wires pooled
// drivers to their donors through RPC tunnels, and — on the master — re-places instances that lost a node.

import { performance } from 'node:perf_hooks';
import { ShoalError, errorMessage } from '../common/errors.js';
import type { InstanceId, ModelId, NodeId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import type { ModelCapability } from '../wire/capability.js';
import { engineOf, type FlashAttentionMode } from '../models/cards/card.js';
import type { InstancePlacement, InstanceState } from '../master/state/instances.js';
import { tensorSplitOf } from '../placement/plan.js';
import { partOffload, type DraftInput } from './engines/llama-server-args.js';
import { draftFor } from './draft.js';
import { projectorFor } from './projector.js';
import { WhisperRunner } from './engines/whisper-runner.js';
import type { ClusterState } from '../master/state/state.js';
import type { RunnerReport } from '../wire/telemetry.js';
import { assignmentsFor, memoryGuard, nextActions, type Assignment } from './assignments.js';
import type { InstanceRunner } from './runner-contract.js';
import type { Worker } from './worker.js';
import type { PlacementService } from '../placement/service.js';

/** How long a driver waits for its donors to report ready before it gives up on the placement. */
export const DONOR_READY_TIMEOUT_MS = 120_000;
/** A pruned node must stay pruned this long before its instances are re-placed (a minority's pruning heals). */
export const LOST_NODE_GRACE_MS = 5_000;
/** How often the master looks for instances on lost nodes. */
const LOST_SCAN_INTERVAL_MS = 1_000;
/** The engine a CPU part moves onto once the node has llama-server (InstanceHost.moveParts). */
const MOVE_TARGET = 'llama_server-cpu';
/** How long a move waits for the model's file, which a serving part already has on disk. */
const MOVE_MODEL_PATH_TIMEOUT_MS = 10_000;
/** How often the master tries to bring a replicated instance below its count back up (planning reads the disk). */
export const REPLICA_REPAIR_INTERVAL_MS = 5_000;

export interface DriverSpec {
  instanceId: InstanceId;
  modelId: ModelId;
  modelPath: string;
  contextTokens: number;
  parallel: number;
  /** Absent: f16 and auto, the engines' defaults (the node's default model is not placed). */
  kvCacheType?: InstanceState['kvCacheType'];
  flashAttention?: FlashAttentionMode;
  capabilities: ModelCapability[];
  /** `host:port` of each donor, in the plan's device order; empty for a single-node llama-server. */
  rpcServers: string[];
  /** `--tensor-split`, donors then the driver (each GPU of a part its own device); null for one device. */
  tensorSplit: string | null;
  /** The draft model for speculative decoding (the card's runtime.speculative, src/worker/draft.ts); absent: none. */
  draft?: DraftInput;
  /** The card's multimodal projector (`--mmproj`; src/worker/projector.ts); absent: none. */
  projectorPath?: string;
  /** `-ngl` of a part on a GPU backend (partOffload); absent: 0, or all layers with `rpcServers`. */
  gpuLayers?: number;
  /** The part's GPUs by llama.cpp name (`--device`); absent: the binary's choice. */
  devices?: string[];
}

/** What a donor needs of its placement to pick the devices ggml-rpc-server serves (donorDevices). */
export type DonorPart = Pick<InstancePlacement, 'backend' | 'devices'>;

/** Engines other than node-llama-cpp; absent when this node has not built them (`shoal doctor --fix`). */
export interface EngineFactory {
  llamaServer(spec: DriverSpec): InstanceRunner;
  /** Starts a `ggml-rpc-server` on loopback; `port()` is where the tunnel connects once it is up. */
  rpcDonor(instanceId: InstanceId, part?: DonorPart): InstanceRunner & { port(): number | null };
  /**
   * A `ggml-rpc-server` for the driver's own share: on a CPU-only build llama-server does not count the
   * CPU as a device once `--rpc` is given, so the driver's layers go to a local RPC server too.
   */
  localDonor(instanceId: InstanceId, part?: DonorPart): InstanceRunner & { port(): number | null };
}

export interface RpcTunnels {
  /** Opens a local port that reaches `donor`'s rpc server for `instanceId`; `onBroken` fires when the link goes. */
  open(donor: NodeId, instanceId: InstanceId): Promise<{ port: number; close(): Promise<void>; onBroken(listener: () => void): void }>;
}

export interface InstanceHostOptions {
  selfId: NodeId;
  log: Logger;
  worker: Worker;
  placement: PlacementService;
  state: () => ClusterState;
  isMaster: () => boolean;
  connected: (nodeId: NodeId) => boolean;
  runnersOf: (nodeId: NodeId) => { runners: RunnerReport[] } | null;
  /** What this node can offer a part now, not counting `excludeBytes` already committed to it. */
  offerBytes: (excludeBytes: number) => Promise<number>;
  /** The GGUF file of a model on this node, downloading it first when the card is a hub model. */
  modelPath: (modelId: ModelId, signal: AbortSignal) => Promise<string>;
  engines: EngineFactory | null;
  tunnels: RpcTunnels;
}


export class InstanceHost implements AsyncDisposable {
  private readonly starting = new Map<InstanceId, AbortController>();
  /** Resources that live and die with a part beyond its runner (tunnels). */
  private readonly extras = new Map<InstanceId, Array<() => Promise<void>>>();
  /** The speculative draft each part loaded beside its model: in use while the part runs. */
  private readonly drafts = new Map<InstanceId, ModelId>();
  /** Instances this node already asked to re-place or end, so one fault leads to one command. */
  private readonly reported = new Set<InstanceId>();
  /** Master only: when each member was first seen lost. */
  private readonly lostSince = new Map<NodeId, number>();
  /** Master only: replicated instances with a drop or an add in flight, and when an add was last tried. */
  private readonly repairing = new Set<InstanceId>();
  private readonly lastRepairMs = new Map<InstanceId, number>();
  /** Master only: instances on a lost node that nothing else can hold yet (logged once each). */
  private readonly waitingLost = new Set<InstanceId>();
  private chain: Promise<void> = Promise.resolve();
  /** The managed engines; null until they are built (`useEngines` records them once they are). */
  private engines: EngineFactory | null;
  private scanTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly options: InstanceHostOptions) {
    this.engines = options.engines;
  }

  /**
   * Records the managed engines once they are ready after the start (built or downloaded in the
   * background): parts placed from now on can use llama-server and rpc backends, and the parts this
   * node serves on the in-process CPU engine move onto llama-server (`moveParts`); the default model
   * moves through `Worker.moveDefaultModel`. Resolves once every move has ended (never throws).
   */
  async useEngines(engines: EngineFactory): Promise<void> {
    this.engines = engines;
    this.reconcile();
    await this.moveParts(engines);
  }

  /**
   * Moves each full part this node serves on `llama_cpp-cpu` onto `llama_server-cpu` when its card
   * allows it, one at a time, without failing a request (Worker.handOver), then records the move in
   * cluster state (MovePart). Both engines hold the model while the new one loads, so a part moves
   * only when the memory guard admits a second copy; a part whose move fails keeps its engine. Only
   * CPU parts move: on a GPU the in-process engine runs the kernels the node was placed for.
   */
  private async moveParts(engines: EngineFactory): Promise<void> {
    const { worker, log } = this.options;
    const state = this.options.state();
    for (const held of worker.status()) {
      if (this.stopped) return;
      const instance = state.instances[held.instanceId];
      const placement = instance?.placements.find((p) => p.nodeId === this.options.selfId);
      if (held.local || instance === undefined || placement?.role !== 'full' || held.backend !== 'llama_cpp-cpu' || placement.backend !== 'llama_cpp-cpu') continue;
      const card = (await this.options.placement.modelFacts(instance.modelId).catch(() => null))?.card ?? null;
      if (card === null || !card.compatible_backends.includes(MOVE_TARGET)) continue;
      const partLog = log.child({ instanceId: instance.instanceId, modelId: instance.modelId });
      const verdict = memoryGuard(placement.estimatedBytes, await this.options.offerBytes(0));
      if (!verdict.ok) {
        partLog.warn(`${instance.modelId} stays on ${held.backend}: moving it onto llama-server needs room for a second copy while it loads (${verdict.message})`);
        continue;
      }
      let next: InstanceRunner;
      try {
        const modelPath = await this.options.modelPath(instance.modelId, AbortSignal.timeout(MOVE_MODEL_PATH_TIMEOUT_MS));
        next = engines.llamaServer({ ...this.driverBase(instance, modelPath), rpcServers: [], tensorSplit: null });
      } catch (error) {
        partLog.warn(`${instance.modelId} stays on ${held.backend}: ${errorMessage(error)}`);
        continue;
      }
      const outcome = await worker.handOver(instance.instanceId, next, MOVE_TARGET);
      if (outcome.outcome !== 'moved') continue;
      await this.options.placement.movePart(instance.instanceId, MOVE_TARGET).catch((error: unknown) => {
        // The part serves on llama-server whatever the log says; state shows the old engine until a later move or re-placement.
        partLog.warn({ err: error }, `${instance.modelId} moved onto llama-server but cluster state could not record it: ${errorMessage(error)}`);
      });
    }
  }

  start(): void {
    this.reconcile();
    this.scanTimer = setInterval(() => this.scanLostNodes(), LOST_SCAN_INTERVAL_MS);
  }

  /** Call on every state change; actions run one at a time in order. */
  reconcile(): void {
    this.chain = this.chain.then(() => this.step()).catch((error: unknown) => this.options.log.error({ err: error }, 'reconciling instances failed'));
  }

  private async step(): Promise<void> {
    if (this.stopped) return;
    const { worker, selfId } = this.options;
    const assignments = assignmentsFor(this.options.state(), selfId);
    const held = worker.status().map((i) => ({ instanceId: i.instanceId, local: i.local }));
    for (const action of nextActions(assignments, held, new Set(this.starting.keys()))) {
      if (action.type === 'stop') await this.stopPart(action.instanceId);
      else this.startPart(action.assignment);
    }
    // Starts that state dropped while they were loading are abandoned.
    const wanted = new Set<string>(assignments.map((a) => a.instance.instanceId));
    for (const [instanceId, controller] of this.starting) if (!wanted.has(instanceId)) controller.abort();
  }

  private async stopPart(instanceId: InstanceId): Promise<void> {
    this.options.log.info({ instanceId }, 'stopping an instance part: cluster state no longer places it here');
    // Before the detach, whose change makes the keeper look: the draft goes idle with its target.
    this.drafts.delete(instanceId);
    await this.options.worker.detach(instanceId);
    await this.closeExtras(instanceId);
  }

  /** The drafts the parts running here loaded: in use like their targets, so the keep budget never evicts one under its part. */
  draftsInUse(): ModelId[] {
    return [...new Set(this.drafts.values())];
  }

  private async closeExtras(instanceId: InstanceId): Promise<void> {
    this.drafts.delete(instanceId);
    const extras = this.extras.get(instanceId) ?? [];
    this.extras.delete(instanceId);
    await Promise.all(extras.map((close) => close().catch(() => undefined)));
  }

  private startPart(assignment: Assignment): void {
    const { instance, placement } = assignment;
    const controller = new AbortController();
    this.starting.set(instance.instanceId, controller);
    const log = this.options.log.child({ instanceId: instance.instanceId, modelId: instance.modelId, role: placement.role });
    void this.launch(assignment, controller.signal, log)
      .then((runner) => {
        if (controller.signal.aborted) {
          void runner.stop();
          void this.closeExtras(instance.instanceId);
          return;
        }
        this.options.worker.attach({
          instanceId: instance.instanceId,
          modelId: instance.modelId,
          role: placement.role,
          backend: placement.backend,
          capabilities: instance.capabilities,
          placedAt: Math.floor(instance.createdAtMs / 1000),
          local: false,
          runner,
        });
        log.info({ backend: placement.backend }, 'instance part started');
      })
      .catch((error: unknown) => {
        void this.closeExtras(instance.instanceId);
        if (controller.signal.aborted) return;
        log.error({ err: error }, `could not start an instance part: ${errorMessage(error)}`);
      })
      .finally(() => {
        if (this.starting.get(instance.instanceId) === controller) this.starting.delete(instance.instanceId);
        this.reconcile();
      });
  }

  private async launch(assignment: Assignment, signal: AbortSignal, log: Logger): Promise<InstanceRunner> {
    const { instance, placement } = assignment;
    const engine = engineOf(placement.backend);
    const offer = await this.options.offerBytes(placement.estimatedBytes);
    const verdict = memoryGuard(placement.estimatedBytes, offer);
    if (!verdict.ok) {
      log.warn(`memory guard refused this part: ${verdict.message}`);
      await this.once(instance, () => this.options.placement.replace(instance, this.options.selfId, 'refused'));
      throw new ShoalError('PLACEMENT_FAILED', `refused by the memory guard: ${verdict.message}`);
    }
    if (placement.role === 'donor') return this.launchDonor(instance, placement, log);
    let modelPath: string;
    try {
      modelPath = await this.options.modelPath(instance.modelId, signal);
    } catch (error) {
      if (signal.aborted) throw error;
      log.warn(`could not get the model file: ${errorMessage(error)}; re-placing without this node`);
      await this.once(instance, () => this.options.placement.replace(instance, this.options.selfId, 'download-failed'));
      throw error;
    }
    if (engine === 'whisper') {
      return new WhisperRunner({ modelPath, threads: this.options.worker.threads, log, onChange: () => this.options.worker.changed() });
    }
    if (engine === 'llama_cpp') {
      return this.options.worker.llamaCppRunner(instance.instanceId, instance.modelId, modelPath, {
        contextSize: instance.contextTokens,
        sequences: instance.parallel,
        kvCacheType: instance.kvCacheType,
        flashAttention: instance.flashAttention ?? 'auto',
      });
    }
    const engines = this.requireEngines(placement.backend);
    const card = (await this.options.placement.modelFacts(instance.modelId).catch(() => null))?.card ?? null;
    const draft = await draftFor(card, this.options.modelPath, signal, log);
    if (draft !== undefined && card?.runtime.speculative !== undefined) this.drafts.set(instance.instanceId, card.runtime.speculative.draft);
    // Unlike a draft, a missing projector fails the launch: the instance would refuse every image.
    const projectorPath = await projectorFor(card, modelPath, signal);
    const base = { ...this.driverBase(instance, modelPath), ...(projectorPath !== undefined ? { projectorPath } : {}) };
    if (placement.role === 'full') {
      const offload = partOffload(placement);
      return engines.llamaServer({
        ...base,
        ...(draft !== undefined ? { draft } : {}),
        rpcServers: [],
        tensorSplit: offload?.tensorSplit ?? null,
        ...(offload ? { gpuLayers: offload.gpuLayers, devices: offload.devices } : {}),
      });
    }
    return this.launchDriver(instance, placement, base, engines, signal, log, draft);
  }

  private driverBase(instance: InstanceState, modelPath: string): Omit<DriverSpec, 'rpcServers' | 'tensorSplit'> {
    return {
      instanceId: instance.instanceId,
      modelId: instance.modelId,
      modelPath,
      contextTokens: instance.contextTokens,
      parallel: instance.parallel,
      kvCacheType: instance.kvCacheType,
      flashAttention: instance.flashAttention ?? 'auto',
      capabilities: instance.capabilities,
    };
  }

  private requireEngines(backend: string): EngineFactory {
    if (this.engines === null) {
      throw new ShoalError('MODEL_FAILED', `backend ${backend} needs llama-server and ggml-rpc-server, which are not built on this node: run \`shoal doctor --fix\``);
    }
    return this.engines;
  }

  private launchDonor(instance: InstanceState, placement: InstancePlacement, log: Logger): InstanceRunner {
    const donor = this.requireEngines(placement.backend).rpcDonor(instance.instanceId, placement);
    log.info('rpc donor starting');
    return donor;
  }

  private async launchDriver(
    instance: InstanceState,
    placement: InstancePlacement,
    base: Omit<DriverSpec, 'rpcServers' | 'tensorSplit'>,
    engines: EngineFactory,
    signal: AbortSignal,
    log: Logger,
    draft: DraftInput | undefined,
  ): Promise<InstanceRunner> {
    const donors = instance.placements.filter((p) => p.role === 'donor');
    await this.waitForDonors(instance, donors.map((d) => d.nodeId), signal);
    const rpcServers: string[] = [];
    const closers: Array<() => Promise<void>> = [];
    this.extras.set(instance.instanceId, closers);
    for (const donor of donors) {
      const tunnel = await this.options.tunnels.open(donor.nodeId, instance.instanceId);
      closers.push(() => tunnel.close());
      tunnel.onBroken(() => {
        if (this.stopped || this.options.connected(donor.nodeId)) return;
        const current = this.options.state().instances[instance.instanceId];
        if (!current) return;
        log.warn({ donor: donor.nodeId }, 'lost a donor: re-placing the pooled instance');
        void this.once(current, () => this.options.placement.replace(current, donor.nodeId, 'lost'));
      });
      rpcServers.push(`127.0.0.1:${tunnel.port}`);
    }
    // The driver's own share goes through a local donor on its planned GPUs (or CPU), so llama-server
    // sees every part as an RPC device, in the order the split weights are in; no `--device` here, as
    // naming devices would drop the RPC ones.
    const own = engines.localDonor(instance.instanceId, placement);
    closers.push(() => own.stop());
    await own.whenReady(signal);
    rpcServers.push(`127.0.0.1:${own.port()}`);
    // Device order: the donors as placed, then the driver's own server, as the plan's split weights are;
    // a part on several GPUs is one RPC device per GPU, one weight each.
    const tensorSplit = tensorSplitOf(instance.placements);
    log.info({ rpcServers, tensorSplit }, 'pooled driver starting');
    return engines.llamaServer({ ...base, rpcServers, tensorSplit, ...(draft !== undefined ? { draft } : {}) });
  }

  private async waitForDonors(instance: InstanceState, donors: NodeId[], signal: AbortSignal): Promise<void> {
    const deadline = performance.now() + DONOR_READY_TIMEOUT_MS;
    for (;;) {
      const waiting = donors.filter((d) => !this.options.runnersOf(d)?.runners.some((r) => r.instanceId === instance.instanceId && r.state === 'ready'));
      if (waiting.length === 0) return;
      if (signal.aborted) throw new ShoalError('CANCELLED', 'the instance was ended while its donors started');
      if (performance.now() > deadline) {
        throw new ShoalError('MODEL_FAILED', `donors ${waiting.join(', ')} did not report ready within ${DONOR_READY_TIMEOUT_MS / 1000} s`);
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  /** Runs a re-placement for an instance at most once from this node. */
  private async once(instance: InstanceState, run: () => Promise<unknown>): Promise<void> {
    if (this.reported.has(instance.instanceId)) return;
    this.reported.add(instance.instanceId);
    try {
      await run();
    } catch (error) {
      // Another node may have re-placed it first (INSTANCE_NOT_FOUND): that is the outcome wanted.
      this.options.log.warn({ instanceId: instance.instanceId, err: error }, `re-placement not recorded: ${errorMessage(error)}`);
    }
  }

  /**
   * Re-places an instance whose part is on a lost node. When nothing can hold it now it keeps its
   * place (it answers 503 meanwhile and serves again when its node returns) and is tried again
   * every REPLICA_REPAIR_INTERVAL_MS, in case a node that can hold it appears.
   */
  private replaceLost(instance: InstanceState, nodeId: NodeId, now: number): void {
    if (now - (this.lastRepairMs.get(instance.instanceId) ?? Number.NEGATIVE_INFINITY) < REPLICA_REPAIR_INTERVAL_MS) return;
    this.lastRepairMs.set(instance.instanceId, now);
    this.repair(instance, async () => {
      if (await this.options.placement.replace(instance, nodeId, 'lost')) return;
      if (this.waitingLost.has(instance.instanceId)) return;
      this.waitingLost.add(instance.instanceId);
      this.options.log.warn({ instanceId: instance.instanceId, nodeId }, `${instance.modelId} lost its node and no other node can hold it now: it keeps its place and serves again when that node returns or one that can hold it appears`);
    });
  }

  /** One replica change at a time per instance; the next scan sees the state it led to. */
  private repair(instance: InstanceState, run: () => Promise<unknown>): void {
    if (this.repairing.has(instance.instanceId)) return;
    this.repairing.add(instance.instanceId);
    run()
      .catch((error: unknown) => this.options.log.warn({ instanceId: instance.instanceId, err: error }, `replica change not recorded: ${errorMessage(error)}`))
      .finally(() => this.repairing.delete(instance.instanceId));
  }

  /**
   * Master only. A replicated instance that lost a replica drops just that one (the others serve on,
   * untouched) and is brought back to its count on a node that can hold one (a spare, or the lost
   * node once it returns). Any other instance with a part on a node that left or stayed pruned is
   * re-placed (or ended).
   */
  private scanLostNodes(): void {
    if (this.stopped || !this.options.isMaster()) {
      this.lostSince.clear();
      return;
    }
    const state = this.options.state();
    const now = performance.now();
    const lostNow = new Set<NodeId>();
    for (const instance of Object.values(state.instances)) {
      for (const placement of instance.placements) {
        const member = state.members[placement.nodeId];
        if (member !== undefined && member.status === 'active') continue;
        lostNow.add(placement.nodeId);
        const since = this.lostSince.get(placement.nodeId) ?? now;
        this.lostSince.set(placement.nodeId, since);
        // A removed node is gone for good; a pruned one may be a heal away from returning.
        if (member !== undefined && now - since < LOST_NODE_GRACE_MS) continue;
        const survivors = instance.placements.filter((p) => p.nodeId !== placement.nodeId && state.members[p.nodeId]?.status === 'active');
        if (instance.shape === 'replicas' && survivors.length > 0) this.repair(instance, () => this.options.placement.dropReplica(instance, placement.nodeId));
        else this.replaceLost(instance, placement.nodeId, now);
        break;
      }
      const allActive = instance.placements.every((p) => state.members[p.nodeId]?.status === 'active');
      if (instance.shape === 'replicas' && allActive && instance.placements.length < instance.replicas && instance.awaitingApproval === undefined) {
        if (now - (this.lastRepairMs.get(instance.instanceId) ?? Number.NEGATIVE_INFINITY) >= REPLICA_REPAIR_INTERVAL_MS) {
          this.lastRepairMs.set(instance.instanceId, now);
          this.repair(instance, () => this.options.placement.addReplica(instance));
        }
      }
    }
    for (const id of this.lastRepairMs.keys()) if (state.instances[id] === undefined) this.lastRepairMs.delete(id);
    for (const id of this.waitingLost) {
      const instance = state.instances[id];
      if (instance === undefined || instance.placements.every((p) => state.members[p.nodeId]?.status === 'active')) this.waitingLost.delete(id);
    }
    for (const nodeId of this.lostSince.keys()) if (!lostNow.has(nodeId)) this.lostSince.delete(nodeId);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.scanTimer) clearInterval(this.scanTimer);
    for (const controller of this.starting.values()) controller.abort();
    await this.chain;
    await Promise.all([...this.extras.keys()].map((id) => this.closeExtras(id)));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}
