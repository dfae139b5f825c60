// The node's readings on the telemetry plane: what it can offer placement (resources), which runners
// it has (routing) and its own health with its build (every member's `/state`). Published on a beat,
// kept last-write-wins per sender, never event-sourced.

import { readFile, statfs } from 'node:fs/promises';
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { Logger } from '../common/log.js';
import { MAX_REPORTED_GPUS, MAX_REPORTED_PEERS, MAX_REPORTED_RUNNERS, type BuildReport, type DownloadReport, type GpuReading, type DownloadsMessage, type HealthMessage, type HealthReasonReport, type ResourcesMessage, type RunnerReport, type RunnersMessage } from '../wire/telemetry.js';
import type { NodeDownloadsView } from '../api/control/control.js';
import { DOWNLOADS_IDLE_INTERVAL_MS, DOWNLOADS_INTERVAL_MS, downloadsView } from './telemetry-downloads.js';
import type { ReportedHealth } from './self-health.js';
import type { NodeId } from '../common/ids.js';
import type { ClusterState } from '../master/state/state.js';
import { plannerGpus, type ClusterNode } from '../placement/nodes.js';

/** How often resources go out (docs/DESIGN.md section 5's telemetry beat). */
export const RESOURCES_INTERVAL_MS = 2_000;
/** Runners go out on change (throttled to this) and at least every RUNNERS_INTERVAL_MS. */
export const RUNNERS_THROTTLE_MS = 200;
export const RUNNERS_INTERVAL_MS = 2_000;
/** A node's resources older than this count as unknown to placement (INFO_PENDING). */
export const RESOURCES_STALE_MS = 10_000;
/** How often a node's own health reasons and build go out (src/cluster/self-health.ts). */
export const HEALTH_INTERVAL_MS = 2_000;

export interface TelemetryPlane {
  readonly nodeId: NodeId;
  view(): { state: ClusterState };
  publishTelemetry(message: ResourcesMessage | RunnersMessage | DownloadsMessage | HealthMessage): void;
  onTelemetry(listener: (message: ResourcesMessage | RunnersMessage | DownloadsMessage | HealthMessage, from: NodeId) => void): () => void;
}

export interface NodeTelemetryOptions {
  plane: TelemetryPlane;
  log: Logger;
  dataDir: string;
  /** `--memory-budget`: the most placement may use on this node; null = no cap beyond available memory. */
  memoryBudgetBytes: number | null;
  /** Backend tags this node offers now: read at every report, since engines provisioned after the start add theirs. */
  backends: () => string[];
  /** This node's GPUs now (src/worker/gpus.ts GpuMonitor.readings: cached, never waits on a tool). */
  gpus: () => GpuReading[];
  /** `--vram-budget`: the most placement may use on each GPU of this node; null or absent = its free VRAM. */
  vramBudgetBytes?: number | null;
  memoryBandwidthBytesPerS: number | null;
  /** This node's runners now. */
  runners: () => RunnerReport[];
  /** Members this node is connected to now. */
  peers: () => NodeId[];
  /** This node's downloads in progress and recently failed, as the wire carries them (telemetry-downloads.ts). */
  downloads: () => DownloadReport[];
  /** The build this node runs (shoalVersion, shoalCommit): members on another one show a reason. */
  build: BuildReport;
  /** This node's own health reasons now (src/cluster/self-health-probe.ts). */
  selfHealth: () => Promise<HealthReasonReport[]>;
}

interface Heard<T> {
  message: T;
  atMs: number;
}

export interface ResourcesView extends Omit<ResourcesMessage, 'type' | 'clusterId' | 'seq'> {
  ageMs: number;
}

/** MemAvailable (what the kernel could hand out without swapping) where Linux says it, else free memory. */
async function availableMemoryBytes(): Promise<number> {
  try {
    const text = await readFile('/proc/meminfo', 'utf8');
    const match = /^MemAvailable:\s+(\d+) kB$/m.exec(text);
    if (match?.[1]) return Number(match[1]) * 1024;
  } catch {
    // Not Linux: fall through.
  }
  return freemem();
}

/** Bytes the instances placed on `nodeId` are expected to take (their parts' estimates). */
export function committedBytes(state: ClusterState, nodeId: NodeId): number {
  let total = 0;
  for (const instance of Object.values(state.instances)) {
    for (const placement of instance.placements) if (placement.nodeId === nodeId) total += placement.estimatedBytes;
  }
  return total;
}

/**
 * What placement may still use on a node. With a budget, the budget less what is already committed there
 * (runners that have not loaded yet do not show in available memory, so available alone would double-book);
 * always capped by what the machine has available now.
 */
export function offerBytes(availableBytes: number, budgetBytes: number | null, committed: number): number {
  if (budgetBytes === null) return availableBytes;
  return Math.max(0, Math.min(availableBytes, budgetBytes - committed));
}

export class NodeTelemetry implements AsyncDisposable {
  private readonly resources = new Map<NodeId, Heard<ResourcesMessage>>();
  private readonly runners = new Map<NodeId, Heard<RunnersMessage>>();
  private readonly downloads = new Map<NodeId, Heard<DownloadsMessage>>();
  private readonly health = new Map<NodeId, Heard<HealthMessage>>();
  /** This node's own reasons as last read (every HEALTH_INTERVAL_MS). */
  private ownReasons: HealthReasonReport[] = [];
  /** A self-health reading is running (publishHealth skips its beat until it ends). */
  private healthReading = false;
  private lastDownloadsSent: { count: number; atMs: number } = { count: 0, atMs: -Infinity };
  private seq = 0;
  private timers: NodeJS.Timeout[] = [];
  private runnersTimer: NodeJS.Timeout | null = null;
  private lastRunnersSentMs = -Infinity;
  private readonly unsubscribe: () => void;
  private readonly runnerListeners = new Set<() => void>();

  constructor(private readonly options: NodeTelemetryOptions) {
    this.unsubscribe = options.plane.onTelemetry((message, from) => {
      if (from === options.plane.nodeId) return;
      const heard = { message, atMs: performance.now() };
      if (message.type === 'resources') this.resources.set(from, heard as Heard<ResourcesMessage>);
      else if (message.type === 'runners') {
        this.runners.set(from, heard as Heard<RunnersMessage>);
        for (const listener of this.runnerListeners) listener();
      } else if (message.type === 'downloads') this.downloads.set(from, heard as Heard<DownloadsMessage>);
      else if (message.type === 'health') this.health.set(from, heard as Heard<HealthMessage>);
    });
  }

  start(): void {
    this.publishResources();
    this.timers.push(setInterval(() => this.publishResources(), RESOURCES_INTERVAL_MS));
    this.timers.push(setInterval(() => this.runnersChanged(), RUNNERS_INTERVAL_MS));
    this.timers.push(setInterval(() => this.publishDownloads(), DOWNLOADS_INTERVAL_MS));
    this.publishHealth();
    this.timers.push(setInterval(() => this.publishHealth(), HEALTH_INTERVAL_MS));
  }

  /** Publishes a resources report now (the beat does too); the node calls it when the backends it offers change, so placement sees them at once. */
  publishResources(): void {
    void this.readResources().then((message) => {
      if (message) this.options.plane.publishTelemetry(message);
    }, (error: unknown) => this.options.log.warn({ err: error }, 'could not read resources'));
  }

  /** Reads this node's own reasons (kept for its own `/state`) and, in a cluster, tells the members with the build. */
  private publishHealth(): void {
    // One reading at a time: a statfs stuck on a hung models filesystem must not pile up beats that
    // hold the libuv threadpool every other file operation of the node needs.
    if (this.healthReading) return;
    this.healthReading = true;
    void this.options.selfHealth().finally(() => {
      this.healthReading = false;
    }).then((reasons) => {
      this.ownReasons = reasons;
      const clusterId = this.options.plane.view().state.clusterId;
      if (clusterId === null) return;
      this.options.plane.publishTelemetry({ type: 'health', clusterId, nodeId: this.options.plane.nodeId, seq: this.seq++, build: this.options.build, reasons });
    }, (error: unknown) => this.options.log.warn({ err: error }, 'could not read this node\'s health'));
  }

  /** The build this node runs, as it tells the members. */
  get build(): BuildReport {
    return this.options.build;
  }

  /** What each member said of its own health and build as last heard (this node's as last read); absent when none was heard. */
  reportedHealth(): Record<string, ReportedHealth> {
    const out: Record<string, ReportedHealth> = { [this.options.plane.nodeId]: { build: this.options.build, reasons: this.ownReasons } };
    for (const [nodeId, heard] of this.health) if (nodeId !== this.options.plane.nodeId) out[nodeId] = { build: heard.message.build, reasons: heard.message.reasons };
    return out;
  }

  /**
   * Every beat while this node has downloads to report (progress moves), once more when the list empties,
   * and every DOWNLOADS_IDLE_INTERVAL_MS otherwise so a lost "none" does not leave a stale entry elsewhere.
   */
  private publishDownloads(): void {
    const clusterId = this.options.plane.view().state.clusterId;
    if (clusterId === null) return;
    const downloads = this.options.downloads();
    const now = performance.now();
    if (downloads.length === 0 && this.lastDownloadsSent.count === 0 && now - this.lastDownloadsSent.atMs < DOWNLOADS_IDLE_INTERVAL_MS) return;
    this.lastDownloadsSent = { count: downloads.length, atMs: now };
    this.options.plane.publishTelemetry({ type: 'downloads', clusterId, nodeId: this.options.plane.nodeId, seq: this.seq++, downloads });
  }

  /** Call when a local runner changes state or load; published at most every RUNNERS_THROTTLE_MS. */
  runnersChanged(): void {
    if (this.runnersTimer !== null) return;
    const waitMs = Math.max(0, this.lastRunnersSentMs + RUNNERS_THROTTLE_MS - performance.now());
    this.runnersTimer = setTimeout(() => {
      this.runnersTimer = null;
      this.lastRunnersSentMs = performance.now();
      const clusterId = this.options.plane.view().state.clusterId;
      if (clusterId === null) return;
      const runners = this.options.runners().slice(0, MAX_REPORTED_RUNNERS);
      this.options.plane.publishTelemetry({ type: 'runners', clusterId, nodeId: this.options.plane.nodeId, seq: this.seq++, runners });
    }, waitMs);
  }

  /** Fires when another node's runners report arrives. */
  onRunners(listener: () => void): () => void {
    this.runnerListeners.add(listener);
    return () => this.runnerListeners.delete(listener);
  }

  /** This node's resources, kept for its own `/state` even while it is in no cluster (then nothing is published). */
  private async readResources(): Promise<ResourcesMessage | null> {
    const state = this.options.plane.view().state;
    const message = await this.selfResources(state);
    this.resources.set(this.options.plane.nodeId, { message, atMs: performance.now() });
    return state.clusterId === null ? null : message;
  }

  private async selfResources(state: ClusterState): Promise<ResourcesMessage> {
    const availableBytes = await availableMemoryBytes();
    const cores = cpus().length || 1;
    let diskFree: number | null;
    try {
      const fs = await statfs(this.options.dataDir);
      diskFree = fs.bavail * fs.bsize;
    } catch {
      diskFree = null;
    }
    return {
      type: 'resources',
      clusterId: state.clusterId ?? ('0'.repeat(32) as never),
      nodeId: this.options.plane.nodeId,
      seq: this.seq++,
      memory: {
        totalBytes: totalmem(),
        availableBytes,
        offerBytes: offerBytes(availableBytes, this.options.memoryBudgetBytes, committedBytes(state, this.options.plane.nodeId)),
      },
      cpu: { cores, loadPct: Math.min(100, Math.round(((loadavg()[0] ?? 0) / cores) * 100)) },
      gpus: this.options.gpus().slice(0, MAX_REPORTED_GPUS),
      vramBudgetBytes: this.options.vramBudgetBytes ?? null,
      backends: this.options.backends(),
      memoryBandwidthBytesPerS: this.options.memoryBandwidthBytesPerS,
      disk: { freeBytes: diskFree },
      peers: this.options.peers().slice(0, MAX_REPORTED_PEERS),
    };
  }

  /** What this node can offer a part now, its own `excludeBytes` commitment not counted against it. */
  async offerNow(excludeBytes: number): Promise<number> {
    const state = this.options.plane.view().state;
    const committed = committedBytes(state, this.options.plane.nodeId) - excludeBytes;
    return offerBytes(await availableMemoryBytes(), this.options.memoryBudgetBytes, Math.max(0, committed));
  }

  /** The latest resources of every node heard from (this one included), with their age. */
  resourcesView(): Record<string, ResourcesView> {
    const now = performance.now();
    const out: Record<string, ResourcesView> = {};
    for (const [nodeId, heard] of this.resources) {
      const { type: _type, clusterId: _clusterId, seq: _seq, ...rest } = heard.message;
      out[nodeId] = { ...rest, ageMs: Math.round(now - heard.atMs) };
    }
    return out;
  }

  /** Live connections between members (this node's now, the others' as last reported), each pair once. */
  links(): { from: string; to: string }[] {
    const seen = new Set<string>();
    const out: { from: string; to: string }[] = [];
    const self = this.options.plane.nodeId;
    // This node's own connections are read now; the others' are as they last reported them.
    const reports: [string, readonly string[]][] = [[self, this.options.peers()]];
    for (const [nodeId, heard] of this.resources) if (nodeId !== self) reports.push([nodeId, heard.message.peers]);
    for (const [nodeId, peers] of reports) {
      for (const peer of peers) {
        const [from, to] = nodeId < peer ? [nodeId, peer] : [peer, nodeId];
        if (seen.has(`${from}/${to}`)) continue;
        seen.add(`${from}/${to}`);
        out.push({ from, to });
      }
    }
    return out;
  }

  /** Every member's downloads (this node's read now, the others' as last reported), peer sources named. */
  downloadsView(): Record<string, NodeDownloadsView> {
    const state = this.options.plane.view().state;
    const now = performance.now();
    const reports = new Map<NodeId, { downloads: DownloadReport[]; ageMs: number }>();
    reports.set(this.options.plane.nodeId, { downloads: this.options.downloads(), ageMs: 0 });
    for (const [nodeId, heard] of this.downloads) if (nodeId !== this.options.plane.nodeId) reports.set(nodeId, { downloads: heard.message.downloads, ageMs: now - heard.atMs });
    const self = this.options.plane.nodeId;
    return downloadsView(reports, (nodeId) => {
      const member = Object.hasOwn(state.members, nodeId) ? state.members[nodeId] : undefined;
      // A node in no cluster yet still shows its own downloads.
      return member ? (member.nickname ?? member.name) : nodeId === self ? self : null;
    });
  }

  /** Another node's runners as last reported, or null when none was heard. */
  runnersOf(nodeId: NodeId): { runners: RunnerReport[]; ageMs: number } | null {
    const heard = this.runners.get(nodeId);
    return heard ? { runners: heard.message.runners, ageMs: performance.now() - heard.atMs } : null;
  }

  /**
   * The active members as placement sees them. This node's figures are read now; others' are their
   * latest report, unknown (pending) when none is fresher than RESOURCES_STALE_MS.
   */
  async clusterNodes(connected: (nodeId: NodeId) => boolean): Promise<ClusterNode[]> {
    const state = this.options.plane.view().state;
    const self = this.options.plane.nodeId;
    const nodes: ClusterNode[] = [];
    const now = performance.now();
    // A node in no cluster yet plans over itself: placing founds a cluster of one.
    if (state.members[self] === undefined) return [nodeFrom(await this.selfResources(state), state)];
    for (const member of Object.values(state.members)) {
      if (member.status !== 'active') continue;
      if (member.nodeId === self) {
        const mine = await this.selfResources(state);
        nodes.push(nodeFrom(mine, state));
        continue;
      }
      if (!connected(member.nodeId)) continue;
      const heard = this.resources.get(member.nodeId);
      if (!heard || now - heard.atMs > RESOURCES_STALE_MS) {
        nodes.push({ nodeId: member.nodeId, freeBytes: null, backends: null });
        continue;
      }
      // Up to one beat stale: an instance decided since their report is not yet taken off their offer.
      nodes.push(nodeFrom(heard.message, state));
    }
    return nodes;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    this.stop();
  }

  stop(): void {
    this.unsubscribe();
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    if (this.runnersTimer !== null) clearTimeout(this.runnersTimer);
    this.runnersTimer = null;
  }
}

/** VRAM the instances placed on `nodeId` are expected to take on its GPU `index` (their parts' device estimates). */
export function committedVramBytes(state: ClusterState, nodeId: NodeId, index: number): number {
  let total = 0;
  for (const instance of Object.values(state.instances)) {
    for (const placement of instance.placements) {
      if (placement.nodeId !== nodeId) continue;
      for (const device of placement.devices ?? []) if (device.index === index) total += device.estimatedBytes;
    }
  }
  return total;
}

function nodeFrom(message: ResourcesMessage, state: ClusterState): ClusterNode {
  return {
    nodeId: message.nodeId,
    freeBytes: message.memory.offerBytes,
    backends: message.backends,
    ...(message.memoryBandwidthBytesPerS !== null ? { memoryBandwidthBytesPerS: message.memoryBandwidthBytesPerS } : {}),
    gpus: plannerGpus(message.gpus, message.vramBudgetBytes ?? null, (index) => committedVramBytes(state, message.nodeId, index)),
  };
}
