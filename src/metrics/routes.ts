import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { z } from 'zod';
import type { StatusView } from '../api/control/control.js';
import { parseBody } from '../api/validation.js';
import { ShoalError } from '../common/errors.js';
import type { ClusterMetrics, NodeSeriesStatus } from './cluster.js';
import { resolveNode } from './nodes.js';
import { SAMPLE_INTERVAL_MS, SERIES_SAMPLES, TTFT_WINDOW_MS, type Sample } from './series.js';

/** `GET /metrics`: Prometheus text format. No token: like /healthz it says nothing secret, and scrapers are not admins. */
export function prometheusRoute(app: FastifyInstance, registry: Registry): void {
  app.get('/metrics', async (_request, reply) => reply.header('content-type', registry.contentType).header('cache-control', 'no-store').send(await registry.metrics()));
}

const SeriesQuery = z.strictObject({ node: z.string().min(1).max(200).optional() });

export interface SeriesAnswer {
  /** The node id asked for, or "all". */
  node: string;
  intervalMs: number;
  /** The most samples a series holds. */
  maxSamples: number;
  ttftWindowMs: number;
  samples: Sample[];
  /** The nodes the answer is made of, with whether their figures are fresh. */
  nodes: NodeSeriesStatus[];
}

/** `GET /metrics/series?node=<id|name|all>`; the caller registers it behind the admin check. */
export function seriesRoute(app: FastifyInstance, options: { cluster: ClusterMetrics; status: () => StatusView }): void {
  app.get('/metrics/series', async (request): Promise<SeriesAnswer> => {
    const query = parseBody(SeriesQuery, request.query ?? {});
    const base = { intervalMs: SAMPLE_INTERVAL_MS, maxSamples: SERIES_SAMPLES, ttftWindowMs: TTFT_WINDOW_MS };
    if (query.node === 'all') {
      await options.cluster.refreshIfStale();
      const { samples, nodes } = options.cluster.allSeries();
      return { node: 'all', ...base, samples, nodes };
    }
    const node = resolveNode(options.status(), query.node);
    if (!node.isSelf) await options.cluster.refreshIfStale();
    const series = options.cluster.nodeSeries(node.nodeId);
    if (series === null) throw new ShoalError('NOT_FOUND', `${node.name} is not a member of this node's cluster`);
    return { node: node.nodeId, ...base, samples: series.samples, nodes: [series.status] };
  });
}
