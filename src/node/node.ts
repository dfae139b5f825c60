// The composition root: builds a node from its subsystems' parts, starts them in order and stops them
// in the order `composeNode` documents. What the node serves is in control.ts (`GET /state`, membership),
// health.ts (`/healthz`) and node-views.ts; run-files.ts is what it leaves for the CLI.

import { chmod, mkdir } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { DisposeStack } from '../common/dispose-stack.js';
import { ShoalError } from '../common/errors.js';
import type { ModelId, NodeId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import { shoalCommit, shoalVersion } from '../common/version.js';
import { buildServer } from '../api/server.js';
import { resolveDefaultModel } from '../models/default-model.js';
import type { GpuChoice } from '../worker/runner/protocol.js';
import { Worker } from '../worker/worker.js';
import { ControlPlane } from '../cluster/control-plane.js';
import { NodeTelemetry } from '../cluster/telemetry.js';
import { downloadReports } from '../cluster/telemetry-downloads.js';
import { selfHealthProbe } from '../cluster/self-health-probe.js';
import { ClusterDispatcher } from '../inference/dispatcher.js';
import { runRemote, serveLocalInstances } from '../inference/remote-runner.js';
import { TraceStore, traceRetentionFromEnv } from '../tracing/store.js';
import { Tracer } from '../tracing/tracer.js';
import { endpointFromEnv, ModelsService, reserveFromEnv } from '../models/service/service.js';
import { PeerModels } from '../models/peer-models.js';
import { keepBytesFromEnv, ModelKeeper, modelsPlacedOn } from '../models/keeper.js';
import { NodeDashboard } from '../dashboard/node-dashboard.js';
import { memberGpus } from '../metrics/nodes.js';
import type { LogRing } from '../dashboard/log-ring.js';
import type { RotatingLogFile } from '../common/log-file.js';
import { placementControl } from '../placement/control.js';
import { PlacementService } from '../placement/service.js';
import { InstanceHost } from '../worker/instance-host.js';
import { openRpcTunnel, serveRpcTunnel } from '../worker/rpc-tunnel.js';
import { whisperBindingLoads } from '../worker/engines/whisper-runner.js';
import { createEngineFactory, donorPorts, moveDefaultModel, offeredBackends, servedByLlamaServer } from '../worker/engine-factory.js';
import { chooseDefaultEngine, type EngineRequest } from '../worker/default-engine.js';
import { GpuMonitor } from '../worker/gpus.js';
import { gpuUse } from '../worker/gpu-readings.js';
import { reapOrphans } from '../worker/engines/orphans.js';
import { readBandwidthCache } from '../doctor/hardware.js';
import { EngineProvisioner, enginesAtStartState, type ProvisionedEngines } from '../doctor/provision.js';
import { nodeControl } from './control.js';
import { nodeHealth } from './health.js';
import { runnerReports } from './node-views.js';
import { RunFiles } from './run-files.js';
import { DataDirLock } from '../common/data-dir-lock.js';
import { bannerLines } from './banner.js';
import { loadAdminToken, rotateAdminTokenFile } from '../api/control/admin-token.js';
import { settingsControl } from './settings.js';
import { warnIfOpenToNetwork } from '../api/open-warning.js';
import { NodeRecorder } from '../diagnostics/recorder.js';
import { nodeDiagnostics } from '../diagnostics/node-diagnostics.js';
import { ClusterDiagnosticsService, diagnosticsMembers } from '../diagnostics/cluster-diagnostics.js';
import type { NodeDiagnostics } from '../wire/diagnostics.js';
import { EnvelopeStore } from '../diagnostics/envelope.js';
import { EnvelopeMeter } from '../diagnostics/envelope-meter.js';
import { IssuedSecrets, performanceControl } from '../diagnostics/capture.js';
import { EspeakVoice } from '../speech/espeak-voice.js';
import { AudioDecodeThread } from '../speech/stt/audio-decode-thread.js';

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
  /** `--backends` / SHOAL_BACKENDS: the backend tags to advertise instead of the detected ones; null (default) = detected. */
  backends?: string[] | null;
  /** A built-in model id (`shoal/tiny`) or the path of a GGUF file. */
  defaultModel: string;
  /** `--engine`: what serves the default model. Default `auto` (llama-server when built, on the CPU). */
  engine?: EngineRequest;
  contextSize: number;
  sequences: number;
  maxBodyBytes?: number;
  /** Keys inference routes require; empty means open. */
  apiKeys?: string[];
  /** `--cors-origin`: browser origins (normalized, or `*`) allowed on inference routes besides loopback ones and the cluster's. Default none. */
  corsOrigins?: string[];
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
  /** The log file the logger also writes (createLogger's `file`), for `GET /logs?history=`. */
  logFile?: RotatingLogFile;
  /**
   * Called once this node holds the data dir's lock, before it writes there: the data dir's log file
   * may then take this node's lines (a start refused the lock must not write into the holder's log).
   */
  onDataDirLocked?: () => void;
  /** `--memory-budget`: the most memory placement may use on this node; null (default) = what is available. */
  memoryBudgetBytes?: number | null;
  /** `--vram-budget`: the most VRAM placement may use on each GPU of this node; null (default) = its free VRAM. */
  vramBudgetBytes?: number | null;
  /** `--stall-timeout` / SHOAL_STALL_TIMEOUT_S: the hang watchdog's silence limit per generation. Default 60 000. */
  stallTimeoutMs?: number;
  /**
   * Direct sockets for RPC tunnels and model copies (router/direct-socket.ts), asked for and offered.
   * Default: on, unless `SHOAL_DIRECT_SOCKETS=0`; off, the bytes stay on libp2p streams.
   */
  directSockets?: boolean;
  /**
   * `--no-provision` unset: get llama-server / ggml-rpc-server in the background when they are missing
   * (src/doctor/provision.ts), while the node serves on node-llama-cpp. Default false: the CLI turns it
   * on (unless SHOAL_PROVISION=0), so tests and embedders never start a build unasked.
   */
  provision?: boolean;
}

export interface RunningNode extends AsyncDisposable {
  url: string;
  app: FastifyInstance;
  worker: Worker;
  plane: ControlPlane;
  stop(): Promise<void>;
}

/**
 * Starts a node's parts in order and returns it running. Every part, as it starts, pushes its stop
 * onto one stack; `stop` and a start that fails anywhere both run that stack, so they stop the same
 * parts in the same order.
 */
export async function startNode(options: NodeOptions): Promise<RunningNode> {
  // The admin token, the node's key and the event log live here: only the node's own user may look.
  await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
  await chmod(options.dataDir, 0o700);
  // Before anything reads or writes the data dir (identity, event log, orphan reaping, run files).
  const lock = await DataDirLock.acquire(options.dataDir, options.log);
  options.onDataDirLocked?.();
  const stack = new DisposeStack();
  stack.defer(() => lock.release());
  try {
    const model = await resolveDefaultModel(options.defaultModel, options.dataDir, options.log);
    return await composeNode(options, model, stack, lock);
  } catch (error) {
    await stack.disposeAsync().catch((unwindError: unknown) => options.log.error({ err: unwindError }, 'stopping the parts of a failed start failed too'));
    throw error;
  }
}

/**
 * The composition, top to bottom. The stack runs newest first, so the stops are pushed in the reverse
 * of the stop order: dashboard, telemetry, host, keeper, peers, models, voice, worker, HTTP server, plane,
 * run files (then startNode's data dir lock). Where a stop is pushed before its part starts, that
 * stop does nothing for a part that never started.
 */
async function composeNode(options: NodeOptions, model: { id: ModelId; path: string }, stack: DisposeStack, lock: DataDirLock): Promise<RunningNode> {
  const { log, dataDir } = options;
  const name = options.name ?? hostname();
  // The node's flight recorder (issue #18): its parts record their significant moments here.
  const moments = new NodeRecorder(Date.now);
  const direct = options.directSockets ?? process.env.SHOAL_DIRECT_SOCKETS !== '0';
  // Read first, so that a bad value fails the start before anything runs.
  const hubEndpoint = endpointFromEnv();
  const reserveBytes = reserveFromEnv();
  const keepBytes = keepBytesFromEnv() ?? null;
  // The GPUs (src/worker/gpus.ts): a malformed SHOAL_TEST_GPUS fails the start here; sampled on every beat.
  const gpus = await GpuMonitor.start({ gpu: options.gpu, maxThreads: options.threads, log: log.child({ part: 'worker' }) });
  stack.defer(() => gpus.stop());

  // Engines orphaned by an earlier crash of this node would hold memory and ports: end them first.
  await reapOrphans(dataDir, log.child({ part: 'worker' }));

  // Run files go last: the CLI finds the node until everything else has stopped. Written further down.
  const runFiles = new RunFiles(dataDir);
  stack.defer(() => runFiles.remove());

  // The plane stops after every part that talks over it.
  const plane = stack.use(await ControlPlane.start({ log, dataDir, name, p2pPort: options.p2pPort, p2pHost: options.host, mdns: options.mdns, bootstrap: options.bootstrap, moments: (kind, text, data) => moments.record(kind, text, data) }));

  // The HTTP server closes after the runners stopped: their streams end with a typed error, so open
  // connections finish and close first. Only a server that listens is closed (set at the end).
  let listening: FastifyInstance | null = null;
  stack.defer(() => listening?.close());

  const worker = stack.use(
    new Worker({
      log: log.child({ part: 'worker' }),
      threads: options.threads,
      gpu: options.gpu,
      contextSize: options.contextSize,
      sequences: options.sequences,
      ...(options.stallTimeoutMs !== undefined ? { stallTimeoutMs: options.stallTimeoutMs } : {}),
      recordMoment: (kind, text, data) => moments.record(kind, text, data),
    }),
  );
  // The built-in voice (src/speech/): its worker thread starts at the first speech request.
  const voice = stack.use(new EspeakVoice({ log: log.child({ part: 'speech' }) }));
  // Uploads to transcribe decode in their own worker thread, started at the first upload.
  const audioDecoder = stack.use(new AudioDecodeThread({ log: log.child({ part: 'speech' }) }));
  // Every node serves its default model itself, through the fastest engine it has; cluster state places everything else.
  let engines = await createEngineFactory({ dataDir, threads: options.threads, log: log.child({ part: 'worker' }) });
  // What this node advertises: what it detects and can run, derived as `shoal doctor` derives it, or `--backends`.
  // Speech-to-text models run in this process through the whisper.cpp binding, where its prebuilt loads.
  const whisperLoaded = await whisperBindingLoads(log.child({ part: 'worker' }));
  let backends = offeredBackends({ engines, llamaCpp: gpus.llamaCpp, gpuRequest: options.gpu, override: options.backends ?? null, nvidiaDevicePresent: gpus.nvidiaDevicePresent, whisperLoaded });
  for (const conflict of backends.conflicts) log.warn({ backends: backends.tags }, `${conflict.summary}${conflict.remediation ? ` (${conflict.remediation})` : ''}`);
  const llamaCppGpu = backends.detected.some((tag) => tag.startsWith('llama_cpp-') && tag !== 'llama_cpp-cpu');
  const servedBy = engines === null ? null : servedByLlamaServer(engines, options.gpu === false ? [] : gpus.readings());
  const served = chooseDefaultEngine({ requested: options.engine ?? 'auto', llamaServerBuilt: engines !== null, gpu: options.gpu, gpuPresent: llamaCppGpu, llamaServerOnGpu: servedBy !== null && servedBy.backend !== 'llama_server-cpu' });
  worker.place(model.id, model.path, ['chat', 'completion', 'embeddings', 'tools'], served.engine === 'llama_server' ? servedBy : null);

  // Models on disk: the hub store under the data dir, the hub from SHOAL_HF_ENDPOINT / HF_ENDPOINT. Members
  // that hold a model give it before the hub is asked (peers, started below once the plane serves).
  // At a stop the peers stop serving copies, then running downloads end, then the runners stop.
  const peers = new PeerModels({ log: log.child({ part: 'models' }), direct });
  // The drafts running parts loaded are in use with them; the instance host, made below, says which.
  let draftsInUse = (): string[] => [];
  const inUse = (): string[] => [...worker.status().map((i) => i.modelId), ...draftsInUse()];
  const models = await ModelsService.open({ peers, dataDir, log: log.child({ part: 'models' }), endpoint: hubEndpoint, reserveBytes, inUse, moments: (kind, text, data) => moments.record(kind, text, data) });
  stack.defer(() => models.close());
  stack.defer(() => peers.stop());
  // Idle copies beyond the keep budget go at start (below) and when a model stops being used.
  const keeper = new ModelKeeper({
    store: models.store,
    inUse: () => [...inUse(), ...modelsPlacedOn(plane.view().state, plane.nodeId)],
    keepBytes,
    log: log.child({ part: 'models' }),
  });
  stack.defer(() => keeper.stop());

  const bandwidth = await readBandwidthCache(dataDir);
  const telemetry = new NodeTelemetry({
    plane,
    log: log.child({ part: 'telemetry' }),
    dataDir,
    memoryBudgetBytes: options.memoryBudgetBytes ?? null,
    vramBudgetBytes: options.vramBudgetBytes ?? null,
    backends: () => backends.tags,
    gpus: () => gpus.readings(),
    memoryBandwidthBytesPerS: bandwidth ? bandwidth.gbPerSecond * 1e9 : null,
    runners: () => runnerReports(worker.status()),
    peers: () => Object.keys(plane.view().state.members).filter((id) => id !== plane.nodeId && plane.net.isConnected(id)) as NodeId[],
    downloads: () => downloadReports(models.listDownloads().downloads, Date.now()),
    build: { version: shoalVersion(), commit: shoalCommit() },
    // This node's own health reasons (issue #18), published so every member's `/state` shows them.
    selfHealth: selfHealthProbe({
      modelsDir: models.store.root,
      reserveBytes: models.store.reserveBytes,
      persistence: () => plane.health().reasons,
      downloads: () => downloadReports(models.listDownloads().downloads, Date.now()),
      runners: () => runnerReports(worker.status()),
      engineCompute: engines?.compute ?? null,
      gpuPresent: () => gpus.present(),
      moments: () => moments.entries(),
    }),
  });
  worker.onChange(() => telemetry.runnersChanged());
  const connected = (nodeId: string): boolean => plane.net.isConnected(nodeId);
  const placement = new PlacementService({
    dataDir,
    plane,
    nodes: () => telemetry.clusterNodes(connected),
    downloadedPath: async (id) => (await models.get(id).catch(() => null))?.path ?? null,
    holders: (modelId) => Object.entries(peers.artifactsView()).filter(([, held]) => held.models.some((m) => m.modelId === modelId)).map(([nodeId]) => nodeId),
    log: log.child({ part: 'placement' }),
    moments: (kind, text, data) => moments.record(kind, text, data),
  });
  // The host reconciles runners with cluster state and re-places instances of lost nodes.
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
    // A file this node already has (built-in, a file card, a finished download), else the download it starts or joins.
    // A stale copy (another revision, or a vision model's without its projector) is completed first: the card says what serves.
    modelPath: async (modelId, signal) => {
      const known = await placement.modelFacts(modelId).catch(() => null);
      const stale = known?.path ? (await models.get(modelId).catch(() => null))?.state === 'stale' : false;
      if (known?.path && !stale) return known.path;
      return models.waitForDownload(modelId, signal);
    },
    engines,
    tunnels: { open: (donor, instanceId) => openRpcTunnel(plane.net, donor, instanceId, { log: log.child({ part: 'rpc-tunnel' }), direct }) },
  });
  stack.use(host);
  draftsInUse = () => host.draftsInUse();
  // Telemetry (subscribed to the plane since it was made) stops reporting before the host stops its parts.
  stack.defer(() => telemetry.stop());

  // Every node serves both data-plane protocols: registering them also sets its outbound stream limits.
  await serveLocalInstances(plane.net, worker);
  // Read at each tunnel: engines provisioned after the start (onEnginesReady) serve donors too.
  await serveRpcTunnel(plane.net, (instanceId) => donorPorts(engines)(instanceId), { direct });
  // Diagnostics (src/diagnostics/): this node's, served to members on /shoal/diagnostics/1, and the cluster's gathered from them.
  const startedAtMs = Date.now();
  const nodeDiagnosticsNow = (): NodeDiagnostics => nodeDiagnostics({ nodeId: plane.nodeId, name, startedAtMs, nowMs: Date.now, runners: () => worker.diagnostics(), moments: () => moments.entries(), router: plane.net });
  const clusterDiagnostics = new ClusterDiagnosticsService({
    selfId: plane.nodeId,
    net: plane.net,
    local: nodeDiagnosticsNow,
    members: () => diagnosticsMembers(plane.view().state, plane.nodeId, name),
    nowMs: Date.now,
    log: log.child({ part: 'diagnostics' }),
  });
  await clusterDiagnostics.start();
  stack.defer(() => clusterDiagnostics.stop());
  plane.onStateChange(() => host.reconcile());
  telemetry.start();
  host.start();
  await peers.start({ plane, models, name });
  plane.onStateChange(() => keeper.check());
  worker.onChange(() => keeper.check());
  await keeper.start();

  // The admin token outlives restarts (admin-token.ts); the CLI reads it and the API port from the run files.
  let adminTokenValue = await loadAdminToken(dataDir);
  const adminToken = (): string => adminTokenValue;
  let runInfo = { pid: process.pid, apiPort: options.apiPort, startedAtMs: Date.now() };
  await runFiles.write(runInfo, adminTokenValue);
  const rotateAdminToken = async (): Promise<string> => {
    adminTokenValue = await rotateAdminTokenFile(dataDir);
    await runFiles.write(runInfo, adminTokenValue);
    log.info('the admin token was rotated: the old one no longer works');
    return adminTokenValue;
  };
  // Performance envelopes (src/diagnostics/envelope.ts): measured here, as API node, per serving instance.
  const envelopes = new EnvelopeStore();
  const envelopeMeter = new EnvelopeMeter(envelopes);
  // Per-request traces (src/tracing/): recorded while the cluster's `tracing` setting is on, kept under the data dir.
  const traceStore = await TraceStore.open({ dir: join(dataDir, 'traces'), log: log.child({ part: 'tracing' }), retentionMs: traceRetentionFromEnv() });
  traceStore.start();
  stack.defer(() => traceStore.stop());
  const tracer = new Tracer({ nodeId: plane.nodeId, enabled: () => plane.view().state.settings.tracing, store: traceStore, log: log.child({ part: 'tracing' }) });
  let tracingOn = plane.view().state.settings.tracing;
  plane.onStateChange(() => {
    const on = plane.view().state.settings.tracing;
    if (on === tracingOn) return;
    tracingOn = on;
    moments.record('tracing', on ? 'tracing switched on: new requests are traced' : 'tracing switched off', { on });
  });
  const dispatcher = new ClusterDispatcher({
    selfId: plane.nodeId,
    worker,
    state: () => plane.view().state,
    runnersOf: (nodeId) => telemetry.runnersOf(nodeId),
    connected,
    remote: (nodeId, instanceId, task, signal, trace) => runRemote(plane.net, nodeId, instanceId, task, signal, { trace }),
    tracing: tracer,
    observe: (served, task, signal, events) => envelopeMeter.observe(served, task, signal, events),
  });
  // The join codes this node issues are remembered, so a capture bundle can redact them.
  const issuedSecrets = new IssuedSecrets();
  // Engine provisioning (src/doctor/provision.ts) starts once the node serves, below.
  let provisioner: EngineProvisioner | null = null;
  const enginesAtStart = enginesAtStartState(engines);
  const control = issuedSecrets.watch(nodeControl({ plane, worker, telemetry, peers, engines: () => provisioner?.state() ?? enginesAtStart, apiKeyRequired: () => (options.apiKeys ?? []).some((k) => k !== '') || plane.view().state.settings.apiKeyDigests.length > 0 }));
  // Dashboard, metrics and logs (src/dashboard/node-dashboard.ts): counts every request the API
  // dispatches; its live streams end first at a stop.
  const dashboard = await NodeDashboard.start({
    log,
    nodeId: plane.nodeId,
    status: control.status,
    onStateChange: (l) => plane.onStateChange(l),
    dataPlane: plane.net,
    adminToken,
    headless: options.headless,
    recentLogs: options.recentLogs,
    logFile: options.logFile,
    system: { readGpu: async () => gpuUse(gpus.readings()) },
    gpus: () => memberGpus({ nodeId: plane.nodeId, name, gpus: gpus.readings() }, plane.view().state, telemetry.resourcesView()),
  });
  stack.defer(() => dashboard.stop());

  let stopping = false;
  const app = buildServer({
    log,
    dispatcher: tracer.wrap(dashboard.meter(dispatcher)),
    health: () => nodeHealth({ name, nodeId: plane.nodeId, stopping }, worker.status(), plane.health().reasons),
    maxBodyBytes: options.maxBodyBytes,
    apiKeys: options.apiKeys,
    corsOrigins: options.corsOrigins,
    settings: { ...settingsControl(plane), rotateAdminToken },
    control,
    adminToken,
    models,
    placement: placementControl(placement),
    traces: tracer,
    diagnostics: { node: nodeDiagnosticsNow, cluster: () => clusterDiagnostics.cluster(), timeline: (query) => clusterDiagnostics.timeline(query) },
    speech: voice,
    audio: audioDecoder,
    performance: performanceControl({
      nodeId: plane.nodeId,
      name,
      dataDir,
      envelopes,
      diagnostics: nodeDiagnosticsNow,
      status: control.status,
      recentLogs: options.recentLogs,
      secrets: () => [adminToken(), ...(options.apiKeys ?? []), ...issuedSecrets.list(), ...[process.env.SHOAL_HF_TOKEN, process.env.HF_TOKEN].filter((t): t is string => t !== undefined && t !== '')],
    }),
  });
  await dashboard.register(app);
  await listen(app, options.apiPort, options.host);
  listening = app;

  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.apiPort;
  // Port 0 asked for any port: the run files say which one (the token stays the one the server checks).
  if (port !== options.apiPort) {
    runInfo = { ...runInfo, apiPort: port };
    await runFiles.write(runInfo, adminTokenValue);
  }
  const shownHost = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  const url = `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}`;
  log.info({ url, name, nodeId: plane.nodeId, fingerprint: plane.fingerprint, p2p: plane.p2pAddrs, model: model.id, threads: options.threads }, `Shoal node '${name}' serving on ${url}`);
  // The engine choice is announced here, with the URLs, rather than when it is made: the first lines tell a user where to go.
  for (const line of bannerLines({ url, headless: options.headless === true, modelId: model.id, engine: served.engine, engineReason: served.reason })) log.info(line);
  await lock.setUrl(url);
  moments.record('start', `serving on ${url}`, { model: model.id, engine: served.engine });
  warnIfOpenToNetwork(log, options.host, (options.apiKeys ?? []).some((k) => k !== '') || plane.view().state.settings.apiKeyDigests.length > 0, port);

  // Engines got after the start: this node's factory and advertised backends follow them.
  const onEnginesReady = async (ready: ProvisionedEngines): Promise<void> => {
    const next = await createEngineFactory({ dataDir, threads: options.threads, log: log.child({ part: 'worker' }) });
    if (next === null || stopping) return;
    engines = next;
    // Placed llama_server / rpc parts may start from now on; the default model and the CPU parts placed
    // on the in-process engine move onto llama-server without failed requests (src/worker/handover.ts).
    // Not awaited: the old engine's drain lasts as long as its longest open request; the moves never
    // throw and the worker logs their outcomes.
    void host.useEngines(next);
    void moveDefaultModel(worker, next, { requested: options.engine ?? 'auto', gpuPresent: llamaCppGpu, detected: gpus.readings() }, log.child({ part: 'worker' }));
    backends = offeredBackends({ engines: next, llamaCpp: gpus.llamaCpp, gpuRequest: options.gpu, override: options.backends ?? null, nvidiaDevicePresent: gpus.nvidiaDevicePresent, whisperLoaded });
    telemetry.publishResources();
    log.info({ backends: backends.tags, source: ready.source }, `llama-server and ggml-rpc-server (${ready.compute}) are in use: this node now advertises ${backends.tags.join(', ')}`);
  };
  if (options.provision === true && engines === null) {
    // After the node serves: a download or low-priority build runs beside it; a stop cancels it first.
    const started = stack.use(new EngineProvisioner({ log: log.child({ part: 'engines' }), ...(options.gpu === false ? { compute: 'cpu' as const } : {}) }).start());
    provisioner = started;
    // A cache hit here is another process's build (`shoal doctor --fix`) finished since the start: new to this node too.
    void started.whenReady().then(async (ready) => {
      if (ready !== null) await onEnginesReady(ready);
    }).catch((error: unknown) => log.warn({ err: error }, 'could not switch to the provisioned engines'));
  }

  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await stack.disposeAsync();
  };
  return { url, app, worker, plane, stop, [Symbol.asyncDispose]: stop };
}

/** Listens on the API port; a port another process holds is the operator's to free, so the error says how. */
async function listen(app: FastifyInstance, port: number, host: string): Promise<void> {
  try {
    await app.listen({ port, host });
  } catch (error) {
    if ((error as { code?: string }).code === 'EADDRINUSE') {
      throw new ShoalError('BAD_REQUEST', `port ${port} is already in use: stop the other process or pass --api-port`, { cause: error });
    }
    throw error;
  }
}
