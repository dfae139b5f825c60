// What the node's API returns, as the dashboard reads it. These mirror src/api/control/control.ts and
// the placement and models routes; fields added later by the node are optional here so a dashboard
// served by an older node still renders what it has.

export interface HealthReason {
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

export interface DiscoveredView {
  nodeId: string;
  name: string;
  fingerprint: string;
  addrs: string[];
}

export interface InvitationView {
  id: string;
  fromNodeId: string;
  fromName: string;
  fingerprint: string;
  clusterId: string;
  expiresAt: string;
}

export type RunnerState = 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped' | 'unknown';

export interface InstanceView {
  instanceId: string;
  modelId: string;
  shape: 'single' | 'replicas' | 'pooled';
  createdAt: string;
  contextTokens: number;
  parallel: number;
  predictedDecodeTokPerS: number;
  warnings: string[];
  placements: { nodeId: string; role: 'full' | 'driver' | 'donor'; backend: string; layerCount: number; tensorSplit: number | null }[];
  runners: { nodeId: string; role: string; state: RunnerState; reason: string | null; inFlight: number; queued: number }[];
}

export interface NodeResources {
  memory: { totalBytes: number; availableBytes: number; offerBytes: number };
  cpu: { cores: number; loadPct: number };
  gpus: { name: string; totalBytes: number; usedBytes: number }[];
  backends: string[];
  disk: { freeBytes: number | null };
  ageMs: number;
}

/** A model the local worker runs (the node's `models` list before cluster instances existed). */
export interface LocalModelView {
  instanceId: string;
  modelId: string;
  state: string;
  reason: string | null;
  inFlight?: number;
  queued?: number;
}

export interface StateView {
  nodeId: string;
  name: string;
  fingerprint: string;
  addrs: string[];
  clusterId: string | null;
  role: 'standalone' | 'member';
  masterId: string | null;
  term: number;
  lastIdx: number;
  stateHash: string;
  members: MemberView[];
  discovered: DiscoveredView[];
  invitations: InvitationView[];
  health: NodeHealth;
  models?: LocalModelView[];
  instances?: InstanceView[];
  resources?: Record<string, NodeResources>;
  /** Optional: which members this node has a live connection to. */
  links?: { from: string; to: string }[] | string[];
  downloads?: DownloadView[];
}

export interface DownloadView {
  id: string;
  modelId: string;
  repo: string;
  state: 'resolving' | 'downloading' | 'done' | 'failed' | 'cancelled';
  doneBytes: number;
  totalBytes: number;
  bytesPerSecond: number;
  etaSeconds: number | null;
  error: { code: string; reason: string | null; message: string } | null;
}

export interface ModelView {
  id: string;
  name: string;
  origin: 'builtin' | 'added' | 'user' | 'store';
  source: { repo?: string; file?: string; revision?: string } | null;
  tasks: string[];
  state: string;
  bytes: number;
  partialBytes: number;
  inUse: boolean;
  download: DownloadView | null;
  facts: { architecture: string; trainedContext: number; blockCount: number; fileBytes: number } | null;
}

export interface SearchModelView {
  tag: string;
  quant: string | null;
  name: string;
  file: string;
  bytes: number;
  isDefault: boolean;
}

export interface SearchResultView {
  repo: string;
  downloads: number;
  likes: number;
  updatedAt: string;
  defaultQuant: string | null;
  defaultBytes: number | null;
  models: SearchModelView[];
}

export interface PlanPlacementView {
  nodeId: string;
  role: 'full' | 'driver' | 'donor';
  backend: string;
  layerShare: { layerCount: number; fraction: number; firstLayer?: number };
  tensorSplit?: number;
  freeBytes: number;
  estimate: { totalBytes: number };
}

export interface PlanView {
  modelId?: string;
  shape: 'single' | 'replicas' | 'pooled';
  placements: PlanPlacementView[];
  predictedDecodeTokPerS: number;
  speedArithmetic: string[];
  warnings: string[];
  contextTokens: number;
  contextCeiling: number;
}

export interface PlacementErrorView {
  code: string;
  message: string;
  pendingNodes?: string[];
  causes?: PlacementErrorView[];
}
