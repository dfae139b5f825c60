import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, extname, isAbsolute } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ShoalError } from '../common/errors.js';
import { ModelId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import { modelsDir } from '../common/paths.js';
import { buildServer, type Health } from '../api/server.js';
import type { NodeControl } from '../api/control/control.js';
import { resolveBuiltinModel, BUILTIN_MODEL_IDS } from '../models/builtin-store.js';
import type { GpuChoice } from '../worker/runner/protocol.js';
import { Worker } from '../worker/worker.js';
import { ControlPlane } from './control-plane.js';
import { LocalDispatcher } from './local-dispatcher.js';
import { endpointFromEnv, ModelsService, reserveFromEnv } from './models-service.js';
import { removeRunFiles, writeRunFiles } from './run-files.js';

export interface NodeOptions {
  log: Logger;
  dataDir: string;
  /** Default 52600. */
  apiPort: number;
  /** Default 0.0.0.0 (all interfaces). */
  host: string;
  /** Default: the machine's hostname. */
  name?: string;
  threads: number;
  gpu: GpuChoice;
  /** A built-in model id (`shoal/tiny`) or the path of a GGUF file. */
  defaultModel: string;
  contextSize: number;
  sequences: number;
  maxBodyBytes?: number;
  /** Keys inference routes require; empty means open. */
  apiKeys?: string[];
  /** libp2p port for the cluster planes. Default 52601. */
  p2pPort: number;
  /** Find other nodes on the LAN by mDNS. Default true. */
  mdns: boolean;
  /** Multiaddrs to dial at start, for networks mDNS does not reach. */
  bootstrap: string[];
}

export interface RunningNode extends AsyncDisposable {
  url: string;
  app: FastifyInstance;
  worker: Worker;
  plane: ControlPlane;
  stop(): Promise<void>;
}

/** Resolves `--default-model` to an id and a file on disk, generating built-in models on first use. */
async function resolveDefaultModel(spec: string, dataDir: string, log: Logger): Promise<{ id: ModelId; path: string }> {
  if (isAbsolute(spec) || spec.endsWith('.gguf')) {
    const id = ModelId.safeParse(basename(spec, extname(spec)));
    if (!id.success) throw new ShoalError('BAD_REQUEST', `cannot derive a model id from the file name of '${spec}'`);
    return { id: id.data, path: spec };
  }
  const started = Date.now();
  const resolved = await resolveBuiltinModel(spec, modelsDir(dataDir));
  if (!resolved) {
    throw new ShoalError('MODEL_NOT_FOUND', `unknown default model '${spec}': built-in models are ${BUILTIN_MODEL_IDS.join(', ')}, or pass the path of a .gguf file`);
  }
  if (resolved.generated) log.info({ modelId: spec, path: resolved.path, ms: Date.now() - started }, 'generated built-in model');
  return { id: resolved.id, path: resolved.path };
}

export async function startNode(options: NodeOptions): Promise<RunningNode> {
  const { log } = options;
  const name = options.name ?? hostname();
  await mkdir(options.dataDir, { recursive: true });
  const model = await resolveDefaultModel(options.defaultModel, options.dataDir, log);
  // Models on disk: the hub store under the data dir, the hub from SHOAL_HF_ENDPOINT / HF_ENDPOINT.
  const models = await ModelsService.open({
    dataDir: options.dataDir,
    log: log.child({ part: 'models' }),
    endpoint: endpointFromEnv(),
    reserveBytes: reserveFromEnv(),
    inUse: () => worker.status().map((i) => i.modelId),
  });

  const plane = await ControlPlane.start({
    log,
    dataDir: options.dataDir,
    name,
    p2pPort: options.p2pPort,
    p2pHost: options.host,
    mdns: options.mdns,
    bootstrap: options.bootstrap,
  });

  const worker = new Worker({
    log: log.child({ part: 'worker' }),
    threads: options.threads,
    gpu: options.gpu,
    contextSize: options.contextSize,
    sequences: options.sequences,
  });
  // A node with no instances places its default model locally.
  worker.place(model.id, model.path, ['chat', 'completion', 'embeddings', 'tools']);

  let stopping = false;
  const health = (): Health => {
    const instances = worker.status();
    const notReady = instances.filter((i) => i.state !== 'ready');
    const reason = stopping
      ? 'the node is stopping'
      : notReady.length > 0
        ? notReady.map((i) => `${i.modelId}: ${i.reason ?? i.state}`).join('; ')
        : null;
    return {
      ok: reason === null,
      reason,
      name,
      nodeId: plane.nodeId,
      models: instances.map((i) => ({
        id: i.modelId,
        instanceId: i.instanceId,
        state: i.state,
        reason: i.reason,
        pid: i.pid,
        restarts: i.restarts,
        inFlight: i.inFlight,
        queued: i.queued,
      })),
    };
  };
  const control = {
    ...bindControl(plane),
    status: () => ({ ...plane.status(), models: worker.status() }),
  };

  const adminToken = await writeRunFiles(options.dataDir, { pid: process.pid, apiPort: options.apiPort, startedAtMs: Date.now() });
  const app = buildServer({ log, dispatcher: new LocalDispatcher(worker), health, maxBodyBytes: options.maxBodyBytes, apiKeys: options.apiKeys, control, adminToken, models });
  try {
    await app.listen({ port: options.apiPort, host: options.host });
  } catch (error) {
    await models.close();
    await worker.stop();
    await plane.stop();
    await removeRunFiles(options.dataDir);
    const code = (error as { code?: string }).code;
    if (code === 'EADDRINUSE') {
      throw new ShoalError('BAD_REQUEST', `port ${options.apiPort} is already in use: stop the other process or pass --api-port`, { cause: error });
    }
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.apiPort;
  if (port !== options.apiPort) await writeRunFiles(options.dataDir, { pid: process.pid, apiPort: port, startedAtMs: Date.now() });
  const shownHost = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  const url = `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}`;
  log.info({ url, name, nodeId: plane.nodeId, fingerprint: plane.fingerprint, p2p: plane.p2pAddrs, model: model.id, threads: options.threads }, `Shoal node '${name}' serving on ${url}`);

  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await models.close();
    // Runners first: their streams end with a typed error, so open connections finish and close.
    await worker.stop();
    await app.close();
    await plane.stop();
    await removeRunFiles(options.dataDir);
  };
  return { url, app, worker, plane, stop, [Symbol.asyncDispose]: stop };
}

/** The plane's control methods, bound, so a route can call them detached from the object. */
function bindControl(plane: ControlPlane): Omit<NodeControl, 'status'> {
  return {
    invite: (target) => plane.invite(target),
    inviteCode: () => plane.inviteCode(),
    join: (code) => plane.join(code),
    approve: (selector) => plane.approve(selector),
    decline: (selector) => plane.decline(selector),
    remove: (target) => plane.remove(target),
    leave: () => plane.leave(),
    dissolve: () => plane.dissolve(),
    nickname: (target, nickname) => plane.nickname(target, nickname),
    makeHost: (target) => plane.makeHost(target),
  };
}
