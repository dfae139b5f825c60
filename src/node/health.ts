import type { Health } from '../api/server.js';
import type { NodeId } from '../common/ids.js';
import type { InstanceStatus } from '../worker/worker.js';

/**
 * `GET /healthz`: ready when the node is not stopping and every runner it holds is ready; otherwise
 * the reason names each runner that is not (a load balancer or a script waits on this).
 */
export function nodeHealth(node: { name: string; nodeId: NodeId; stopping: boolean }, instances: readonly InstanceStatus[]): Health {
  const notReady = instances.filter((i) => i.state !== 'ready');
  const reason = node.stopping
    ? 'the node is stopping'
    : notReady.length > 0
      ? notReady.map((i) => `${i.modelId}: ${i.reason ?? i.state}`).join('; ')
      : null;
  return {
    ok: reason === null,
    reason,
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
