import type { StatusView } from '../api/control/control.js';
import { RESOURCES_STALE_MS, type ResourcesView } from '../cluster/telemetry.js';
import { ShoalError } from '../common/errors.js';
import type { NodeId } from '../common/ids.js';
import type { ClusterState } from '../master/state/state.js';
import type { NodeGpus } from './prometheus.js';

/** Where per-node routes (`/metrics/series`, `/logs`) find the nodes they may ask. */

export interface ResolvedNode {
  nodeId: string;
  name: string;
  isSelf: boolean;
}

/** This node's peers: the other live members (none for a standalone node). */
export function peersOf(status: StatusView): { nodeId: string; name: string }[] {
  if (status.role !== 'member') return [];
  return status.members.filter((m) => m.nodeId !== status.nodeId).map((m) => ({ nodeId: m.nodeId, name: m.nickname ?? m.name }));
}

/**
 * A node by id, name or nickname: this node, or a member of its cluster. Omitted: this node.
 * Throws NOT_FOUND for an unknown node, BAD_REQUEST when a name fits several members.
 */
export function resolveNode(status: StatusView, selector: string | undefined): ResolvedNode {
  const self: ResolvedNode = { nodeId: status.nodeId, name: status.name, isSelf: true };
  if (selector === undefined || selector === '' || selector === status.nodeId) return self;
  const members = status.role === 'member' ? status.members : [];
  const byId = members.find((m) => m.nodeId === selector);
  if (byId) return { nodeId: byId.nodeId, name: byId.nickname ?? byId.name, isSelf: byId.nodeId === status.nodeId };
  const byName = members.filter((m) => m.name === selector || m.nickname === selector);
  if (byName.length === 0 && status.name === selector) return self;
  if (byName.length === 1) {
    const m = byName[0]!;
    return { nodeId: m.nodeId, name: m.nickname ?? m.name, isSelf: m.nodeId === status.nodeId };
  }
  if (byName.length > 1) throw new ShoalError('BAD_REQUEST', `'${selector}' names ${byName.length} members: use the node id (${byName.map((m) => m.nodeId).join(', ')})`);
  throw new ShoalError('NOT_FOUND', `no member is called '${selector}': 'shoal status' lists this node and the members`);
}

/**
 * The GPUs the metrics show: this node's own readings, and each member's from its latest resources
 * report while that is fresh (a member that stopped reporting drops out rather than showing old cards).
 */
export function memberGpus(self: NodeGpus, state: ClusterState, resources: Record<string, ResourcesView>): NodeGpus[] {
  const nameOf = (nodeId: string): string => {
    const member = Object.hasOwn(state.members, nodeId) ? state.members[nodeId as NodeId] : undefined;
    return member ? (member.nickname ?? member.name) : nodeId;
  };
  const others = Object.entries(resources).filter(([nodeId, r]) => nodeId !== self.nodeId && r.ageMs <= RESOURCES_STALE_MS);
  return [self, ...others.map(([nodeId, r]) => ({ nodeId, name: nameOf(nodeId), gpus: r.gpus }))];
}
