import type { Health } from '../api/server.js';
import type { NodeId } from '../common/ids.js';
import type { InstanceStatus } from '../worker/worker.js';

/** What degrades a node that still serves: its event log cannot be written (a full disk). */
export interface Degradation {
  text: string;
  remediation: string;
}

/**
 * `GET /healthz`: ready when the node is not stopping and every runner it holds is ready; otherwise
 * the reason names each runner that is not (a load balancer or a script waits on this). A node that
 * serves but cannot persist cluster decisions is still ready (200) with `status: 'degraded'` and why.
 */
export function nodeHealth(
  node: { name: string; nodeId: NodeId; stopping: boolean },
  instances: readonly InstanceStatus[],
  degraded: readonly Degradation[] = [],
): Health {
  const notReady = instances.filter((i) => i.state !== 'ready');
  const reason = node.stopping
    ? 'the node is stopping'
    : notReady.length > 0
      ? notReady.map((i) => `${i.modelId}: ${i.reason ?? i.state}`).join('; ')
      : null;
  return {
    ok: reason === null,
    status: reason !== null ? 'unavailable' : degraded.length > 0 ? 'degraded' : 'ok',
    reason,
    degraded: [...degraded],
    name: node.name,
    nodeId: node.nodeId,
    models: instances.map((i) => ({
      id: i.modelId,
      instanceId: i.instanceId,
      backend: i.backend,
      state: i.state,
      reason: i.reason,
      pid: i.pid,
      restarts: i.restarts,
      inFlight: i.inFlight,
      queued: i.queued,
    })),
  };
}
