// What diagnostics say about a node, a runner and a request (issue #18). These travel between members
// (`/shoal/diagnostics/1`, the spans a serving node returns) and to the dashboard, so they are wire
// types: strict and bounded. Times are Unix milliseconds of the clock of the node that recorded them,
// unless a field says otherwise.

import { z } from 'zod';

/** Most entries one runner's flight recorder keeps (oldest dropped first). */
export const RUNNER_RECORDER_ENTRIES = 256;
/** Most entries a node's own flight recorder keeps (oldest dropped first). */
export const NODE_RECORDER_ENTRIES = 1024;
/** Longest text of one recorder entry; longer texts are cut. */
export const RECORDER_TEXT_MAX_CHARS = 500;
/** Most lines of an engine's stderr a runner keeps for diagnostics. */
export const STDERR_TAIL_LINES = 50;
/** Longest stderr line a runner keeps for diagnostics; longer lines are cut. */
export const STDERR_TAIL_LINE_CHARS = 2000;

/** A scalar attribute: recorder data and span attributes are flat, so any viewer can show them. */
export const Scalar = z.union([z.string().max(RECORDER_TEXT_MAX_CHARS), z.number(), z.boolean(), z.null()]);
export type Scalar = z.infer<typeof Scalar>;
/** Longest attribute name. */
export const ATTRIBUTE_KEY_MAX_CHARS = 64;
export const Attributes = z.record(z.string().max(ATTRIBUTE_KEY_MAX_CHARS), Scalar);
export type Attributes = z.infer<typeof Attributes>;

/**
 * A runner's phases. Per request: `queued` (admitted, waiting for a slot), `prefill` (the engine took
 * it and reads the prompt), `decode` (first token out), then `done` or `failed`; `stalled` when the
 * hang watchdog ended it. Per engine process: `loading`, `ready`, `crashed`, `restarting`,
 * `breaker-open`, `stopping`, `stopped`.
 */
export const RunnerPhase = z.enum(['queued', 'prefill', 'decode', 'done', 'failed', 'stalled', 'loading', 'ready', 'crashed', 'restarting', 'breaker-open', 'stopping', 'stopped']);
export type RunnerPhase = z.infer<typeof RunnerPhase>;

export const RunnerEntry = z.strictObject({
  atMs: z.number(),
  phase: RunnerPhase,
  /** The request this entry is about (per-request phases); null for engine-process phases. */
  requestId: z.string().max(100).nullable(),
  promptTokens: z.number().int().nonnegative().nullable(),
  completionTokens: z.number().int().nonnegative().nullable(),
  /** Resident memory of the engine process when the entry was made, where it could be read. */
  rssBytes: z.number().int().nonnegative().nullable(),
  detail: z.string().max(RECORDER_TEXT_MAX_CHARS).nullable(),
});
export type RunnerEntry = z.infer<typeof RunnerEntry>;

/** What a node's own recorder keeps: the moments an operator asks about after the fact. */
export const MomentKind = z.enum([
  'start',
  'stop',
  'election',
  'master',
  'join',
  'leave',
  'prune',
  'placement',
  'runner-crash',
  'runner-stall',
  'breaker-open',
  'download-failed',
  'disk-full',
  'tracing',
]);
export type MomentKind = z.infer<typeof MomentKind>;

export const NodeMoment = z.strictObject({
  atMs: z.number(),
  kind: MomentKind,
  text: z.string().max(RECORDER_TEXT_MAX_CHARS),
  data: Attributes,
});
export type NodeMoment = z.infer<typeof NodeMoment>;

export const RunnerDiagnostics = z.strictObject({
  instanceId: z.string(),
  modelId: z.string(),
  backend: z.string(),
  role: z.string(),
  state: z.string(),
  reason: z.string().nullable(),
  pid: z.number().int().nullable(),
  restarts: z.number().int().nonnegative(),
  inFlight: z.number().int().nonnegative(),
  queued: z.number().int().nonnegative(),
  recorder: z.array(RunnerEntry).max(RUNNER_RECORDER_ENTRIES),
  /** The engine's last stderr lines (llama-server, the runner child), newest last. */
  stderrTail: z.array(z.string().max(STDERR_TAIL_LINE_CHARS)).max(STDERR_TAIL_LINES),
});
export type RunnerDiagnostics = z.infer<typeof RunnerDiagnostics>;

/** `GET /diagnostics/node`, and one member's answer on `/shoal/diagnostics/1`. */
export const NodeDiagnostics = z.strictObject({
  nodeId: z.string(),
  name: z.string(),
  version: z.string(),
  /** The git commit the node was built from, when known (null for an install without git metadata). */
  commit: z.string().nullable(),
  wireVersion: z.number().int(),
  pid: z.number().int(),
  /** This node's clock when it answered: a viewer estimates the offset from it and the round trip. */
  nowMs: z.number(),
  uptimeMs: z.number().nonnegative(),
  runners: z.array(RunnerDiagnostics).max(256),
  moments: z.array(NodeMoment).max(NODE_RECORDER_ENTRIES),
  /** Telemetry plane pressure: queue depths, drops, sends (flat counters, names say the unit). */
  telemetry: Attributes,
  /** Data plane: open streams per protocol, direct sockets, tunnels (flat counters). */
  dataPlane: Attributes,
});
export type NodeDiagnostics = z.infer<typeof NodeDiagnostics>;

/** One member in `GET /diagnostics/cluster`. */
export const MemberDiagnostics = z.strictObject({
  nodeId: z.string(),
  name: z.string(),
  reachable: z.boolean(),
  /** Why it could not be read (unreachable, timed out, refused), when it could not. */
  error: z.string().nullable(),
  /** Its clock minus this node's, estimated from the round trip (member nowMs - midpoint of the ask). */
  offsetMs: z.number().nullable(),
  rttMs: z.number().nullable(),
  diagnostics: NodeDiagnostics.nullable(),
});
export type MemberDiagnostics = z.infer<typeof MemberDiagnostics>;

export const ClusterDiagnostics = z.strictObject({
  /** The node that asked, whose clock the offsets are relative to. */
  viewerNodeId: z.string(),
  members: z.array(MemberDiagnostics),
  /** Set when members run different builds (version, commit or wire version): names who runs what. */
  versionMismatch: z.string().nullable(),
});
export type ClusterDiagnostics = z.infer<typeof ClusterDiagnostics>;

/** One line of `GET /diagnostics/cluster/timeline`. */
export const TimelineEntry = z.strictObject({
  /** On the viewer's clock: the recording node's time minus its estimated offset. */
  atMs: z.number(),
  /** On the recording node's own clock, as recorded. */
  localAtMs: z.number(),
  nodeId: z.string(),
  nodeName: z.string(),
  source: z.enum(['node', 'runner']),
  instanceId: z.string().nullable(),
  modelId: z.string().nullable(),
  /** A MomentKind for node entries, a RunnerPhase for runner entries. */
  kind: z.string(),
  text: z.string(),
});
export type TimelineEntry = z.infer<typeof TimelineEntry>;

export const Timeline = z.strictObject({
  viewerNodeId: z.string(),
  /** Per member: the offset applied to its entries, and whether it could be read at all. */
  clocks: z.array(z.strictObject({ nodeId: z.string(), name: z.string(), offsetMs: z.number().nullable(), rttMs: z.number().nullable(), reachable: z.boolean() })),
  entries: z.array(TimelineEntry),
});
export type Timeline = z.infer<typeof Timeline>;

/** One span of a traced request. Stored times are on the API node's clock (see the trace's `offsets`). */
export const Span = z.strictObject({
  spanId: z.string().max(32),
  parentId: z.string().max(32).nullable(),
  traceId: z.string().max(32),
  nodeId: z.string(),
  /** e.g. `http`, `route`, `data-plane`, `queue`, `prefill`, `decode`, `respond`. */
  name: z.string().max(64),
  startMs: z.number(),
  endMs: z.number(),
  attributes: Attributes,
});
export type Span = z.infer<typeof Span>;

export const TraceSummary = z.strictObject({
  traceId: z.string(),
  startedAtMs: z.number(),
  durationMs: z.number().nonnegative(),
  /** The API node that took the request and assembled the trace. */
  apiNodeId: z.string(),
  route: z.string(),
  modelId: z.string().nullable(),
  /** HTTP status of the answer, or null while the request runs. */
  status: z.number().int().nullable(),
  nodes: z.array(z.string()),
  spanCount: z.number().int().nonnegative(),
});
export type TraceSummary = z.infer<typeof TraceSummary>;

export const Trace = z.strictObject({
  ...TraceSummary.shape,
  spans: z.array(Span),
  /** Per other node: the clock offset applied to its spans (its clock minus the API node's). */
  offsets: z.record(z.string(), z.number()),
});
export type Trace = z.infer<typeof Trace>;

/** One point of a performance envelope: requests served while the instance held `inFlight` requests. */
export const EnvelopePoint = z.strictObject({
  inFlight: z.number().int().positive(),
  requests: z.number().int().nonnegative(),
  /** Mean decode speed of one request at this concurrency. */
  meanTokensPerS: z.number().nonnegative(),
  /** What the instance delivered in all: mean per request times inFlight. */
  aggregateTokensPerS: z.number().nonnegative(),
  p50TtftMs: z.number().nonnegative().nullable(),
  p50LatencyMs: z.number().nonnegative().nullable(),
});
export type EnvelopePoint = z.infer<typeof EnvelopePoint>;

export const PerformanceEnvelope = z.strictObject({
  modelId: z.string(),
  backend: z.string(),
  /** The serving node; the envelope is per model, engine and serving node. */
  nodeId: z.string(),
  points: z.array(EnvelopePoint),
  /** The concurrency past which aggregate throughput stops rising, once the points show one. */
  kneeInFlight: z.number().int().positive().nullable(),
});
export type PerformanceEnvelope = z.infer<typeof PerformanceEnvelope>;

export const PerformanceView = z.strictObject({ envelopes: z.array(PerformanceEnvelope) });
export type PerformanceView = z.infer<typeof PerformanceView>;
