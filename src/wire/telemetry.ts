import { z } from 'zod';
import { ClusterId, InstanceId, ModelId, NodeId } from '../common/ids.js';
import { InstanceRole } from './instance-role.js';

// Readings on the telemetry plane (gossip, last write wins per sender): what each node says about itself
// for placement, routing and model copies. The plane's other message, the heartbeat, belongs to the
// control-plane core (src/master/core/messages.ts, with the plane's byte limit and topic), which reads it for liveness.

/** Most GPUs, backend tags and runners one node reports (keeps a report under MAX_TELEMETRY_MESSAGE_BYTES). */
export const MAX_REPORTED_GPUS = 8;
export const MAX_REPORTED_BACKENDS = 16;
export const MAX_REPORTED_RUNNERS = 12;
export const MAX_REPORTED_PEERS = 32;
const Bytes = z.number().int().min(0);

/**
 * One GPU as a node detects and samples it (issue #15). `compute` is the API an engine would drive it
 * with; Apple silicon reports `unifiedMemory` (its VRAM is the system RAM, not to be counted twice).
 * Utilization, temperature and power are null where the platform does not report them.
 */
export const GpuReading = z.strictObject({
  index: z.number().int().min(0).max(63),
  name: z.string().max(128),
  vendor: z.enum(['nvidia', 'amd', 'apple', 'intel', 'other']),
  compute: z.enum(['cuda', 'vulkan', 'metal']),
  vramTotalBytes: Bytes,
  vramFreeBytes: Bytes,
  unifiedMemory: z.boolean(),
  utilizationPct: z.number().min(0).max(100).nullable(),
  temperatureC: z.number().min(-50).max(200).nullable(),
  powerW: z.number().min(0).max(10_000).nullable(),
});
export type GpuReading = z.infer<typeof GpuReading>;

/** What a node can offer placement, read every few seconds. Never event-sourced. */
export const ResourcesMessage = z.strictObject({
  type: z.literal('resources'),
  clusterId: ClusterId,
  nodeId: NodeId,
  seq: z.number().int().min(0),
  memory: z.strictObject({
    totalBytes: Bytes,
    availableBytes: Bytes,
    /** What placement may still use here: the smaller of available memory and the `--memory-budget` left. */
    offerBytes: Bytes,
  }),
  cpu: z.strictObject({ cores: z.number().int().min(1), loadPct: z.number().min(0).max(100) }),
  gpus: z.array(GpuReading).max(MAX_REPORTED_GPUS),
  /** `--vram-budget`: the most placement may use on each of this node's GPUs; absent or null = no cap beyond free VRAM. */
  vramBudgetBytes: Bytes.nullable().optional(),
  backends: z.array(z.string().min(1).max(64)).max(MAX_REPORTED_BACKENDS),
  memoryBandwidthBytesPerS: z.number().min(0).nullable(),
  disk: z.strictObject({ freeBytes: Bytes.nullable() }),
  /** Members this node has a live connection to (the dashboard draws them as links). */
  peers: z.array(NodeId).max(MAX_REPORTED_PEERS),
});

export const RunnerReport = z.strictObject({
  instanceId: InstanceId,
  modelId: ModelId,
  role: InstanceRole,
  state: z.enum(['starting', 'ready', 'restarting', 'failed', 'stopped']),
  reason: z.string().max(200).nullable(),
  inFlight: z.number().int().min(0),
  queued: z.number().int().min(0),
});
/** The runners a node has right now: routing reads it to find a ready instance and its load. */
export const RunnersMessage = z.strictObject({
  type: z.literal('runners'),
  clusterId: ClusterId,
  nodeId: NodeId,
  seq: z.number().int().min(0),
  runners: z.array(RunnerReport).max(MAX_REPORTED_RUNNERS),
});

/**
 * Most model copies one node reports. With ids of at most 200 characters (ModelId) and the fields
 * below, 12 entries keep a message under MAX_TELEMETRY_MESSAGE_BYTES (worst case about 3.6 KiB as JSON;
 * src/models/model-copy.test.ts checks it); a node with more reports its most recently used.
 */
export const MAX_REPORTED_ARTIFACTS = 12;
export const ArtifactReport = z.strictObject({
  modelId: ModelId,
  /** The hub commit of the copy. */
  revision: z.string().regex(/^[0-9a-f]{40}$/),
  bytes: Bytes,
});
/** The complete model copies a node holds, for peers that need one of them (copy instead of download). */
export const ArtifactsMessage = z.strictObject({
  type: z.literal('artifacts'),
  clusterId: ClusterId,
  nodeId: NodeId,
  seq: z.number().int().min(0),
  models: z.array(ArtifactReport).max(MAX_REPORTED_ARTIFACTS),
});

/**
 * Most downloads one node reports: the ones in progress first, then those that failed or were cancelled
 * in the last DOWNLOAD_FAILURE_REPORTED_MS. Four entries with the longest ids and an error of
 * DOWNLOAD_REPORT_ERROR_MAX_CHARS three-byte characters stay under MAX_TELEMETRY_MESSAGE_BYTES
 * (src/cluster/telemetry-downloads.test.ts checks it).
 */
export const MAX_REPORTED_DOWNLOADS = 4;
/** A failed download's message is clipped to this on the wire; the node's own `GET /models/downloads` has it whole. */
export const DOWNLOAD_REPORT_ERROR_MAX_CHARS = 120;
/** A failed or cancelled download stays in the node's reports this long (10 minutes). */
export const DOWNLOAD_FAILURE_REPORTED_MS = 10 * 60_000;
export const DownloadReport = z.strictObject({
  /** The node's own download id (`GET /models/downloads/:id` there). */
  id: z.string().min(1).max(32),
  modelId: ModelId,
  state: z.enum(['resolving', 'downloading', 'failed', 'cancelled']),
  doneBytes: Bytes,
  totalBytes: Bytes,
  bytesPerSecond: z.number().min(0),
  /** Where the bytes come from now: the hub, or the member (node id) that holds a copy; null while resolving. */
  source: z.discriminatedUnion('kind', [z.strictObject({ kind: z.literal('hub') }), z.strictObject({ kind: z.literal('peer'), nodeId: NodeId }), z.strictObject({ kind: z.literal('disk') })]).nullable(),
  error: z.strictObject({ code: z.string().min(1).max(40), message: z.string().max(DOWNLOAD_REPORT_ERROR_MAX_CHARS) }).nullable(),
  /** How long ago it started, or ended for a failed one (the nodes' clocks are never compared). */
  agoMs: z.number().int().min(0),
});
/** The downloads a node has in progress or saw fail recently: the cluster sees every member's. */
export const DownloadsMessage = z.strictObject({
  type: z.literal('downloads'),
  clusterId: ClusterId,
  nodeId: NodeId,
  seq: z.number().int().min(0),
  downloads: z.array(DownloadReport).max(MAX_REPORTED_DOWNLOADS),
});
/**
 * A node's account of its own health (src/cluster/self-health.ts): at most one reason per kind, each
 * clipped so that the worst case (every reason at its caps in three-byte characters) stays under
 * MAX_TELEMETRY_MESSAGE_BYTES (src/cluster/self-health.test.ts checks it).
 */
export const MAX_REPORTED_HEALTH_REASONS = 6;
export const HEALTH_TEXT_MAX_CHARS = 90;
export const HEALTH_REMEDIATION_MAX_CHARS = 90;
/** The build a node runs; members compare it with their own (a member on another build is a reason). */
export const BuildReport = z.strictObject({
  version: z.string().min(1).max(40),
  /** The checkout's commit (short), null for an install that is not a git checkout. */
  commit: z.string().regex(/^[0-9a-f]{4,40}$/).nullable(),
});
export const HealthReasonReport = z.strictObject({
  /** Stable and short (`download-failed`, ...); any such word, so a newer member's new kind still parses here. */
  code: z.string().regex(/^[a-z][a-z0-9-]{0,23}$/),
  text: z.string().min(1).max(HEALTH_TEXT_MAX_CHARS),
  remediation: z.string().min(1).max(HEALTH_REMEDIATION_MAX_CHARS),
});
/** What a node says about its own health and build, so every member's `/state` shows it. */
export const HealthMessage = z.strictObject({
  type: z.literal('health'),
  clusterId: ClusterId,
  nodeId: NodeId,
  seq: z.number().int().min(0),
  build: BuildReport,
  reasons: z.array(HealthReasonReport).max(MAX_REPORTED_HEALTH_REASONS),
});
export type BuildReport = z.infer<typeof BuildReport>;
export type HealthReasonReport = z.infer<typeof HealthReasonReport>;
export type HealthMessage = z.infer<typeof HealthMessage>;
export type DownloadReport = z.infer<typeof DownloadReport>;
export type DownloadsMessage = z.infer<typeof DownloadsMessage>;
export type ArtifactReport = z.infer<typeof ArtifactReport>;
export type ArtifactsMessage = z.infer<typeof ArtifactsMessage>;
export type ResourcesMessage = z.infer<typeof ResourcesMessage>;
export type RunnersMessage = z.infer<typeof RunnersMessage>;
export type RunnerReport = z.infer<typeof RunnerReport>;
