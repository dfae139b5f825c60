// What the diagnostics routes of this part (performance-routes.ts) need of the node: the performance
// envelopes (src/diagnostics/envelope.ts) and the capture bundle (src/diagnostics/bundle.ts). The node
// fills it, so the routes never import a shell.

import type { PerformanceView } from '../../wire/diagnostics.js';

export interface PerformanceControl {
  /** The envelopes this node (as API node) has measured, per model, engine and serving node. */
  performance(): PerformanceView;
  /** A `.tar.gz` of this node's diagnostics, redacted, within BUNDLE_MAX_BYTES; `name` is the suggested file name. */
  bundle(): Promise<{ name: string; bytes: Uint8Array }>;
}
