import type { FastifyInstance } from 'fastify';
import type { StatusView } from '../api/control/control.js';
import type { Logger } from '../common/log.js';
import type { ClusterMetrics } from '../metrics/cluster.js';
import type { Sampler } from '../metrics/sampler.js';
import type { Sample } from '../metrics/series.js';
import type { SseClient, SseHub } from './sse.js';

/**
 * `GET /events`: what the dashboard needs live, pushed.
 *
 * - `event: state`, the `GET /state` JSON: on connect, 250 ms after the cluster state changes (changes
 *   closer together are sent once), and with every sample (so at least every 2 s).
 * - `event: metrics`, `{nodeId, sample}`: on connect (when a sample exists) and with every sample:
 *   this node's newest sample first; then, when the node has peers, each peer's newest and the
 *   cluster sum as `nodeId: "all"` (fetched over `/shoal/metrics/1` while anyone is listening).
 */

/** Cluster state changes closer together than this go out as one `state` event. */
export const STATE_DEBOUNCE_MS = 250;

export interface EventsFeedOptions {
  hub: SseHub;
  selfId: string;
  status: () => StatusView;
  onStateChange: (listener: () => void) => () => void;
  sampler: Sampler;
  cluster: ClusterMetrics;
  /** Whether this node has peers right now. */
  hasPeers: () => boolean;
  log: Logger;
}

export class EventsFeed {
  private readonly clients = new Set<SseClient>();
  private readonly unsubscribe: (() => void)[] = [];
  private debounce: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly options: EventsFeedOptions) {}

  start(): void {
    this.unsubscribe.push(this.options.onStateChange(() => this.stateChanged()));
    this.unsubscribe.push(this.options.sampler.onSample(() => void this.tick()));
  }

  stop(): void {
    this.stopped = true;
    for (const off of this.unsubscribe) off();
    this.unsubscribe.length = 0;
    if (this.debounce !== null) clearTimeout(this.debounce);
    this.debounce = null;
    this.clients.clear();
  }

  routes(app: FastifyInstance): void {
    app.get('/events', async (request, reply) => {
      const client = this.options.hub.open(request, reply);
      if (client === null) return reply;
      this.clients.add(client);
      client.onClose(() => this.clients.delete(client));
      client.send('state', this.options.status());
      const newest = this.options.sampler.newest();
      if (newest !== null) client.send('metrics', { nodeId: this.options.selfId, sample: newest });
      return reply;
    });
  }

  private stateChanged(): void {
    if (this.stopped || this.clients.size === 0 || this.debounce !== null) return;
    this.debounce = setTimeout(() => {
      this.debounce = null;
      this.broadcast('state', this.options.status());
    }, STATE_DEBOUNCE_MS);
    this.debounce.unref();
  }

  private async tick(): Promise<void> {
    if (this.stopped || this.clients.size === 0) return;
    const newest = this.options.sampler.newest();
    if (newest !== null) this.broadcast('metrics', { nodeId: this.options.selfId, sample: newest });
    this.broadcast('state', this.options.status());
    if (!this.options.hasPeers()) return;
    try {
      await this.options.cluster.refresh();
    } catch (error) {
      this.options.log.debug({ err: error }, 'events: cluster metrics refresh failed');
      return;
    }
    if (this.stopped || this.clients.size === 0) return;
    for (const { nodeId, sample } of this.options.cluster.newestOfPeers()) this.broadcast('metrics', { nodeId, sample });
    const all = completeNewest(this.options.cluster.allSeries(3).samples);
    if (all) this.broadcast('metrics', { nodeId: 'all', sample: all });
  }

  /** Serialized once, written to every client. */
  private broadcast(event: string, data: unknown): void {
    const payload = JSON.stringify(data);
    for (const client of this.clients) client.send(event, payload);
  }
}

/**
 * The newest cluster-sum point that every recently reporting node is in: nodes sample on their own
 * clocks, so the very newest bucket often lacks a node whose sample for it is not taken yet.
 */
export function completeNewest(samples: readonly Sample[]): Sample | undefined {
  const recent = samples.slice(-3);
  const most = Math.max(0, ...recent.map((s) => s.nodes));
  for (let i = recent.length - 1; i >= 0; i -= 1) if (recent[i]!.nodes === most) return recent[i];
  return undefined;
}
