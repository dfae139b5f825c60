import { z } from 'zod';
import { ClusterId, NodeId, InstanceId } from '../../common/ids.js';
import { MemberInfo, NICKNAME_MAX_CHARS } from './events.js';
import { InstanceState } from './instances.js';
import { ClusterSettings, defaultSettings } from './settings.js';

/** Most members a cluster holds; also the number of term slots (see election.ts: terms are unique per node). */
export const MAX_MEMBERS = 256;

export const MemberState = z.strictObject({
  ...MemberInfo.shape,
  nickname: z.string().min(1).max(NICKNAME_MAX_CHARS).nullable(),
  /** idx of the record that admitted it: seniority, lower = more senior. */
  admittedIdx: z.number().int().min(1),
  /**
   * Smallest slot free when it was admitted, in [0, MAX_MEMBERS). The terms this node may claim are exactly
   * those ≡ termSlot + 1 (mod MAX_MEMBERS), so two nodes never claim the same term even in two partitions.
   */
  termSlot: z.number().int().min(0).max(MAX_MEMBERS - 1),
  hostPreferred: z.boolean(),
  status: z.enum(['active', 'pruned']),
});
export type MemberState = z.infer<typeof MemberState>;

export const ClusterState = z.strictObject({
  clusterId: ClusterId.nullable(),
  members: z.record(NodeId, MemberState),
  dissolved: z.boolean(),
  /** Model instances the cluster decided to run (docs/DESIGN.md section 7). */
  instances: z.record(InstanceId, InstanceState),
  /** Cluster-wide settings (settings.ts); a snapshot from before settings existed reads as the defaults. */
  settings: ClusterSettings.default(defaultSettings),
});
export type ClusterState = z.infer<typeof ClusterState>;

export function emptyState(): ClusterState {
  return { clusterId: null, members: {}, dissolved: false, instances: {}, settings: defaultSettings() };
}

export function memberOf(state: ClusterState, nodeId: NodeId): MemberState | undefined {
  return Object.hasOwn(state.members, nodeId) ? state.members[nodeId] : undefined;
}

export function instanceOf(state: ClusterState, instanceId: InstanceId): InstanceState | undefined {
  return Object.hasOwn(state.instances, instanceId) ? state.instances[instanceId] : undefined;
}
