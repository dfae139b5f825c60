// `GET /diagnostics/node` and this node's answer on `/shoal/diagnostics/1` (issue #18): its runners with
// their recorders and stderr tails, its own moments, telemetry pressure and data-plane streams, and the
// build it runs. A shell over injected getters, so the parts it reads stay where they are.

import { shoalCommit, shoalVersion } from '../common/version.js';
import { directSocketStats, type RouterStats } from '../router/index.js';
import { WIRE_VERSION } from '../wire/version.js';
import type { Attributes, NodeDiagnostics, NodeMoment, RunnerDiagnostics } from '../wire/diagnostics.js';

/** Longest attribute key on the wire (Attributes): longer protocol names are cut to fit. */
const ATTRIBUTE_KEY_MAX_CHARS = 64;
/** Most runners one answer lists (NodeDiagnostics.runners). */
const RUNNERS_MAX = 256;

/** The part of the router diagnostics read: its counters and the streams open on its connections. */
export interface DiagnosticsRouterView {
  stats(): RouterStats;
  readonly libp2p: { getConnections(): readonly { readonly streams: readonly { readonly protocol?: string }[] }[] };
}

export interface NodeDiagnosticsSources {
  nodeId: string;
  name: string;
  /** When this node started (Unix ms), for the uptime. */
  startedAtMs: number;
  nowMs: () => number;
  /** The worker's runners with their flight recorders and stderr tails. */
  runners: () => RunnerDiagnostics[];
  /** This node's own moments, oldest first (NodeRecorder.entries). */
  moments: () => NodeMoment[];
  router: DiagnosticsRouterView;
}

/** The plane of a gossip topic from its name (`shoal/<cluster>/<plane>/v1`), so counters stay per plane, not per cluster id. */
function planeOfTopic(name: string): string {
  const parts = name.split('/');
  return parts.length >= 4 ? (parts[2] ?? 'other') : 'other';
}

/** Telemetry plane pressure: the last-write-wins send queue and what gossip dropped, per plane. */
export function telemetryCounters(stats: RouterStats): Attributes {
  const out: Attributes = {
    queueQueued: stats.telemetry.queued,
    queueSent: stats.telemetry.sent,
    queueReplaced: stats.telemetry.replaced,
    queueDroppedOverflow: stats.telemetry.dropped_overflow,
    queueFailed: stats.telemetry.failed,
  };
  for (const [name, topic] of Object.entries(stats.topics)) {
    const plane = planeOfTopic(name);
    for (const [counter, value] of Object.entries(topic)) {
      const key = `${plane}.${counter}`;
      out[key] = (typeof out[key] === 'number' ? out[key] : 0) + value;
    }
  }
  return out;
}

/** Data-plane counters: connections, streams open now per protocol, inbound streams refused by admission, direct sockets (open now, connected since start). */
export function dataPlaneCounters(router: DiagnosticsRouterView): Attributes {
  const stats = router.stats();
  const out: Attributes = { connections: stats.connections, streamsOpen: 0 };
  let open = 0;
  for (const conn of router.libp2p.getConnections()) {
    for (const stream of conn.streams) {
      open += 1;
      const key = `streams:${stream.protocol ?? '(negotiating)'}`.slice(0, ATTRIBUTE_KEY_MAX_CHARS);
      out[key] = (typeof out[key] === 'number' ? out[key] : 0) + 1;
    }
  }
  out.streamsOpen = open;
  out.refusedStreams = Object.values(stats.refusedStreams).reduce((sum, n) => sum + n, 0);
  out.helloMismatched = stats.hello.mismatched;
  const direct = directSocketStats();
  out.directSocketsOpen = direct.open;
  out.directSocketsConnected = direct.connected;
  return out;
}

export function nodeDiagnostics(sources: NodeDiagnosticsSources): NodeDiagnostics {
  const nowMs = sources.nowMs();
  return {
    nodeId: sources.nodeId,
    name: sources.name,
    version: shoalVersion(),
    commit: shoalCommit(),
    wireVersion: WIRE_VERSION,
    pid: process.pid,
    nowMs,
    uptimeMs: Math.max(0, nowMs - sources.startedAtMs),
    runners: sources.runners().slice(0, RUNNERS_MAX),
    moments: sources.moments(),
    telemetry: telemetryCounters(sources.router.stats()),
    dataPlane: dataPlaneCounters(sources.router),
  };
}
