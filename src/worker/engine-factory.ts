// The engines a node can run besides node-llama-cpp, found in the engine cache `shoal doctor --fix` fills.

import type { InstanceId } from '../common/ids.js';
import type { InstanceRunner } from './runner-contract.js';
import type { Logger } from '../common/log.js';
import { findEngine } from '../doctor/engines.js';
import { LlamaServerRunner } from './engines/llama-server.js';
import { RpcDonor } from './engines/rpc-donor.js';
import type { DriverSpec, EngineFactory } from './instance-host.js';
import type { ServedBy } from './worker.js';

export interface NodeEngines extends EngineFactory {
  /** `onChange` fires on every status change (the default model's health follows it at once). */
  llamaServer(spec: DriverSpec & { onChange?: () => void }): InstanceRunner;
  /** The loopback port of this node's rpc donor for `instanceId`, when it runs one and it is up. */
  donorPort(instanceId: InstanceId): number | null;
}

/** The rpc donor ports `/shoal/rpc-tunnel/1` reaches: none on a node whose engines are not built. */
export function donorPorts(engines: NodeEngines | null): (instanceId: InstanceId) => number | null {
  return (instanceId) => engines?.donorPort(instanceId) ?? null;
}

/** Backend tags this node advertises: node-llama-cpp always; llama-server and rpc when built. */
export function offeredBackends(enginesBuilt: boolean): string[] {
  return enginesBuilt ? ['llama_cpp-cpu', 'llama_server-cpu', 'rpc-cpu'] : ['llama_cpp-cpu'];
}

/** Null when `llama-server` or `ggml-rpc-server` is not built here (the node then offers llama_cpp only). */
export async function createEngineFactory(options: { dataDir: string; threads: number; log: Logger }): Promise<NodeEngines | null> {
  const [server, rpc] = await Promise.all([findEngine('llama-server'), findEngine('ggml-rpc-server')]);
  if (server === null || rpc === null) {
    options.log.info('llama-server / ggml-rpc-server are not built: this node offers llama_cpp only (run `shoal doctor --fix` to build them)');
    return null;
  }
  const donors = new Map<InstanceId, RpcDonor>();
  return {
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
        ...(spec.tensorSplit !== null ? { tensorSplit: spec.tensorSplit } : {}),
        log: options.log.child({ instanceId: spec.instanceId, modelId: spec.modelId, engine: 'llama-server' }),
        ...(spec.onChange ? { onChange: spec.onChange } : {}),
      }),
    rpcDonor: (instanceId: InstanceId) => {
      const donor = new RpcDonor({ binaryPath: rpc, dataDir: options.dataDir, threads: options.threads, log: options.log.child({ instanceId, engine: 'ggml-rpc-server' }) });
      donors.set(instanceId, donor);
      return {
        status: () => donor.status(),
        whenReady: (signal?: AbortSignal) => donor.whenReady(signal),
        port: () => donor.port,
        stop: async () => {
          donors.delete(instanceId);
          await donor.stop();
        },
      };
    },
    localDonor: (instanceId: InstanceId) => {
      const donor = new RpcDonor({ binaryPath: rpc, dataDir: options.dataDir, threads: options.threads, log: options.log.child({ instanceId, engine: 'ggml-rpc-server', local: true }) });
      return { status: () => donor.status(), whenReady: (signal?: AbortSignal) => donor.whenReady(signal), port: () => donor.port, stop: () => donor.stop() };
    },
    donorPort: (instanceId: InstanceId) => donors.get(instanceId)?.port ?? null,
  };
}

/** The default model served by this node's managed llama-server, one slot per `--parallel`, CPU only. */
export function servedByLlamaServer(engines: NodeEngines): ServedBy {
  return {
    backend: 'llama_server-cpu',
    runner: (spec) => engines.llamaServer({ ...spec, contextTokens: spec.contextSize, parallel: spec.sequences, rpcServers: [], tensorSplit: null }),
  };
}
