// What the API needs from the node's tracing (src/tracing/, issue #18): the stored traces for
// `GET /traces`, and a way to mark where a request starts and ends, so that the dispatcher's wrapper
// and the data plane can add their spans to it.

import type { Trace, TraceSummary } from '../../wire/diagnostics.js';

/** The traces this node assembled, as the control routes read them. */
export interface TracesControl {
  /** Newest first, at most `limit`. */
  list(limit: number): TraceSummary[];
  /** One whole trace, or null when this node holds none of that id (never recorded, or pruned). */
  get(traceId: string): Promise<Trace | null>;
}

/** One request the node decided to trace. */
export interface TracedHttpRequest {
  /** Runs `fn` (and everything it starts) as part of this request, so that what it dispatches is traced. */
  enter(fn: () => void): void;
  /** The answer's last byte is out, or the connection closed: the trace is complete. Later calls do nothing. */
  finish(status: number): void;
}

export interface HttpTracing {
  /** Whether to trace a request that just arrived, decided once from the cluster's settings: null when tracing is off. */
  begin(request: { method: string; route: string }): TracedHttpRequest | null;
}
