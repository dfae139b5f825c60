import type { FastifyInstance } from 'fastify';
import type { StatusView } from '../api/control/control.js';
import { checkAdmin, sendControlError, type AdminToken } from '../api/control/routes.js';
import type { Dispatcher } from '../api/dispatch.js';
import { fromFastifyError } from '../api/fastify-errors.js';
import { sendOpenAIError } from '../api/openai/routes.js';
import type { Logger } from '../common/log.js';
import { shoalVersion } from '../common/version.js';
import { ClusterMetrics, type MetricsDataPlane } from '../metrics/cluster.js';
import { MeteredDispatcher } from '../metrics/metered-dispatcher.js';
import { peersOf } from '../metrics/nodes.js';
import { createNodeMetrics, type NodeGpus, type NodeMetricsExport } from '../metrics/prometheus.js';
import { prometheusRoute, seriesRoute } from '../metrics/routes.js';
import { Sampler } from '../metrics/sampler.js';
import { MAX_TTFTS_PER_SAMPLE } from '../metrics/series.js';
import { SystemProbe, type SystemProbeOptions } from '../metrics/system.js';
import { RequestTracker } from '../metrics/tracker.js';
import { EventsFeed } from './events.js';
import { LogRing } from './log-ring.js';
import type { RotatingLogFile } from '../common/log-file.js';
import { logsRoutes, NodeLogs } from './logs.js';
import { SseHub } from './sse.js';
import { dashboardMissingRoute, dashboardRoutes, defaultDashboardDir, isDashboardBuilt } from './static.js';

/**
 * Everything the node shows about itself: metrics (the metered dispatcher, the sampler, Prometheus,
 * series), recent logs, the live event stream and the web app's files. The node makes one at start,
 * wraps its dispatcher with `meter`, calls `register` before listening and `stop` when it stops.
 */

export interface NodeDashboardOptions {
  log: Logger;
  nodeId: string;
  /** The node's `GET /state` (what `event: state` carries). */
  status: () => StatusView;
  onStateChange: (listener: () => void) => () => void;
  /** The cluster's data plane (the router); null for a node without one: only its own figures then. */
  dataPlane: MetricsDataPlane | null;
  adminToken: AdminToken;
  /** `shoal run --headless`: no web app, the API alone. */
  headless?: boolean;
  /** The lines the logger tees (createLogger's `recent`); without it `/logs` has nothing to show. */
  recentLogs?: LogRing;
  /** The node's log file (createLogger's `file`), for `GET /logs?history=`; without it history is the ring. */
  logFile?: RotatingLogFile;
  /** Default: SHOAL_DASHBOARD_DIR, else <repo>/dashboard/dist. */
  dashboardDir?: string;
  system?: SystemProbeOptions;
  /** Every member's GPUs, for the per-GPU gauges of `/metrics` (none without it). */
  gpus?: () => NodeGpus[];
}

export class NodeDashboard {
  private readonly tracker: RequestTracker;
  private readonly metrics: NodeMetricsExport;
  readonly sampler: Sampler;
  private readonly cluster: ClusterMetrics;
  private readonly logs: NodeLogs;
  private readonly hub = new SseHub();
  private readonly events: EventsFeed;
  private stopped = false;

  private constructor(private readonly options: NodeDashboardOptions) {
    const { log } = options;
    // The exporter reads the tracker's counters only when scraped, after both exist.
    this.metrics = createNodeMetrics({ nodeId: options.nodeId, name: options.status().name, version: shoalVersion() }, () => this.tracker.counters(), options.gpus);
    this.tracker = new RequestTracker({ maxTtftsPerTake: MAX_TTFTS_PER_SAMPLE, random: Math.random, observer: this.metrics.observer });
    this.sampler = new Sampler({ tracker: this.tracker, system: new SystemProbe(options.system) });
    this.sampler.onSample((sample) => this.metrics.updateFromSample(sample));
    const peers = (): { nodeId: string; name: string }[] => peersOf(options.status());
    this.cluster = new ClusterMetrics({
      selfId: options.nodeId,
      selfName: () => options.status().name,
      sampler: this.sampler,
      dataPlane: options.dataPlane,
      peers,
      log: log.child({ part: 'metrics' }),
    });
    this.logs = new NodeLogs({ selfId: options.nodeId, ring: options.recentLogs ?? new LogRing(), file: options.logFile ?? null, dataPlane: options.dataPlane, log });
    this.events = new EventsFeed({
      hub: this.hub,
      selfId: options.nodeId,
      status: options.status,
      onStateChange: options.onStateChange,
      sampler: this.sampler,
      cluster: this.cluster,
      hasPeers: () => peers().length > 0,
      log,
    });
  }

  /** Starts sampling and answers the metrics and logs protocols on the data plane. */
  static async start(options: NodeDashboardOptions): Promise<NodeDashboard> {
    const dashboard = new NodeDashboard(options);
    await dashboard.cluster.start();
    await dashboard.logs.start();
    dashboard.sampler.start();
    dashboard.events.start();
    return dashboard;
  }

  /** The dispatcher the API should use: the same, with every request counted. */
  meter(dispatcher: Dispatcher): Dispatcher {
    return new MeteredDispatcher(dispatcher, this.tracker);
  }

  /** Adds the routes (call before the server listens). */
  async register(app: FastifyInstance): Promise<void> {
    // Open streams would hold the HTTP server's close for ever: end them first.
    app.addHook('preClose', async () => this.hub.closeAll());

    await app.register(async (scope) => {
      scope.setErrorHandler((error, _request, reply) => sendControlError(reply, fromFastifyError(error)));
      prometheusRoute(scope, this.metrics.registry);
    });
    await app.register(async (scope) => {
      scope.setErrorHandler((error, _request, reply) => sendControlError(reply, fromFastifyError(error)));
      scope.addHook('onRequest', async (request) => checkAdmin(request, this.options.adminToken));
      seriesRoute(scope, { cluster: this.cluster, status: this.options.status });
      logsRoutes(scope, { logs: this.logs, hub: this.hub, status: this.options.status, log: this.options.log });
      this.events.routes(scope);
    });
    if (this.options.headless === true) return;
    const dir = this.options.dashboardDir ?? defaultDashboardDir();
    const built = isDashboardBuilt(dir);
    await app.register(async (scope) => {
      scope.setErrorHandler((error, _request, reply) => sendOpenAIError(reply, fromFastifyError(error)));
      if (built) dashboardRoutes(scope, dir);
      else dashboardMissingRoute(scope, dir);
    });
    if (!built) this.options.log.info({ dir }, "the dashboard is not built: 'npm run build' builds it; the API works without it");
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.events.stop();
    this.hub.closeAll();
    this.sampler.stop();
    await this.cluster.stop();
    await this.logs.stop();
  }
}

