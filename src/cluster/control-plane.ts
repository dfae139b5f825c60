import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ShoalError, toShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { shoalVersion } from '../common/version.js';
import type { NodeControl, StatusView } from '../api/control/control.js';
import { MAX_MESSAGE_BYTES, SYNC_PROTOCOL, ControlMessage, SyncMessage, TelemetryMessage, controlTopic, telemetryTopic, type CoreMessage } from '../master/core/messages.js';
import type { ArtifactsMessage, DownloadsMessage, HealthMessage, ResourcesMessage, RunnersMessage } from '../wire/telemetry.js';
import type { Effect } from '../master/core/effects.js';
import { NodeCore, type CoreView } from '../master/core/node-core.js';
import { LogStore } from '../master/log/store.js';
import type { LogHealth } from '../master/log/types.js';
import type { Command, CommandResult } from '../master/state/commands.js';
import type { MemberInfo } from '../master/state/events.js';
import type { ClusterId, CommandId, NodeId } from '../common/ids.js';
import { Snapshot, type LogRecord } from '../master/state/record.js';
import type { ClusterState } from '../master/state/state.js';
import { loadOrCreateIdentity, type Identity } from '../membership/identity.js';
import { liveMembers, MembershipService } from '../membership/service.js';
import { TrustedClusters } from '../membership/trusted.js';
import { createRouter, type Router, type Topic } from '../router/index.js';
import type { RecordMoment } from '../diagnostics/recorder.js';
import { planeMoments, type PlaneGlance } from '../diagnostics/plane-moments.js';
import { EffectChain } from './effect-chain.js';

/**
 * The thin shell around the pure cluster core: it owns the clock, the log on disk and the libp2p
 * router, feeds the core what happens and carries out the effects it returns, in order, durable ones
 * first (see src/master/core/effects.ts). The membership conversations (invitations, join codes, the
 * roster commands) are src/membership/service.ts, which the plane owns and submits for.
 */

export interface ControlPlaneOptions {
  log: Logger;
  dataDir: string;
  name: string;
  /** Default 52601. */
  p2pPort: number;
  /** Address the p2p listener binds. Default 0.0.0.0. */
  p2pHost: string;
  mdns: boolean;
  bootstrap: string[];
  /** The node's flight recorder: elections, mastership, joins, leaves, prunes and a full disk are recorded there. */
  moments?: RecordMoment;
}

/** Core ticks: liveness, elections and retries advance on this beat. */
const TICK_INTERVAL_MS = 100;
/** How long a membership command waits for the master's answer. */
const COMMAND_TIMEOUT_MS = 15_000;
/**
 * A member that leaves or is removed stays admitted this long, so the record saying so reaches it
 * before its connections close; cut off at once, it could miss it and carry on alone.
 */
const DEPARTED_GRACE_MS = 5_000;

export class ControlPlane implements NodeControl, AsyncDisposable {
  private core: NodeCore;
  private readonly effects: EffectChain<Effect>;
  private readonly waiters = new Map<CommandId, (result: CommandResult) => void>();
  private readonly membership: MembershipService;
  private topics: { clusterId: ClusterId; control: Topic<typeof ControlMessage>; telemetry: Topic<typeof TelemetryMessage> } | null = null;
  private ticker: NodeJS.Timeout | null = null;
  private readonly stateListeners = new Set<() => void>();
  private readonly telemetryListeners = new Set<(message: ResourcesMessage | RunnersMessage | DownloadsMessage | HealthMessage, from: NodeId) => void>();
  private readonly artifactsListeners = new Set<(message: ArtifactsMessage, from: NodeId) => void>();
  private readonly departed = new Map<string, number>();
  private knownMembers = new Set<string>();
  /** What the last `stateChanged` showed, so the next one records what changed as node moments. */
  private glance: PlaneGlance;
  private stopped = false;

  private constructor(
    private readonly options: ControlPlaneOptions,
    private readonly identity: Identity,
    private readonly store: LogStore<LogRecord, ClusterState>,
    private readonly router: Router,
    trusted: TrustedClusters,
    core: NodeCore,
  ) {
    this.core = core;
    this.glance = glanceOf(core.view());
    this.effects = new EffectChain<Effect>({
      run: (effect) => this.runOne(effect),
      failed: (effect, error) => this.persistFailed(effect, error),
      rejected: (error) => this.options.log.error({ err: error }, 'the cluster core rejected an input'),
    });
    this.membership = new MembershipService({ plane: this, router, identity, name: options.name, trusted, log: options.log });
  }

  static async start(options: ControlPlaneOptions): Promise<ControlPlane> {
    const log = options.log.child({ part: 'control' });
    const identity = await loadOrCreateIdentity(options.dataDir);
    // A full disk is a moment once per spell (the store reports the change to degraded, not each refused write).
    const onHealthChange = (health: LogHealth): void => {
      if (health.level !== 'degraded') return;
      const full = /\((ENOSPC|EDQUOT), during (\w+)\)/.exec(health.reason);
      if (full) options.moments?.('disk-full', health.reason, { code: full[1] ?? null, during: full[2] ?? null });
    };
    const store = await LogStore.open<LogRecord, ClusterState>(join(options.dataDir, 'log'), { log, onHealthChange });
    const trusted = await TrustedClusters.load(options.dataDir);
    // The router's admission callbacks read the plane, which exists only once the router does.
    const holder: { plane: ControlPlane | null } = { plane: null };
    const router = await createRouter({
      privateKey: identity.privateKey,
      name: options.name,
      host: options.p2pHost,
      p2pPort: options.p2pPort,
      mdns: options.mdns,
      bootstrap: options.bootstrap,
      clusterId: () => holder.plane?.view().state.clusterId ?? null,
      isMember: (nodeId) => holder.plane?.admits(nodeId) ?? false,
      log,
    });
    const self = selfInfo(identity, options.name, router);
    const core = new NodeCore({ self, clock: { nowMs: () => performance.now() }, random: Math.random, persisted: await loadPersisted(store) });
    const plane = new ControlPlane({ ...options, log }, identity, store, router, trusted, core);
    holder.plane = plane;
    await plane.wire();
    return plane;
  }

  get nodeId(): NodeId {
    return this.identity.nodeId as NodeId;
  }

  get fingerprint(): string {
    return this.identity.fingerprint;
  }

  get p2pAddrs(): string[] {
    return this.router.addrs();
  }

  /** The libp2p router, for the data-plane protocols other parts register (inference, tunnels, logs). */
  get net(): Router {
    return this.router;
  }

  /** Readings (resources, runners, downloads, artifacts, health) go out on the telemetry plane; last write wins per sender and type. */
  publishTelemetry(message: ResourcesMessage | RunnersMessage | DownloadsMessage | ArtifactsMessage | HealthMessage): void {
    const topics = this.topics;
    if (!topics) return;
    topics.telemetry.publish(message, { key: message.type }).catch((error: unknown) => this.options.log.debug({ err: error }, 'telemetry publish failed'));
  }

  onTelemetry(listener: (message: ResourcesMessage | RunnersMessage | DownloadsMessage | HealthMessage, from: NodeId) => void): () => void {
    this.telemetryListeners.add(listener);
    return () => this.telemetryListeners.delete(listener);
  }

  /** Other nodes' artifacts reports (kept apart from onTelemetry, whose listeners file every non-resources reading as runners). */
  onArtifacts(listener: (message: ArtifactsMessage, from: NodeId) => void): () => void {
    this.artifactsListeners.add(listener);
    return () => this.artifactsListeners.delete(listener);
  }

  /** Submits a command to the master (through the core) and waits for its outcome, failures as ShoalErrors. */
  async submit(command: Command): Promise<{ idx: number }> {
    const { promise, resolve } = Promise.withResolvers<CommandResult>();
    const timer = setTimeout(() => resolve({ ok: false, code: 'TIMEOUT', message: `no answer from the master within ${COMMAND_TIMEOUT_MS / 1000} s; it may still take effect` }), COMMAND_TIMEOUT_MS);
    this.feed(() => {
      const { commandId, effects } = this.core.submit(command);
      this.waiters.set(commandId, (result) => {
        clearTimeout(timer);
        resolve(result);
      });
      return effects;
    });
    const result = await promise;
    if (!result.ok) throw new ShoalError(commandErrorCode(result.code), result.message);
    return { idx: result.idx };
  }

  /** Founds a cluster of one if this node has none yet (placing an instance needs a log to record it). */
  ensureClusterExists(): Promise<ClusterId> {
    return this.membership.ensureCluster();
  }

  view(): CoreView {
    return this.core.view();
  }

  onStateChange(listener: () => void): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  /** Admission: members, plus — while joining — the nodes that say they belong to the approved cluster. */
  private admits(nodeId: string): boolean {
    if (nodeId === this.identity.nodeId) return true;
    const state = this.core.view().state;
    if (liveMembers(state)[nodeId as NodeId] !== undefined) return true;
    const graceUntil = this.departed.get(nodeId);
    if (graceUntil !== undefined) {
      if (performance.now() < graceUntil) return true;
      this.departed.delete(nodeId);
    }
    return this.membership.admitsWhileJoining(nodeId);
  }

  private async wire(): Promise<void> {
    const { router } = this;
    await router.handle(SYNC_PROTOCOL, (message, { from }) => {
      this.options.log.debug({ from, type: (message as CoreMessage).type, role: this.core.view().role }, 'sync message');
      this.feed(() => this.core.receive(from as NodeId, message as CoreMessage));
      return { ok: true };
    }, { schema: SyncMessage, maxMessageBytes: MAX_MESSAGE_BYTES.sync });
    await this.membership.wire();
    router.onPeerUp((nodeId) => this.feed(() => this.core.peerUp(nodeId as NodeId)));
    router.onPeerDown((nodeId) => this.feed(() => this.core.peerDown(nodeId as NodeId)));
    this.syncClusterWiring();
    this.ticker = setInterval(() => this.feed(() => this.core.tick()), TICK_INTERVAL_MS);
  }

  /** Runs a core call and queues its effects behind every earlier effect (src/cluster/effect-chain.ts). */
  private feed(call: () => Effect[]): void {
    if (this.stopped) return;
    this.effects.feed(call);
  }

  /** A durable effect that did not reach the disk voids everything the core did after it: rebuild the core from what the disk really holds. */
  private async persistFailed(effect: Effect, error: unknown): Promise<void> {
    const failure = toShoalError(error);
    this.options.log.error({ code: failure.code, effect: effect.type }, `could not persist: ${failure.message}`);
    const code = failure.code === 'DISK_FULL' ? 'DISK_FULL' : 'TIMEOUT';
    for (const resolve of this.waiters.values()) resolve({ ok: false, code, message: `this node could not persist: ${failure.message}` });
    this.waiters.clear();
    await this.rebuildCore();
  }

  private async runOne(effect: Effect): Promise<void> {
    switch (effect.type) {
      case 'persistTerm':
        return this.store.saveTerm(effect.term);
      case 'append':
        return this.store.append(effect.records);
      case 'truncate':
        return this.store.truncateAfter(effect.afterIdx);
      case 'snapshot':
        await this.store.saveSnapshot(effect.snapshot as Snapshot);
        await this.store.compactBefore(Math.min(effect.snapshot.idx, this.core.compactable()));
        return;
      case 'installSnapshot':
        await this.store.saveSnapshot(effect.snapshot as Snapshot);
        return this.store.resetAfter(effect.snapshot.idx);
      case 'reset':
        await this.store.resetAfter(0);
        return this.store.saveTerm(0);
      case 'publish': {
        const topics = this.topics;
        if (!topics) return;
        const publishing = effect.plane === 'control' ? topics.control.publish(effect.message) : topics.telemetry.publish(effect.message, { key: effect.message.type });
        // Delivery is best effort by design (the log catches up what gossip loses); never block effects on it.
        publishing.catch((error: unknown) => this.options.log.debug({ err: error }, 'publish failed'));
        return;
      }
      case 'send':
        this.router
          .request(effect.to, SYNC_PROTOCOL, effect.message, { timeoutMs: 20_000, maxMessageBytes: MAX_MESSAGE_BYTES.sync })
          .catch((error: unknown) => this.options.log.debug({ err: error, to: effect.to }, 'sync send failed'));
        return;
      case 'ack': {
        const waiter = this.waiters.get(effect.commandId);
        this.waiters.delete(effect.commandId);
        waiter?.(effect.result);
        return;
      }
      case 'stateChanged': {
        const glance = glanceOf(this.core.view());
        for (const moment of planeMoments(this.nodeId, this.glance, glance)) this.options.moments?.(moment.kind, moment.text, moment.data);
        this.glance = glance;
        this.syncClusterWiring();
        for (const listener of this.stateListeners) listener();
        return;
      }
    }
  }

  private async rebuildCore(): Promise<void> {
    const self = selfInfo(this.identity, this.options.name, this.router);
    this.core = new NodeCore({ self, clock: { nowMs: () => performance.now() }, random: Math.random, persisted: await loadPersisted(this.store) });
    this.syncClusterWiring();
  }

  /** Keeps topics and the router's roster in step with the replicated membership. */
  private syncClusterWiring(): void {
    const state = this.core.view().state;
    const members = Object.values(state.members);
    const current = new Set<string>(members.map((m) => m.nodeId));
    for (const nodeId of this.knownMembers) if (!current.has(nodeId)) this.departed.set(nodeId, performance.now() + DEPARTED_GRACE_MS);
    this.knownMembers = current;
    this.router.updateRoster(members.filter((m) => m.nodeId !== this.identity.nodeId).map((m) => ({ nodeId: m.nodeId, addrs: m.addrs })));
    const clusterId = state.dissolved ? null : state.clusterId;
    if (this.topics?.clusterId === clusterId) return;
    if (this.topics) {
      this.router.unregisterTopic(this.topics.control.name);
      this.router.unregisterTopic(this.topics.telemetry.name);
      this.topics = null;
    }
    if (clusterId === null) return;
    this.membership.clusterReached(clusterId);
    const control = this.router.registerTopic({ name: controlTopic(clusterId), schema: ControlMessage, plane: 'control', maxBytes: MAX_MESSAGE_BYTES.control });
    const telemetry = this.router.registerTopic({ name: telemetryTopic(clusterId), schema: TelemetryMessage, plane: 'telemetry', maxBytes: MAX_MESSAGE_BYTES.telemetry });
    control.subscribe((message, meta) => this.feed(() => this.core.receive(meta.from as NodeId, message as CoreMessage)));
    telemetry.subscribe((message, meta) => {
      const typed = message as TelemetryMessage;
      if (typed.type === 'artifacts') {
        if (typed.nodeId === meta.from) for (const listener of this.artifactsListeners) listener(typed, meta.from as NodeId);
      } else if (typed.type !== 'heartbeat' && typed.nodeId === meta.from) {
        for (const listener of this.telemetryListeners) listener(typed, meta.from as NodeId);
      }
      this.feed(() => this.core.receive(meta.from as NodeId, typed));
    });
    this.topics = { clusterId, control, telemetry };
  }

  // ---- NodeControl ----

  /** This node's own persistence health: degraded while its event log cannot be written (a full disk). */
  health(): { level: 'ok' | 'degraded'; reasons: { code: string; text: string; remediation: string }[] } {
    const store = this.store.health();
    return store.level === 'ok' ? { level: 'ok', reasons: [] } : { level: 'degraded', reasons: [{ code: 'log-not-persisted', text: store.reason, remediation: store.remediation }] };
  }

  status(): StatusView {
    const view = this.core.view();
    const state = view.state;
    const members = Object.values(liveMembers(state)).map((m) => {
      const health = m.nodeId === this.identity.nodeId ? { level: 'ok' as const, reasons: [] } : (view.health[m.nodeId] ?? { level: 'ok' as const, reasons: [] });
      return {
        nodeId: m.nodeId,
        name: m.name,
        nickname: m.nickname,
        fingerprint: m.fingerprint,
        isMaster: m.nodeId === view.masterId,
        isSelf: m.nodeId === this.identity.nodeId,
        hostPreferred: m.hostPreferred,
        health: { level: health.level, reasons: health.reasons },
      };
    });
    const member = state.clusterId !== null && !state.dissolved && state.members[this.nodeId] !== undefined;
    return {
      nodeId: this.identity.nodeId,
      name: this.options.name,
      version: shoalVersion(),
      // The node's API knows its keys (src/node/control.ts); the plane serves no inference.
      apiKeyRequired: false,
      fingerprint: this.identity.fingerprint,
      addrs: this.router.addrs().map((a) => `${a}/p2p/${this.nodeId}`),
      clusterId: member ? state.clusterId : null,
      role: member ? 'member' : 'standalone',
      masterId: view.masterId,
      term: view.term,
      lastIdx: view.lastIdx,
      stateHash: view.stateHash,
      members,
      discovered: this.membership.discoveredView(state),
      invitations: this.membership.invitationsView(),
      health: this.health(),
      models: [],
      instances: [],
      resources: {},
      links: [],
      artifacts: {},
      downloads: {},
      settings: state.settings,
    };
  }

  invite(target: string): Promise<{ invitationId: string; nodeId: string }> {
    return this.membership.invite(target);
  }

  inviteCode(): Promise<{ code: string; expiresAt: string }> {
    return this.membership.inviteCode();
  }

  join(code: string): Promise<{ clusterId: string }> {
    return this.membership.join(code);
  }

  approve(selector: string | null): Promise<{ clusterId: string }> {
    return this.membership.approve(selector);
  }

  decline(selector: string | null): Promise<void> {
    return this.membership.decline(selector);
  }

  remove(target: string): Promise<void> {
    return this.membership.remove(target);
  }

  leave(): Promise<void> {
    return this.membership.leave();
  }

  dissolve(): Promise<void> {
    return this.membership.dissolve();
  }

  nickname(target: string, nickname: string | null): Promise<void> {
    return this.membership.nickname(target, nickname);
  }

  makeHost(target: string): Promise<void> {
    return this.membership.makeHost(target);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.ticker) clearInterval(this.ticker);
    await this.effects.close();
    await this.router.stop();
    await this.store.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

function glanceOf(view: CoreView): PlaneGlance {
  const members: PlaneGlance['members'] = {};
  for (const m of Object.values(liveMembers(view.state))) members[m.nodeId] = { name: m.name, status: m.status };
  return { role: view.role, term: view.term, masterId: view.masterId, members };
}

function selfInfo(identity: Identity, name: string, router: Router): MemberInfo {
  return { nodeId: identity.nodeId as NodeId, name, fingerprint: identity.fingerprint, addrs: router.addrs().slice(0, 16) } as MemberInfo;
}

async function loadPersisted(store: LogStore<LogRecord, ClusterState>): Promise<{ term: number; snapshot: Snapshot | null; records: LogRecord[] }> {
  const loaded = await store.loadSnapshot();
  const parsed = loaded === null ? null : Snapshot.safeParse(loaded);
  if (parsed && !parsed.success) {
    throw new ShoalError('LOG_CORRUPT', `the newest snapshot in ${store.dir} is incomplete (${parsed.error.issues[0]?.message ?? 'invalid'}): stop the node, move that directory aside and start again to rejoin from the cluster`);
  }
  const snapshot = parsed?.data ?? null;
  const records: LogRecord[] = [];
  for (let from = (snapshot?.idx ?? 0) + 1; ; ) {
    const page = await store.read(from, 4096);
    records.push(...page);
    if (page.length < 4096) break;
    from = page.at(-1)!.idx + 1;
  }
  return { term: await store.loadTerm(), snapshot, records };
}

/** Command answers in Shoal's error codes, so the control API maps them to statuses in one place. */
function commandErrorCode(code: string): 'BAD_REQUEST' | 'NOT_FOUND' | 'UNAUTHORIZED' | 'INTERNAL' | 'PLACEMENT_FAILED' | 'DISK_FULL' {
  switch (code) {
    case 'DISK_FULL':
      return 'DISK_FULL';
    case 'NODE_UNAVAILABLE':
    case 'TOO_MANY_INSTANCES':
      return 'PLACEMENT_FAILED';
    case 'INSTANCE_NOT_FOUND':
    case 'MEMBER_NOT_FOUND':
    case 'NO_CLUSTER':
      return 'NOT_FOUND';
    case 'NOT_A_MEMBER':
    case 'FORBIDDEN':
      return 'UNAUTHORIZED';
    case 'TIMEOUT':
      return 'INTERNAL';
    default:
      return 'BAD_REQUEST';
  }
}
