// The cluster timeline (issue #18): every member's node moments and runner recorder entries merged into
// one time-ordered list on the viewer's clock, the view that shows what happened where when two nodes
// disagree. Pure: the shell (cluster-diagnostics.ts) asks the members and passes their answers in.

import type { MemberDiagnostics, NodeDiagnostics, RunnerEntry, Timeline, TimelineEntry } from '../wire/diagnostics.js';

/** Entries a timeline answer holds when the caller names no `limit`. */
export const TIMELINE_DEFAULT_LIMIT = 1000;
/** Most entries one timeline answer holds (`limit` above it is refused): the newest are kept. */
export const TIMELINE_MAX_LIMIT = 5000;

export interface TimelineQuery {
  /** Only entries after this time (Unix ms on the viewer's clock); null for all that are kept. */
  sinceMs: number | null;
  /** The newest this many entries (of those after `sinceMs`), 1..TIMELINE_MAX_LIMIT. */
  limit: number;
}

/**
 * A member's clock against the viewer's, NTP-style from one exchange: the viewer sent at `t0Ms` and had
 * the answer at `t1Ms` (both its clock), the member stamped `memberNowMs` in between. Assuming the
 * answer was made halfway through, the offset is off by at most half the round trip.
 */
export function estimateClock(t0Ms: number, t1Ms: number, memberNowMs: number): { offsetMs: number; rttMs: number } {
  const rttMs = Math.max(0, t1Ms - t0Ms);
  return { offsetMs: memberNowMs - (t0Ms + t1Ms) / 2, rttMs };
}

/** A build as members compare them: a commit the node could not read counts as a build of its own. */
function buildOf(d: NodeDiagnostics): string {
  return `${d.version} (commit ${d.commit ?? 'unknown'}, wire ${d.wireVersion})`;
}

/**
 * Why the members that answered do not run one build (version, commit and wire version), naming who
 * runs what, or null when they all run the same. Members that did not answer say nothing here.
 */
export function versionMismatch(members: readonly MemberDiagnostics[]): string | null {
  const byBuild = new Map<string, string[]>();
  for (const member of members) {
    if (member.diagnostics === null) continue;
    const build = buildOf(member.diagnostics);
    byBuild.set(build, [...(byBuild.get(build) ?? []), member.name]);
  }
  if (byBuild.size <= 1) return null;
  const parts = [...byBuild.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([build, names]) => `${build} on ${names.join(', ')}`);
  return `members run different builds: ${parts.join('; ')}: run the same Shoal build on every member`;
}

function runnerText(entry: RunnerEntry): string {
  const parts: string[] = [entry.phase];
  if (entry.requestId !== null) parts.push(`request ${entry.requestId}`);
  if (entry.promptTokens !== null) parts.push(`${entry.promptTokens} prompt tokens`);
  if (entry.completionTokens !== null) parts.push(`${entry.completionTokens} completion tokens`);
  if (entry.detail !== null) parts.push(entry.detail);
  return parts.join(', ');
}

/** One member's recorders as timeline entries, moved onto the viewer's clock by its offset. */
function entriesOf(member: MemberDiagnostics, d: NodeDiagnostics): TimelineEntry[] {
  const offsetMs = member.offsetMs ?? 0;
  const out: TimelineEntry[] = d.moments.map((m) => ({
    atMs: m.atMs - offsetMs,
    localAtMs: m.atMs,
    nodeId: member.nodeId,
    nodeName: member.name,
    source: 'node' as const,
    instanceId: null,
    modelId: null,
    kind: m.kind,
    text: m.text,
  }));
  for (const runner of d.runners) {
    for (const e of runner.recorder) {
      out.push({ atMs: e.atMs - offsetMs, localAtMs: e.atMs, nodeId: member.nodeId, nodeName: member.name, source: 'runner', instanceId: runner.instanceId, modelId: runner.modelId, kind: e.phase, text: runnerText(e) });
    }
  }
  return out;
}

/**
 * The merged timeline: entries oldest first on the viewer's clock (a tie keeps node order, then each
 * recorder's own order), only those after `sinceMs`, the newest `limit` of them. Members that could
 * not be read are in `clocks` (reachable false) and add no entries.
 */
export function buildTimeline(viewerNodeId: string, members: readonly MemberDiagnostics[], query: TimelineQuery): Timeline {
  const clocks = members.map((m) => ({ nodeId: m.nodeId, name: m.name, offsetMs: m.offsetMs, rttMs: m.rttMs, reachable: m.reachable }));
  const all: TimelineEntry[] = [];
  for (const member of members) if (member.reachable && member.diagnostics !== null) all.push(...entriesOf(member, member.diagnostics));
  const since = query.sinceMs;
  const kept = since === null ? all : all.filter((e) => e.atMs > since);
  // Array.prototype.sort is stable, so equal times keep member order and each recorder's order.
  kept.sort((a, b) => a.atMs - b.atMs);
  const limit = Math.max(1, Math.min(TIMELINE_MAX_LIMIT, Math.floor(query.limit)));
  return { viewerNodeId, clocks, entries: kept.slice(Math.max(0, kept.length - limit)) };
}
