// The control plane's node moments (issue #18), read off what the plane's view shows before and after
// a change rather than off the events: a joining node gets its roster in a snapshot, not as
// MemberAdmitted records, and it still has to say when it joined and whom it found. Pure: the shell
// (src/cluster/control-plane.ts) takes a glance after every `stateChanged` effect and records these.

import type { Attributes, MomentKind } from '../wire/diagnostics.js';

/** The few things of a plane's view that its moments are about. */
export interface PlaneGlance {
  role: string;
  term: number;
  masterId: string | null;
  /** The live roster (none once dissolved): name and liveness per node id. */
  members: Record<string, { name: string; status: 'active' | 'pruned' }>;
}

export interface PlaneMoment {
  kind: MomentKind;
  text: string;
  data: Attributes;
}

/** What changed between two glances, as moments, in the order an operator reads them. */
export function planeMoments(selfId: string, before: PlaneGlance, after: PlaneGlance): PlaneMoment[] {
  const out: PlaneMoment[] = [];
  const nameOf = (nodeId: string | null): string => (nodeId === null ? 'nobody' : (after.members[nodeId]?.name ?? before.members[nodeId]?.name ?? nodeId));
  // An election is settled once a term has its master; a term that only started is still being decided.
  if (after.masterId !== null && (after.term !== before.term || after.masterId !== before.masterId)) {
    out.push({ kind: 'election', text: `term ${after.term}: ${nameOf(after.masterId)} is master`, data: { term: after.term, masterId: after.masterId, previousMasterId: before.masterId } });
  }
  if ((before.role === 'master') !== (after.role === 'master')) {
    const now = after.role === 'master';
    out.push({ kind: 'master', text: now ? `this node became master (term ${after.term})` : `this node is no longer master (term ${after.term}, now ${after.role})`, data: { term: after.term, master: now, role: after.role } });
  }
  const count = Object.keys(after.members).length;
  for (const [nodeId, member] of Object.entries(after.members)) {
    const was = before.members[nodeId];
    if (was === undefined) {
      out.push({ kind: 'join', text: nodeId === selfId ? `this node joined the cluster (${count} member(s))` : `${member.name} joined (${count} member(s))`, data: { nodeId, name: member.name, members: count } });
    } else if (was.status === 'active' && member.status === 'pruned') {
      out.push({ kind: 'prune', text: `${member.name} was pruned: no heartbeat`, data: { nodeId, name: member.name, members: count } });
    } else if (was.status === 'pruned' && member.status === 'active') {
      out.push({ kind: 'join', text: `${member.name} returned (${count} member(s))`, data: { nodeId, name: member.name, members: count, returned: true } });
    }
  }
  for (const [nodeId, member] of Object.entries(before.members)) {
    if (after.members[nodeId] !== undefined) continue;
    out.push({ kind: 'leave', text: nodeId === selfId ? 'this node left the cluster' : `${member.name} left (${count} member(s))`, data: { nodeId, name: member.name, members: count } });
  }
  return out;
}
