import type { ClusterSettings } from '../../master/state/settings.js';

/**
 * What the control routes and the CLI need from the node: its view of the cluster and the
 * membership actions. The node shell implements it; every method maps to one HTTP route.
 */

export interface HealthReason {
  /** Stable and short, for badges and scripts (docs/API.md lists them). */
  code: string;
  text: string;
  remediation: string;
}

export interface NodeHealth {
  level: 'ok' | 'degraded' | 'suspect' | 'pruned';
  reasons: HealthReason[];
}

export interface MemberView {
  nodeId: string;
  name: string;
  nickname: string | null;
  fingerprint: string;
  isMaster: boolean;
  isSelf: boolean;
  hostPreferred: boolean;
  health: NodeHealth;
}

export interface StatusView {
  nodeId: string;
  name: string;
  /** Shoal's version (package.json) this node runs, shown by the dashboard. */
  version: string;
  /** Whether the inference routes (`/v1`, `/api`) ask for an API key (the dashboard's connect panel says so). */
  apiKeyRequired: boolean;
  fingerprint: string;
  /** Where other nodes reach this one (libp2p multiaddrs, with /p2p/<nodeId>). */
  addrs: string[];
  clusterId: string | null;
  role: 'standalone' | 'member';
  masterId: string | null;
  term: number;
  lastIdx: number;
  stateHash: string;
  members: MemberView[];
  /** Nodes seen on the network that are not members: name and fingerprint only. */
  discovered: { nodeId: string; name: string; fingerprint: string; addrs: string[] }[];
  /** Invitations this node received and has not answered. */
  invitations: { id: string; fromNodeId: string; fromName: string; fingerprint: string; clusterId: string; expiresAt: string }[];
  health: NodeHealth;
  /** This node's runners (its default model and the parts of cluster instances it holds). */
  models: unknown[];
  /** Instances cluster state places, with what each node's runners report. */
  instances: InstanceView[];
  /** Each node's latest resources reading, with its age. */
  resources: Record<string, unknown>;
  /** Live connections between members as each reported them (each pair once). */
  links: { from: string; to: string }[];
  /** The complete model copies each node reports holding (this node's read now), with the report's age. */
  artifacts: Record<string, ArtifactsView>;
  /** Cluster-wide settings (src/master/state/settings.ts; API keys as digests); the defaults on a standalone node. */
  settings: ClusterSettings;
  /** Each member's downloads in progress and those that failed in the last 10 minutes (this node's read now). */
  downloads: Record<string, NodeDownloadsView>;
  /**
   * This node's managed engines (llama-server, ggml-rpc-server): in the cache, being provisioned in the
   * background, or why not. Absent only from the control plane's own status, which knows no engines.
   */
  engines?: EnginesProvisionView;
}

/** Where this node's engine provisioning stands (src/doctor/provision.ts ProvisionState). */
export interface EnginesProvisionView {
  phase: 'cached' | 'checking' | 'downloading' | 'verifying' | 'building' | 'ready' | 'failed' | 'unavailable';
  /** 0..100 while downloading or building; null otherwise or when the size is unknown. */
  percent: number | null;
  message: string;
  /** What to run or install when the node cannot get the engines itself. */
  remediation: string | null;
  source: 'cache' | 'release' | 'build' | null;
  compute: 'cpu' | 'cuda' | 'vulkan' | 'metal' | null;
}

/** A download as the telemetry plane carries it (src/wire/telemetry.ts), with a peer source named. */
export interface DownloadReportView {
  id: string;
  modelId: string;
  state: 'resolving' | 'downloading' | 'failed' | 'cancelled';
  doneBytes: number;
  totalBytes: number;
  bytesPerSecond: number;
  source: { kind: 'hub' } | { kind: 'disk' } | { kind: 'peer'; nodeId: string; name: string | null } | null;
  error: { code: string; message: string } | null;
  /** How long ago it started (or ended, for a failed one), as the node measured it. */
  agoMs: number;
}

export interface NodeDownloadsView {
  /** At most 4 per node (the telemetry message's cap), running ones first. */
  downloads: DownloadReportView[];
  ageMs: number;
}

/** A download an instance's placement needs on a member that does not hold the model. */
export interface PendingDownloadView {
  nodeId: string;
  name: string | null;
  bytes: number;
  source: 'hub' | 'peer';
}

export interface ArtifactsView {
  /** At most 12 per node (the telemetry message's cap), most recently used first. */
  models: { modelId: string; revision: string; bytes: number }[];
  ageMs: number;
}

export interface InstanceView {
  instanceId: string;
  modelId: string;
  shape: 'single' | 'replicas' | 'pooled';
  createdAt: string;
  contextTokens: number;
  parallel: number;
  /** Single-stream decode prediction; null where the placement was not predicted (a node had not measured its bandwidth, or a GPU backend). */
  predictedDecodeTokPerS: number | null;
  warnings: string[];
  /** `estimatedBytes`: the memory the planner reserved for the part (weights, KV cache and overhead). */
  placements: { nodeId: string; role: 'full' | 'driver' | 'donor'; backend: string; layerCount: number; tensorSplit: number | null; estimatedBytes: number }[];
  runners: { nodeId: string; role: 'full' | 'driver' | 'donor'; state: 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped' | 'unknown'; reason: string | null; inFlight: number; queued: number }[];
  /**
   * Downloads that wait for an operator's approval (`shoal models approve`, the dashboard) before any
   * part starts; null once approved or when none needed it.
   */
  awaitingApproval: PendingDownloadView[] | null;
  /** The downloads of this instance's model on the nodes holding its parts, as each reports them. */
  downloads: (DownloadReportView & { nodeId: string })[];
}

export interface NodeControl {
  status(): StatusView;
  /** Invites a discovered node (by node id or name). */
  invite(target: string): Promise<{ invitationId: string; nodeId: string }>;
  /** A join code for a node that cannot be discovered. */
  inviteCode(): Promise<{ code: string; expiresAt: string }>;
  join(code: string): Promise<{ clusterId: string }>;
  /** Approves a pending invitation (by invitation id, inviter node id or name; the only one when omitted). */
  approve(selector: string | null): Promise<{ clusterId: string }>;
  decline(selector: string | null): Promise<void>;
  remove(target: string): Promise<void>;
  leave(): Promise<void>;
  dissolve(): Promise<void>;
  nickname(target: string, nickname: string | null): Promise<void>;
  makeHost(target: string): Promise<void>;
}
