// The downloads a plan would start: every node it places a part on that holds no copy of the model
// must fetch one (from a member that holds it, else the hub), and those above the cluster's approval
// threshold wait for an operator's yes ("Download it there?"). Pure.

import type { NodeId } from '../common/ids.js';
import type { PendingDownload } from '../master/state/instances.js';
import type { ClusterState } from '../master/state/state.js';

/** One download a plan needs, as the dry run lists it. */
export interface PlannedDownload {
  nodeId: string;
  /** The member's name (nickname first), null when it is not in the roster. */
  name: string | null;
  bytes: number;
  /** `peer`: a member holds a copy to copy from; else the hub. */
  source: 'hub' | 'peer';
  /** Above the threshold: the placement waits for approval before this node starts it. */
  needsApproval: boolean;
}

export interface DownloadsPlan {
  downloads: PlannedDownload[];
  /** The cluster's `downloadApprovalBytes` the plan was judged against. */
  approvalBytes: number;
  /** Whether a real placement would wait for approval (`shoal models approve`, the dashboard). */
  needsApproval: boolean;
}

export interface DownloadsInput {
  /** The nodes the plan places a part on (a node holding two parts downloads once). */
  nodeIds: readonly string[];
  /** The model's file size. */
  modelBytes: number;
  /** False for a model every node makes itself (built-in): nothing to download anywhere. */
  downloadable: boolean;
  /** Nodes that hold a complete copy now: this node's store and the members' artifacts reports. */
  holders: ReadonlySet<string>;
  approvalBytes: number;
  names: (nodeId: string) => string | null;
}

export function plannedDownloads(input: DownloadsInput): DownloadsPlan {
  const downloads: PlannedDownload[] = [];
  if (input.downloadable) {
    const source = input.holders.size > 0 ? 'peer' : 'hub';
    for (const nodeId of new Set(input.nodeIds)) {
      if (input.holders.has(nodeId)) continue;
      // "Above the configured size": a threshold of 0 asks for every download.
      downloads.push({ nodeId, name: input.names(nodeId), bytes: input.modelBytes, source, needsApproval: input.modelBytes > input.approvalBytes });
    }
  }
  return { downloads, approvalBytes: input.approvalBytes, needsApproval: downloads.some((d) => d.needsApproval) };
}

/** What an instance placed from `plan` records as awaiting approval; undefined when nothing waits. */
export function awaitingApproval(plan: DownloadsPlan): PendingDownload[] | undefined {
  const pending = plan.downloads.filter((d) => d.needsApproval).map((d) => ({ nodeId: d.nodeId as NodeId, bytes: d.bytes, source: d.source }));
  return pending.length > 0 ? pending : undefined;
}

/** A member's display name: its nickname, else its name; null when it is not a member. */
export function memberName(state: ClusterState, nodeId: string): string | null {
  const member = Object.hasOwn(state.members, nodeId) ? state.members[nodeId as NodeId] : undefined;
  return member === undefined ? null : (member.nickname ?? member.name);
}
