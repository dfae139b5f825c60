// Plain-data views the node composes for `GET /state` and the telemetry plane.

import type { InstanceView, NodeDownloadsView } from '../api/control/control.js';
import type { RunnerReport } from '../wire/telemetry.js';
import { MAX_REPORTED_RUNNERS } from '../wire/telemetry.js';
import type { NodeId } from '../common/ids.js';
import type { ClusterState } from '../master/state/state.js';
import { memberName } from '../placement/downloads.js';
import type { InstanceStatus } from '../worker/worker.js';

const REPORT_REASON_MAX_CHARS = 200;

/** This node's runners as the telemetry plane carries them. */
export function runnerReports(instances: readonly InstanceStatus[]): RunnerReport[] {
  return instances.slice(0, MAX_REPORTED_RUNNERS).map((i) => ({
    instanceId: i.instanceId,
    modelId: i.modelId,
    role: i.role,
    state: i.state,
    reason: i.reason === null ? null : i.reason.slice(0, REPORT_REASON_MAX_CHARS),
    inFlight: i.inFlight,
    queued: i.queued,
  }));
}

/** Each placed instance with what the nodes holding its parts report about their runners. */
export function instanceViews(
  state: ClusterState,
  selfId: NodeId,
  local: readonly InstanceStatus[],
  runnersOf: (nodeId: NodeId) => { runners: RunnerReport[] } | null,
  downloads: Record<string, NodeDownloadsView> = {},
): InstanceView[] {
  const mine = new Map<string, InstanceStatus>(local.map((i) => [i.instanceId, i]));
  return Object.values(state.instances)
    .sort((a, b) => a.createdIdx - b.createdIdx)
    .map((instance) => ({
      instanceId: instance.instanceId,
      modelId: instance.modelId,
      shape: instance.shape,
      createdAt: new Date(instance.createdAtMs).toISOString(),
      contextTokens: instance.contextTokens,
      parallel: instance.parallel,
      // The instance records 0 for no prediction; the view says so rather than show a number.
      predictedDecodeTokPerS: instance.predictedDecodeTokPerS > 0 ? instance.predictedDecodeTokPerS : null,
      warnings: instance.warnings,
      placements: instance.placements.map((p) => ({ nodeId: p.nodeId, role: p.role, backend: p.backend, layerCount: p.layerCount, tensorSplit: p.tensorSplit, estimatedBytes: p.estimatedBytes })),
      runners: instance.placements.map((p) => {
        const report = p.nodeId === selfId ? mine.get(instance.instanceId) : runnersOf(p.nodeId)?.runners.find((r) => r.instanceId === instance.instanceId);
        return report
          ? { nodeId: p.nodeId, role: p.role, state: report.state, reason: report.reason, inFlight: report.inFlight, queued: report.queued }
          : { nodeId: p.nodeId, role: p.role, state: 'unknown' as const, reason: instance.awaitingApproval ? 'waits for the approval of its downloads' : 'no report from this node yet', inFlight: 0, queued: 0 };
      }),
      awaitingApproval: instance.awaitingApproval?.map((d) => ({ ...d, name: memberName(state, d.nodeId) })) ?? null,
      // Where a part waits for its model, that node's download of it.
      downloads: [...new Set(instance.placements.map((p) => p.nodeId))].flatMap((nodeId) =>
        (downloads[nodeId]?.downloads ?? []).filter((d) => d.modelId === instance.modelId).map((d) => ({ ...d, nodeId })),
      ),
    }));
}
