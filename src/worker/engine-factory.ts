// The engines a node can run besides node-llama-cpp, found in the engine cache `shoal doctor --fix` fills.

import type { InstanceId } from '../common/ids.js';
import type { InstanceRunner } from './runner-contract.js';
import type { Logger } from '../common/log.js';
import { deriveBackends, type BackendDerivation, type BackendFacts } from '../doctor/backends.js';
import { findEngine, findEngineBuild, type EngineCompute } from '../doctor/engines.js';
import type { GpuRequest } from '../doctor/hardware.js';
import { LlamaServerRunner } from './engines/llama-server.js';
import { ALL_LAYERS, gpuComputeOf } from './engines/llama-server-args.js';
import type { GpuReading } from '../wire/telemetry.js';
import { RpcDonor, donorDevices } from './engines/rpc-donor.js';
import type { DonorPart, DriverSpec, EngineFactory } from './instance-host.js';
import type { HandoverOutcome, ServedBy, Worker } from './worker.js';
import { chooseDefaultEngine, type EngineRequest } from './default-engine.js';

export interface NodeEngines extends EngineFactory {
  /** The compute the engines were built for (the build's manifest, src/doctor/engines.ts). */
  compute: EngineCompute;
  /** `onChange` fires on every status change (the default model's health follows it at once). */
  llamaServer(spec: DriverSpec & { onChange?: () => void }): InstanceRunner;
  /** The loopback port of this node's rpc donor for `instanceId`, when it runs one and it is up. */
  donorPort(instanceId: InstanceId): number | null;
}

/** The rpc donor ports `/shoal/rpc-tunnel/1` reaches: none on a node whose engines are not built. */
export function donorPorts(engines: NodeEngines | null): (instanceId: InstanceId) => number | null {
  return (instanceId) => engines?.donorPort(instanceId) ?? null;
}

/**
 * Backend tags this node advertises: what it detects and can run, derived by the same function as
 * `shoal doctor`'s "Backends" line (deriveBackends), so the two never disagree: node-llama-cpp's CPU
 * build and each GPU build it loads for (src/worker/gpus.ts), llama-server and rpc for the compute their
 * build was made for (its manifest; CPU when it does not say). A configured list (`--backends`,
 * SHOAL_BACKENDS) replaces them; its conflicts (a tag not detected) come back for the start log.
 */
export function offeredBackends(input: {
  /** This node's managed engines (createEngineFactory), null when they are not built. */
  engines: Pick<NodeEngines, 'compute'> | null;
  llamaCpp: BackendFacts['llamaCpp'];
  gpuRequest: GpuRequest;
  override: string[] | null;
  nvidiaDevicePresent: boolean;
  /** The whisper.cpp binding loads here (whisperBindingLoads); absent: it was not looked for. */
  whisperLoaded?: boolean;
}): BackendDerivation {
  const managed = { built: input.engines !== null, runs: input.engines !== null, compute: input.engines?.compute ?? null };
  return deriveBackends({
    llamaCpp: input.llamaCpp,
    engines: { 'llama-server': managed, 'ggml-rpc-server': managed },
    gpuRequest: input.gpuRequest,
    override: input.override,
    nvidiaDevicePresent: input.nvidiaDevicePresent,
    ...(input.whisperLoaded !== undefined ? { whisperLoaded: input.whisperLoaded } : {}),
  });
}

/** Null when `llama-server` or `ggml-rpc-server` is not built here (the node then offers llama_cpp only). */
export async function createEngineFactory(options: { dataDir: string; threads: number; log: Logger }): Promise<NodeEngines | null> {
  const [server, rpc, build] = await Promise.all([findEngine('llama-server'), findEngine('ggml-rpc-server'), findEngineBuild()]);
  if (server === null || rpc === null || build === null) {
    options.log.info('llama-server / ggml-rpc-server are not built: this node offers llama_cpp only (run `shoal doctor --fix` to build them)');
    return null;
  }
  const donors = new Map<InstanceId, RpcDonor>();
  const donorBase = (part: DonorPart | undefined): { binaryPath: string; dataDir: string; threads: number; devices: string[] } => ({
    binaryPath: rpc,
    dataDir: options.dataDir,
    threads: options.threads,
    // No part (not from a placement): the binary's choice, every GPU it was built for, else the CPU.
    devices: part === undefined ? [] : donorDevices(part, build.manifest.compute),
  });
  return {
    compute: build.manifest.compute,
    llamaServer: (spec: DriverSpec & { onChange?: () => void }) =>
      new LlamaServerRunner({
        binaryPath: server,
        dataDir: options.dataDir,
        modelPath: spec.modelPath,
        threads: options.threads,
        contextTokens: spec.contextTokens,
        parallel: spec.parallel,
        ...(spec.kvCacheType !== undefined ? { kvCacheType: spec.kvCacheType } : {}),
        ...(spec.flashAttention !== undefined ? { flashAttention: spec.flashAttention } : {}),
        embeddings: spec.capabilities.includes('embeddings'),
        ...(spec.rpcServers.length > 0 ? { rpcServers: spec.rpcServers, gpuLayers: 999 } : {}),
        ...(spec.gpuLayers !== undefined ? { gpuLayers: spec.gpuLayers } : {}),
        ...(spec.devices !== undefined && spec.devices.length > 0 ? { devices: spec.devices } : {}),
        ...(spec.draft !== undefined ? { draft: spec.draft } : {}),
        ...(spec.projectorPath !== undefined ? { projectorPath: spec.projectorPath } : {}),
        ...(spec.gpuLayers !== undefined && spec.gpuLayers > 0 ? { gpu: build.manifest.compute } : {}),
        ...(spec.tensorSplit !== null ? { tensorSplit: spec.tensorSplit } : {}),
        log: options.log.child({ instanceId: spec.instanceId, modelId: spec.modelId, engine: 'llama-server' }),
        ...(spec.onChange ? { onChange: spec.onChange } : {}),
      }),
    rpcDonor: (instanceId: InstanceId, part?: DonorPart) => {
      const donor = new RpcDonor({ ...donorBase(part), log: options.log.child({ instanceId, engine: 'ggml-rpc-server' }) });
      donors.set(instanceId, donor);
      return {
        status: () => donor.status(),
        whenReady: (signal?: AbortSignal) => donor.whenReady(signal),
        stderrTail: () => donor.stderrTail(),
        port: () => donor.port,
        stop: async () => {
          donors.delete(instanceId);
          await donor.stop();
        },
      };
    },
    localDonor: (instanceId: InstanceId, part?: DonorPart) => {
      const donor = new RpcDonor({ ...donorBase(part), log: options.log.child({ instanceId, engine: 'ggml-rpc-server', local: true }) });
      return { status: () => donor.status(), whenReady: (signal?: AbortSignal) => donor.whenReady(signal), stderrTail: () => donor.stderrTail(), port: () => donor.port, stop: () => donor.stop() };
    },
    donorPort: (instanceId: InstanceId) => donors.get(instanceId)?.port ?? null,
  };
}

/**
 * The default model served by this node's managed llama-server, one slot per `--parallel`: on its GPU
 * with every layer offloaded when the engines were built for a GPU compute and a device of that compute
 * is detected here (`detected`: src/worker/gpus.ts readings), else on the CPU.
 */
export function servedByLlamaServer(engines: Pick<NodeEngines, 'compute' | 'llamaServer'>, detected: readonly Pick<GpuReading, 'compute'>[] = []): ServedBy {
  const compute = gpuComputeOf(`llama_server-${engines.compute}`);
  const onGpu = compute !== null && detected.some((d) => d.compute === compute);
  return {
    backend: `llama_server-${onGpu ? compute : 'cpu'}`,
    runner: (spec) =>
      engines.llamaServer({ ...spec, contextTokens: spec.contextSize, parallel: spec.sequences, rpcServers: [], tensorSplit: null, ...(onGpu ? { gpuLayers: ALL_LAYERS } : {}) }),
  };
}

/** What the node knows when its engines become ready, to choose the default model's engine again. */
export interface DefaultEngineFacts {
  /** `--engine` / SHOAL_ENGINE as the node was started with. */
  requested: EngineRequest;
  /** node-llama-cpp loads a GPU build here (chooseDefaultEngine's `gpuPresent`). */
  gpuPresent: boolean;
  /** The GPUs detected now (GpuMonitor readings). */
  detected: readonly Pick<GpuReading, 'compute'>[];
}

/**
 * Once the managed engines are ready after the node started (built or downloaded in the background),
 * chooses the default model's engine again as the start would have and, where that is now
 * llama-server, moves the default model onto it without failing or cutting a request
 * (`Worker.handOver`). Never throws: each outcome says whether the instance moved, and why not.
 */
export async function moveDefaultModel(worker: Worker, engines: Pick<NodeEngines, 'compute' | 'llamaServer'>, facts: DefaultEngineFacts, log: Logger): Promise<HandoverOutcome[]> {
  const served = servedByLlamaServer(engines, worker.gpu === false ? [] : facts.detected);
  const choice = chooseDefaultEngine({ requested: facts.requested, llamaServerBuilt: true, gpu: worker.gpu, gpuPresent: facts.gpuPresent, llamaServerOnGpu: served.backend !== 'llama_server-cpu' });
  if (choice.engine !== 'llama_server') {
    log.info(`the default model keeps its engine now that llama-server is ready: ${choice.reason}`);
    return [];
  }
  log.info(`moving the default model onto ${served.backend}: ${choice.reason}`);
  // The worker logs each handover's outcome.
  return worker.moveDefaultTo(served);
}
