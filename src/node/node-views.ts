// Plain-data views the node composes for `GET /state` and the telemetry plane, and the wait for a
// model download a serving node needs before it can start its part.

import { ShoalError } from '../common/errors.js';
import type { InstanceView } from '../api/control/control.js';
import type { RunnerReport } from '../master/core/messages.js';
import { MAX_REPORTED_RUNNERS } from '../master/core/messages.js';
import type { NodeId } from '../common/ids.js';
import type { ClusterState } from '../master/state/state.js';
import type { InstanceStatus } from '../worker/worker.js';
import type { ModelsService } from '../models/service.js';

const REPORT_REASON_MAX_CHARS = 200;
/** How often a serving node checks on a download it waits for. */
const DOWNLOAD_POLL_MS = 500;

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
      predictedDecodeTokPerS: instance.predictedDecodeTokPerS,
      warnings: instance.warnings,
      placements: instance.placements.map((p) => ({ nodeId: p.nodeId, role: p.role, backend: p.backend, layerCount: p.layerCount, tensorSplit: p.tensorSplit })),
      runners: instance.placements.map((p) => {
        const report = p.nodeId === selfId ? mine.get(instance.instanceId) : runnersOf(p.nodeId)?.runners.find((r) => r.instanceId === instance.instanceId);
        return report
          ? { nodeId: p.nodeId, role: p.role, state: report.state, reason: report.reason, inFlight: report.inFlight, queued: report.queued }
          : { nodeId: p.nodeId, role: p.role, state: 'unknown' as const, reason: 'no report from this node yet', inFlight: 0, queued: 0 };
      }),
    }));
}

/** Starts (or joins) the hub download of `modelId` and resolves with the file once it is verified. */
export async function waitForDownload(models: ModelsService, modelId: string, signal: AbortSignal): Promise<string> {
  const { download } = await models.pull(modelId);
  for (;;) {
    const now = models.getDownload(download.id);
    if (now.state === 'done' && now.path !== null) return now.path;
    if (now.state === 'failed' || now.state === 'cancelled') {
      throw new ShoalError('MODEL_FAILED', `downloading ${modelId} ${now.state}: ${now.error?.message ?? 'no reason given'}`);
    }
    if (signal.aborted) throw new ShoalError('CANCELLED', `stopped waiting for the download of ${modelId}`);
    await new Promise((resolve) => setTimeout(resolve, DOWNLOAD_POLL_MS));
  }
}
