/**
 * What the control routes and the CLI need from the node: its view of the cluster and the
 * membership actions. The node shell implements it; every method maps to one HTTP route.
 */

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

export interface StatusView {
  nodeId: string;
  name: string;
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
  predictedDecodeTokPerS: number;
  warnings: string[];
  placements: { nodeId: string; role: 'full' | 'driver' | 'donor'; backend: string; layerCount: number; tensorSplit: number | null }[];
  runners: { nodeId: string; role: 'full' | 'driver' | 'donor'; state: 'starting' | 'ready' | 'restarting' | 'failed' | 'stopped' | 'unknown'; reason: string | null; inFlight: number; queued: number }[];
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
