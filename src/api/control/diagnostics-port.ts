// What the diagnostics routes (diagnostics-routes.ts) need of the node: src/node/node.ts fills it from
// src/diagnostics/ (node-diagnostics.ts, cluster-diagnostics.ts), so the routes never import a shell.

import type { ClusterDiagnostics, NodeDiagnostics, Timeline } from '../../wire/diagnostics.js';
import type { TimelineQuery } from '../../diagnostics/timeline.js';

export interface DiagnosticsControl {
  /** This node: runners and their recorders, its moments, telemetry pressure, data-plane streams, build. */
  node(): NodeDiagnostics;
  /** Every member's, asked in parallel with a deadline, with clock offsets and a version-mismatch reason. */
  cluster(): Promise<ClusterDiagnostics>;
  /** Every member's recorders merged on this node's clock. */
  timeline(query: TimelineQuery): Promise<Timeline>;
}
