import type { EnginesProvisionView, NodeControl, StatusView } from '../api/control/control.js';
import type { ControlPlane } from '../cluster/control-plane.js';
import { explainHealth } from '../cluster/self-health.js';
import type { NodeTelemetry } from '../cluster/telemetry.js';
import type { PeerModels } from '../models/peer-models.js';
import type { Worker } from '../worker/worker.js';
import { instanceViews } from './node-views.js';

/** The parts `GET /state` reads from. */
export interface StatusParts {
  plane: ControlPlane;
  worker: Worker;
  telemetry: NodeTelemetry;
  peers: PeerModels;
  /** Whether the inference routes ask for an API key. */
  apiKeyRequired: () => boolean;
  /** Where this node's engine provisioning stands (src/doctor/provision.ts). */
  engines: () => EnginesProvisionView;
}

/**
 * The control routes' port: the plane's membership actions, bound (a route calls them detached from
 * the plane), and a status that adds to the plane's what this node's runners, the telemetry plane
 * and the members' model copies say.
 */
export function nodeControl(parts: StatusParts): NodeControl {
  const { plane } = parts;
  return {
    status: () => nodeStatus(parts),
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

function nodeStatus({ plane, worker, telemetry, peers, apiKeyRequired, engines }: StatusParts): StatusView {
  const status = plane.status();
  // Each member's health: what this node sees of it, its build against this one's, what it says of itself.
  const reported = telemetry.reportedHealth();
  return {
    ...status,
    members: status.members.map((m) => ({ ...m, health: explainHealth(m.health, reported[m.nodeId] ?? null, telemetry.build) })),
    // This node's own, also when it is in no cluster (the dashboard then draws it from this).
    health: explainHealth(status.health, reported[plane.nodeId] ?? null, telemetry.build),
    apiKeyRequired: apiKeyRequired(),
    models: worker.status(),
    instances: instanceViews(plane.view().state, plane.nodeId, worker.status(), (nodeId) => telemetry.runnersOf(nodeId), telemetry.downloadsView()),
    resources: telemetry.resourcesView(),
    artifacts: peers.artifactsView(),
    links: telemetry.links(),
    downloads: telemetry.downloadsView(),
    engines: engines(),
  };
}
