import { z } from 'zod';
import { toShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import type { RequestHandler, HandleOptions, RequestOptions } from '../router/index.js';
import { Ring } from './ring.js';
import type { Sampler } from './sampler.js';
import { KEPT_SAMPLES, SAMPLE_INTERVAL_MS, SERIES_SAMPLES, sumSeries, toSample, WireSample, type Sample } from './series.js';

/**
 * `/shoal/metrics/1`: a member asks another for its samples after a sequence number (all of them at
 * first), and keeps them, so the cluster series ("all") and other nodes' series are served from a
 * cache that each refresh tops up with a few new samples instead of the whole history.
 */

export const METRICS_PROTOCOL = '/shoal/metrics/1';
/**
 * Largest answer: KEPT_SAMPLES samples with MAX_TTFTS_PER_SAMPLE first-token times each is at most
 * about 1.2 MB of msgpack; the limit leaves room above that.
 */
export const METRICS_MAX_MESSAGE_BYTES = 2 * 1024 * 1024;
/** How long one node may take to answer before its figures are left out of this refresh. */
export const METRICS_REQUEST_TIMEOUT_MS = 3000;

export const MetricsRequest = z.strictObject({
  /** Samples after this one of `boot`; null (or another boot) for everything kept. */
  afterSeq: z.number().int().nonnegative().nullable(),
  boot: z.string().max(64).nullable(),
});
export type MetricsRequest = z.infer<typeof MetricsRequest>;

export const MetricsAnswer = z.strictObject({
  nodeId: z.string().min(1).max(128),
  boot: z.string().min(1).max(64),
  samples: z.array(WireSample).max(KEPT_SAMPLES),
});
export type MetricsAnswer = z.infer<typeof MetricsAnswer>;

/** The part of the router this needs. */
export interface MetricsDataPlane {
  handle<Req, Res>(protocol: string, handler: RequestHandler<Req, Res>, options?: HandleOptions<Req>): Promise<void>;
  unhandle(protocol: string): Promise<void>;
  request<Res>(nodeId: string, protocol: string, message: unknown, options?: RequestOptions<Res>): Promise<Res>;
}

export interface NodeRef {
  nodeId: string;
  name: string;
}

export interface NodeSeriesStatus extends NodeRef {
  /** Whether the last fetch of this node's samples succeeded (what was fetched before still counts). */
  ok: boolean;
  /** Why it failed, when it did. */
  error: string | null;
  /** Time of its newest sample, when known. */
  newestT: number | null;
}

interface RemoteCache {
  boot: string | null;
  samples: Ring<WireSample>;
  error: string | null;
  fetchedAtMs: number;
}

export interface ClusterMetricsOptions {
  selfId: string;
  selfName: () => string;
  sampler: Sampler;
  /** Null when the node has no cluster plane (only its own series is served). */
  dataPlane: MetricsDataPlane | null;
  /** The other members right now. */
  peers: () => NodeRef[];
  log: Logger;
  requestTimeoutMs?: number;
}

export class ClusterMetrics {
  private readonly remote = new Map<string, RemoteCache>();
  private refreshing: Promise<void> | null = null;

  constructor(private readonly options: ClusterMetricsOptions) {}

  async start(): Promise<void> {
    await this.options.dataPlane?.handle<MetricsRequest, MetricsAnswer>(
      METRICS_PROTOCOL,
      (request) => ({
        nodeId: this.options.selfId,
        boot: this.options.sampler.boot,
        samples: this.options.sampler.wireAfter(request.boot === this.options.sampler.boot ? request.afterSeq : null),
      }),
      { schema: MetricsRequest, maxMessageBytes: METRICS_MAX_MESSAGE_BYTES, maxInboundStreams: 8 },
    );
  }

  async stop(): Promise<void> {
    await this.options.dataPlane?.unhandle(METRICS_PROTOCOL).catch(() => undefined);
  }

  /**
   * Fetches every peer's new samples (one refresh at a time; a caller arriving during one waits for
   * it). A peer that does not answer keeps what was fetched before, marked with the error.
   */
  refresh(): Promise<void> {
    this.refreshing ??= this.fetchAll().finally(() => {
      this.refreshing = null;
    });
    return this.refreshing;
  }

  /** Refreshes unless the cache is younger than half a sample interval. */
  async refreshIfStale(nowMs: number = Date.now()): Promise<void> {
    const peers = this.options.peers();
    const stale = peers.some((p) => {
      const cached = this.remote.get(p.nodeId);
      return cached === undefined || nowMs - cached.fetchedAtMs >= SAMPLE_INTERVAL_MS / 2;
    });
    if (stale) await this.refresh();
  }

  /** One node's series: this node's from the sampler, a peer's from the cache. Null for a node that is not a peer. */
  nodeSeries(nodeId: string): { samples: Sample[]; status: NodeSeriesStatus } | null {
    if (nodeId === this.options.selfId) {
      const samples = this.options.sampler.series();
      return { samples, status: { nodeId, name: this.options.selfName(), ok: true, error: null, newestT: samples.at(-1)?.t ?? null } };
    }
    const peer = this.options.peers().find((p) => p.nodeId === nodeId);
    if (!peer) return null;
    const cached = this.remote.get(nodeId);
    const wire = cached?.samples.toArray() ?? [];
    const samples = wire.slice(Math.max(0, wire.length - SERIES_SAMPLES)).map(toSample);
    return { samples, status: this.statusOf(peer, cached) };
  }

  /** This node and every peer, summed (see sumSeries); the newest `points` buckets. */
  allSeries(points: number = SERIES_SAMPLES): { samples: Sample[]; nodes: NodeSeriesStatus[] } {
    const self: NodeRef = { nodeId: this.options.selfId, name: this.options.selfName() };
    const selfWire = this.options.sampler.wireAfter(null);
    const inputs = [{ nodeId: self.nodeId, samples: selfWire }];
    const nodes: NodeSeriesStatus[] = [{ ...self, ok: true, error: null, newestT: selfWire.at(-1)?.t ?? null }];
    for (const peer of this.options.peers()) {
      const cached = this.remote.get(peer.nodeId);
      const status = this.statusOf(peer, cached);
      nodes.push(status);
      if (cached && cached.samples.size > 0) inputs.push({ nodeId: peer.nodeId, samples: cached.samples.toArray() });
    }
    return { samples: sumSeries(inputs, { points }), nodes };
  }

  /** The newest sample of each peer whose cache has one (for the live push). */
  newestOfPeers(): { nodeId: string; sample: Sample }[] {
    const out: { nodeId: string; sample: Sample }[] = [];
    for (const peer of this.options.peers()) {
      const newest = this.remote.get(peer.nodeId)?.samples.newest();
      if (newest) out.push({ nodeId: peer.nodeId, sample: toSample(newest) });
    }
    return out;
  }

  private statusOf(peer: NodeRef, cached: RemoteCache | undefined): NodeSeriesStatus {
    if (!cached) return { ...peer, ok: false, error: 'not fetched yet', newestT: null };
    return { ...peer, ok: cached.error === null, error: cached.error, newestT: cached.samples.newest()?.t ?? null };
  }

  private async fetchAll(): Promise<void> {
    const { dataPlane } = this.options;
    const peers = this.options.peers();
    const current = new Set(peers.map((p) => p.nodeId));
    for (const nodeId of this.remote.keys()) if (!current.has(nodeId)) this.remote.delete(nodeId);
    if (dataPlane === null) return;
    await Promise.all(peers.map((peer) => this.fetchOne(dataPlane, peer.nodeId)));
  }

  private async fetchOne(dataPlane: MetricsDataPlane, nodeId: string): Promise<void> {
    const cached = this.remote.get(nodeId) ?? { boot: null, samples: new Ring<WireSample>(KEPT_SAMPLES), error: null, fetchedAtMs: 0 };
    this.remote.set(nodeId, cached);
    const afterSeq = cached.samples.newest()?.seq ?? null;
    try {
      const answer = await dataPlane.request<MetricsAnswer>(nodeId, METRICS_PROTOCOL, { afterSeq, boot: cached.boot } satisfies MetricsRequest, {
        schema: MetricsAnswer,
        maxMessageBytes: METRICS_MAX_MESSAGE_BYTES,
        timeoutMs: this.options.requestTimeoutMs ?? METRICS_REQUEST_TIMEOUT_MS,
      });
      if (answer.nodeId !== nodeId) throw new Error(`answered as ${answer.nodeId}`);
      // A new boot means the node restarted: its old samples are another life's.
      if (answer.boot !== cached.boot) cached.samples.clear();
      cached.boot = answer.boot;
      for (const sample of answer.samples) if (sample.seq > (cached.samples.newest()?.seq ?? 0)) cached.samples.push(sample);
      cached.error = null;
    } catch (error) {
      cached.error = toShoalError(error).message;
      this.options.log.debug({ err: error, nodeId }, 'could not fetch metrics from a member');
    }
    cached.fetchedAtMs = Date.now();
  }
}
