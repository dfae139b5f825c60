import { mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { basename, extname, isAbsolute } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ShoalError } from '../common/errors.js';
import { ModelId, type InstanceId, type ModelId as ModelIdType, type NodeId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import { modelsDir } from '../common/paths.js';
import { buildServer, type Health } from '../api/server.js';
import type { NodeControl } from '../api/control/control.js';
import { resolveBuiltinModel, BUILTIN_MODEL_IDS } from '../models/builtin-store.js';
import type { GpuChoice } from '../worker/runner/protocol.js';
import { Worker } from '../worker/worker.js';
import { ControlPlane } from '../cluster/control-plane.js';
import { ClusterDispatcher } from '../inference/dispatcher.js';
import { endpointFromEnv, ModelsService, reserveFromEnv } from '../models/service.js';
import { PeerModels } from '../models/peer-models.js';
import { keepBytesFromEnv, ModelKeeper, modelsPlacedOn } from '../models/keeper.js';
import { removeRunFiles, writeRunFiles } from './run-files.js';
import { NodeDashboard } from '../dashboard/node-dashboard.js';
import type { LogRing } from '../dashboard/log-ring.js';
import { NodeTelemetry } from '../cluster/telemetry.js';
import { PlacementService, type PlaceRequest } from '../placement/service.js';
import type { PlaceBody } from '../api/control/placement-routes.js';
import { InstanceHost } from '../worker/instance-host.js';
import { serveInference, runRemote } from '../inference/remote-runner.js';
import { openRpcTunnel, serveRpcTunnel } from '../worker/rpc-tunnel.js';
import { instanceViews, runnerReports, waitForDownload } from './node-views.js';
import { createEngineFactory, offeredBackends } from '../worker/engine-factory.js';
import { reapOrphans } from '../worker/engines/orphans.js';
import { readBandwidthCache } from '../doctor/hardware.js';

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
  /** `--headless`: the API alone, without the dashboard's web app. */
  headless?: boolean;
  /** The ring the logger tees its lines into (createLogger's `recent`), for `GET /logs` and `shoal logs`. */
  recentLogs?: LogRing;
  /** `--memory-budget`: the most memory placement may use on this node; null (default) = what is available. */
  memoryBudgetBytes?: number | null;
  /**
   * Direct sockets for RPC tunnels and model copies (router/direct-socket.ts), asked for and offered.
   * Default: on, unless `SHOAL_DIRECT_SOCKETS=0`; off, the bytes stay on libp2p streams.
   */
  directSockets?: boolean;
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
  // Members that hold a model give it (copy over the data plane) before the hub is asked; started once the plane runs.
  const direct = options.directSockets ?? process.env.SHOAL_DIRECT_SOCKETS !== '0';
  const peers = new PeerModels({ log: log.child({ part: 'models' }), direct });
  const models = await ModelsService.open({
    peers,
    dataDir: options.dataDir,
    log: log.child({ part: 'models' }),
    endpoint: endpointFromEnv(),
    reserveBytes: reserveFromEnv(),
    inUse: () => worker.status().map((i) => i.modelId),
  });

  // Engines orphaned by an earlier crash of this node would hold memory and ports: end them first.
  await reapOrphans(options.dataDir, log.child({ part: 'worker' }));

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
  // Every node serves its default model itself; cluster state places everything else.
  worker.place(model.id, model.path, ['chat', 'completion', 'embeddings', 'tools']);

  const engines = await createEngineFactory({ dataDir: options.dataDir, threads: options.threads, log: log.child({ part: 'worker' }) });
  const bandwidth = await readBandwidthCache(options.dataDir);
  const telemetry = new NodeTelemetry({
    plane,
    log: log.child({ part: 'telemetry' }),
    dataDir: options.dataDir,
    memoryBudgetBytes: options.memoryBudgetBytes ?? null,
    backends: offeredBackends(engines !== null),
    memoryBandwidthBytesPerS: bandwidth ? bandwidth.gbPerSecond * 1e9 : null,
    runners: () => runnerReports(worker.status()),
    peers: () => Object.keys(plane.view().state.members).filter((id) => id !== plane.nodeId && plane.net.isConnected(id)) as NodeId[],
  });
  worker.onChange(() => telemetry.runnersChanged());
  const connected = (nodeId: string): boolean => plane.net.isConnected(nodeId);
  const placement = new PlacementService({
    dataDir: options.dataDir,
    plane,
    nodes: () => telemetry.clusterNodes(connected),
    downloadedPath: async (id) => (await models.get(id).catch(() => null))?.path ?? null,
    log: log.child({ part: 'placement' }),
  });
  const host = new InstanceHost({
    selfId: plane.nodeId,
    log: log.child({ part: 'worker' }),
    worker,
    placement,
    state: () => plane.view().state,
    isMaster: () => plane.view().role === 'master',
    connected,
    runnersOf: (nodeId) => telemetry.runnersOf(nodeId),
    offerBytes: (excludeBytes) => telemetry.offerNow(excludeBytes),
    modelPath: async (modelId, signal) => {
      const known = await placement.modelFacts(modelId).catch(() => null);
      if (known?.path) return known.path;
      return waitForDownload(models, modelId, signal);
    },
    engines,
    tunnels: { open: (donor, instanceId) => openRpcTunnel(plane.net, donor, instanceId, { log: log.child({ part: 'rpc-tunnel' }), direct }) },
  });
  await serveInference(plane.net, (instanceId, task, signal) => {
    const instance = worker.get(instanceId);
    if (!instance?.runner.run) throw new ShoalError('INSTANCE_LOST', `instance ${instanceId} does not serve requests on this node (it may have been stopped or moved): retry`);
    return instance.runner.run(task, signal);
  });
  await serveRpcTunnel(plane.net, (instanceId: InstanceId) => engines?.donorPort(instanceId) ?? null, { direct });
  plane.onStateChange(() => host.reconcile());
  telemetry.start();
  host.start();
  await peers.start({ plane, models, name });
  // Idle copies beyond the keep budget go at start and when a model stops being used (its instance ended).
  const keeper = new ModelKeeper({
    store: models.store,
    inUse: () => [...worker.status().map((i) => i.modelId), ...modelsPlacedOn(plane.view().state, plane.nodeId)],
    keepBytes: keepBytesFromEnv() ?? null,
    log: log.child({ part: 'models' }),
  });
  plane.onStateChange(() => keeper.check());
  worker.onChange(() => keeper.check());
  await keeper.start();

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
    status: () => ({
      ...plane.status(),
      models: worker.status(),
      instances: instanceViews(plane.view().state, plane.nodeId, worker.status(), (nodeId) => telemetry.runnersOf(nodeId)),
      resources: telemetry.resourcesView(),
      artifacts: peers.artifactsView(),
      links: telemetry.links(),
    }),
  };
  const placementControl = {
    plan: async (body: PlaceBody) => (await placement.plan(placeRequest(body))).result,
    place: (body: PlaceBody) => placement.place(placeRequest(body)),
    end: (instanceId: string) => placement.end(instanceId, 'deleted', 'stopped by an operator'),
  };

  const adminToken = await writeRunFiles(options.dataDir, { pid: process.pid, apiPort: options.apiPort, startedAtMs: Date.now() });
  const dispatcher = new ClusterDispatcher({
    selfId: plane.nodeId,
    worker,
    state: () => plane.view().state,
    runnersOf: (nodeId) => telemetry.runnersOf(nodeId),
    connected,
    remote: (nodeId, instanceId, task, signal) => runRemote(plane.net, nodeId, instanceId, task, signal),
  });
  // Dashboard, metrics and logs (src/dashboard/node-dashboard.ts): counts every request the API dispatches.
  const dashboard = await NodeDashboard.start({ log, nodeId: plane.nodeId, status: control.status, onStateChange: (l) => plane.onStateChange(l), dataPlane: plane.net, adminToken, headless: options.headless, recentLogs: options.recentLogs });
  const app = buildServer({ log, dispatcher: dashboard.meter(dispatcher), health, maxBodyBytes: options.maxBodyBytes, apiKeys: options.apiKeys, control, adminToken, models, placement: placementControl });
  await dashboard.register(app);
  try {
    await app.listen({ port: options.apiPort, host: options.host });
  } catch (error) {
    await dashboard.stop();
    telemetry.stop();
    await host.stop();
    await keeper.stop();
    await peers.stop();
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
  // The token the server checks stays the one written first; only the port changes.
  if (port !== options.apiPort) await writeRunFiles(options.dataDir, { pid: process.pid, apiPort: port, startedAtMs: Date.now() }, adminToken);
  const shownHost = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  const url = `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}`;
  log.info({ url, name, nodeId: plane.nodeId, fingerprint: plane.fingerprint, p2p: plane.p2pAddrs, model: model.id, threads: options.threads }, `Shoal node '${name}' serving on ${url}`);

  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await dashboard.stop();
    telemetry.stop();
    await host.stop();
    await keeper.stop();
    await peers.stop();
    await models.close();
    // Runners first: their streams end with a typed error, so open connections finish and close.
    await worker.stop();
    await app.close();
    await plane.stop();
    await removeRunFiles(options.dataDir);
  };
  return { url, app, worker, plane, stop, [Symbol.asyncDispose]: stop };
}

function placeRequest(body: PlaceBody): PlaceRequest {
  return {
    model: body.model as ModelIdType,
    ...(body.replicas !== undefined ? { replicas: body.replicas } : {}),
    ...(body.exclude !== undefined ? { exclude: body.exclude } : {}),
    ...(body.min_nodes !== undefined ? { minNodes: body.min_nodes } : {}),
    ...(body.context_tokens !== undefined ? { contextTokens: body.context_tokens } : {}),
    ...(body.parallel !== undefined ? { parallel: body.parallel } : {}),
  };
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
