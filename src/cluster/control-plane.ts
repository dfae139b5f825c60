import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ShoalError, toShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import type { NodeControl, StatusView } from '../api/control/control.js';
import { MAX_MESSAGE_BYTES, SYNC_PROTOCOL, ControlMessage, SyncMessage, TelemetryMessage, type ArtifactsMessage, type CoreMessage, type ResourcesMessage, type RunnersMessage } from '../master/core/messages.js';
import type { Effect } from '../master/core/effects.js';
import { NodeCore, type CoreView } from '../master/core/node-core.js';
import { LogStore } from '../master/log/store.js';
import type { Command, CommandResult } from '../master/state/commands.js';
import type { MemberInfo } from '../master/state/events.js';
import type { ClusterId, CommandId, Fingerprint, NodeId } from '../common/ids.js';
import { Snapshot, type LogRecord } from '../master/state/record.js';
import type { ClusterState } from '../master/state/state.js';
import { loadOrCreateIdentity, type Identity } from '../membership/identity.js';
import { buildInviteAccept, buildJoinRequest, describeRefusal, InvitationBook } from '../membership/invitations.js';
import { decodeJoinCode, encodeJoinCode, joinCodeFor } from '../membership/join-code.js';
import { INVITE_PROTOCOL, InviteMessage, type InviteResult } from '../membership/messages.js';
import { PendingInvitations } from '../membership/pending.js';
import { TrustedClusters } from '../membership/trusted.js';
import { createRouter, type PeerHello, type Router, type Topic } from '../router/index.js';

/**
 * The thin shell around the pure cluster core: it owns the clock, the log on disk, the libp2p router
 * and the membership books, feeds the core what happens and carries out the effects it returns, in
 * order, durable ones first (see src/master/core/effects.ts).
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
}

/** Core ticks: liveness, elections and retries advance on this beat. */
const TICK_INTERVAL_MS = 100;
/** How long a membership command waits for the master's answer. */
const COMMAND_TIMEOUT_MS = 15_000;
/** How long an approved node waits for the cluster's snapshot before it reports failure. */
const JOIN_TIMEOUT_MS = 30_000;
/** A non-member unseen this long drops off "nodes on this network". */
const DISCOVERED_TTL_MS = 10_000;
const INVITE_REQUEST_TIMEOUT_MS = 10_000;
/**
 * A member that leaves or is removed stays admitted this long, so the record saying so reaches it
 * before its connections close; cut off at once, it could miss it and carry on alone.
 */
const DEPARTED_GRACE_MS = 5_000;

interface Discovered {
  hello: PeerHello;
  lastSeenMs: number;
}

export class ControlPlane implements NodeControl, AsyncDisposable {
  private core: NodeCore;
  private effects: Promise<void> = Promise.resolve();
  private readonly waiters = new Map<CommandId, (result: CommandResult) => void>();
  private readonly discovered = new Map<string, Discovered>();
  private readonly book = new InvitationBook();
  private readonly pending: PendingInvitations;
  /** The cluster this node approved joining, and who invited it: they may reach it before the snapshot arrives. */
  private joining: { clusterId: ClusterId; inviter: NodeId } | null = null;
  private topics: { clusterId: ClusterId; control: Topic<typeof ControlMessage>; telemetry: Topic<typeof TelemetryMessage> } | null = null;
  private ticker: NodeJS.Timeout | null = null;
  private readonly stateListeners = new Set<() => void>();
  private readonly telemetryListeners = new Set<(message: ResourcesMessage | RunnersMessage, from: NodeId) => void>();
  private readonly artifactsListeners = new Set<(message: ArtifactsMessage, from: NodeId) => void>();
  private readonly departed = new Map<string, number>();
  private knownMembers = new Set<string>();
  private stopped = false;

  private constructor(
    private readonly options: ControlPlaneOptions,
    private readonly identity: Identity,
    private readonly store: LogStore<LogRecord, ClusterState>,
    private readonly router: Router,
    private readonly trusted: TrustedClusters,
    core: NodeCore,
  ) {
    this.core = core;
    this.pending = new PendingInvitations({ selfNodeId: identity.nodeId });
  }

  static async start(options: ControlPlaneOptions): Promise<ControlPlane> {
    const log = options.log.child({ part: 'control' });
    const identity = await loadOrCreateIdentity(options.dataDir);
    const store = await LogStore.open<LogRecord, ClusterState>(join(options.dataDir, 'log'), { log });
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

  /** Readings (resources, runners, artifacts) go out on the telemetry plane; last write wins per sender and type. */
  publishTelemetry(message: ResourcesMessage | RunnersMessage | ArtifactsMessage): void {
    const topics = this.topics;
    if (!topics) return;
    topics.telemetry.publish(message, { key: message.type }).catch((error: unknown) => this.options.log.debug({ err: error }, 'telemetry publish failed'));
  }

  onTelemetry(listener: (message: ResourcesMessage | RunnersMessage, from: NodeId) => void): () => void {
    this.telemetryListeners.add(listener);
    return () => this.telemetryListeners.delete(listener);
  }

  /** Other nodes' artifacts reports (kept apart from onTelemetry, whose listeners file every non-resources reading as runners). */
  onArtifacts(listener: (message: ArtifactsMessage, from: NodeId) => void): () => void {
    this.artifactsListeners.add(listener);
    return () => this.artifactsListeners.delete(listener);
  }

  /** Submits a command to the master and waits for its outcome (typed errors as the membership commands). */
  submit(command: Command): Promise<{ idx: number }> {
    return this.command(command);
  }

  /** Founds a cluster of one if this node has none yet (placing an instance needs a log to record it). */
  ensureClusterExists(): Promise<ClusterId> {
    return this.ensureCluster();
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
    // The inviter's hello may predate the cluster (it founds one when it first invites), so it is named.
    return this.joining !== null && (nodeId === this.joining.inviter || this.router.helloOf(nodeId)?.clusterId === this.joining.clusterId);
  }

  private async wire(): Promise<void> {
    const { router } = this;
    await router.handle(SYNC_PROTOCOL, (message, { from }) => {
      this.options.log.debug({ from, type: (message as CoreMessage).type, role: this.core.view().role }, 'sync message');
      this.feed(() => this.core.receive(from as NodeId, message as CoreMessage));
      return { ok: true };
    }, { schema: SyncMessage, maxMessageBytes: MAX_MESSAGE_BYTES.sync });
    await router.handle(INVITE_PROTOCOL, (message, { from }) => this.onInvite(message as InviteMessage, from as NodeId), {
      schema: InviteMessage,
      maxMessageBytes: 8192,
    });
    router.onHello((hello) => {
      if (hello.nodeId === this.identity.nodeId) return;
      this.discovered.set(hello.nodeId, { hello, lastSeenMs: performance.now() });
    });
    router.onPeerUp((nodeId) => this.feed(() => this.core.peerUp(nodeId as NodeId)));
    router.onPeerDown((nodeId) => {
      this.discovered.delete(nodeId);
      this.feed(() => this.core.peerDown(nodeId as NodeId));
    });
    this.syncClusterWiring();
    this.ticker = setInterval(() => this.feed(() => this.core.tick()), TICK_INTERVAL_MS);
  }

  /** Runs a core call and queues its effects behind every earlier effect. */
  private feed(call: () => Effect[]): void {
    if (this.stopped) return;
    let effects: Effect[];
    try {
      effects = call();
    } catch (error) {
      this.options.log.error({ err: error }, 'the cluster core rejected an input');
      return;
    }
    if (effects.length === 0) return;
    this.effects = this.effects.then(() => this.run(effects));
  }

  private async run(effects: Effect[]): Promise<void> {
    for (const effect of effects) {
      try {
        await this.runOne(effect);
      } catch (error) {
        // A durable effect that did not reach the disk voids everything the core did after it:
        // drop the rest and rebuild the core from what the disk really holds.
        const failure = toShoalError(error);
        this.options.log.error({ code: failure.code, effect: effect.type }, `could not persist: ${failure.message}`);
        for (const resolve of this.waiters.values()) resolve({ ok: false, code: 'TIMEOUT', message: `this node could not persist: ${failure.message}` });
        this.waiters.clear();
        await this.rebuildCore();
        return;
      }
    }
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
      case 'stateChanged':
        this.syncClusterWiring();
        for (const listener of this.stateListeners) listener();
        return;
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
    if (this.joining?.clusterId === clusterId) this.joining = null;
    const control = this.router.registerTopic({ name: `shoal/${clusterId}/control/v1`, schema: ControlMessage, plane: 'control', maxBytes: MAX_MESSAGE_BYTES.control });
    const telemetry = this.router.registerTopic({ name: `shoal/${clusterId}/telemetry/v1`, schema: TelemetryMessage, plane: 'telemetry', maxBytes: MAX_MESSAGE_BYTES.telemetry });
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

  /** Submits a command to the master (through the core) and waits for its outcome. */
  private async command(command: Command): Promise<{ idx: number }> {
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

  private async ensureCluster(): Promise<ClusterId> {
    let state = this.core.view().state;
    if (state.clusterId !== null && !state.dissolved) return state.clusterId;
    // A dissolving master lingers until the others have the news; a new cluster waits for that.
    const deadline = performance.now() + JOIN_TIMEOUT_MS;
    while (state.clusterId !== null && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      state = this.core.view().state;
    }
    if (state.clusterId !== null) throw new ShoalError('BAD_REQUEST', 'the previous cluster is still winding down: try again in a few seconds');
    const clusterId = randomBytes(16).toString('hex') as ClusterId;
    await this.command({ type: 'FoundCluster', clusterId, founder: selfInfo(this.identity, this.options.name, this.router) });
    this.options.log.info({ clusterId }, 'founded a cluster');
    return clusterId;
  }

  private inviterInfo(): { nodeId: NodeId; name: string; fingerprint: Fingerprint } {
    return { nodeId: this.nodeId, name: this.options.name, fingerprint: this.identity.fingerprint as Fingerprint };
  }

  private async onInvite(message: InviteMessage, from: NodeId): Promise<InviteResult> {
    const state = this.core.view().state;
    const refused = (code: InviteResult['code'], text: string): InviteResult => ({ type: 'invite-result', ok: false, clusterId: state.clusterId ?? ('0'.repeat(32) as ClusterId), code, message: text }) as InviteResult;
    switch (message.type) {
      case 'invite-offer': {
        const outcome = this.pending.receive(message, from);
        if (!outcome.ok) return refused('identity-mismatch', 'this invitation is not for this node');
        this.options.log.info({ from, fingerprint: outcome.pending.fingerprint }, `invitation from ${outcome.pending.fromName}: approve with 'shoal approve' after comparing fingerprints`);
        // A cluster this node approved before, offered by a key it knows, is joined without asking again.
        if (this.trusted.isTrusted(message.clusterId, outcome.pending.fingerprint)) {
          setImmediate(() => void this.approve(message.id).catch((error: unknown) => this.options.log.warn({ err: error }, 'automatic approval failed')));
        }
        return { type: 'invite-result', ok: true, clusterId: message.clusterId } as InviteResult;
      }
      case 'invite-accept':
      case 'join-request': {
        const verdict = message.type === 'invite-accept' ? this.book.accept(message, from) : this.book.redeem(message, from);
        if (!verdict.ok) return refused(verdict.refusal, describeRefusal(verdict.refusal));
        try {
          await this.command({ type: 'AdmitMember', member: { ...message.member, addrs: message.member.addrs.slice(0, 16) } as MemberInfo });
        } catch (error) {
          return refused('admission-failed', toShoalError(error).message);
        }
        this.options.log.info({ nodeId: from, name: message.member.name }, 'admitted a member');
        return { type: 'invite-result', ok: true, clusterId: verdict.invitation.clusterId } as InviteResult;
      }
      case 'invite-decline':
        this.book.decline(message.id, from);
        return { type: 'invite-result', ok: true, clusterId: state.clusterId ?? ('0'.repeat(32) as ClusterId) } as InviteResult;
      case 'invite-result':
        return refused('unknown-invitation', 'a result is an answer, not a request');
    }
  }

  private memberClaim(): { nodeId: NodeId; name: string; fingerprint: Fingerprint; addrs: string[] } {
    return { nodeId: this.nodeId, name: this.options.name, fingerprint: this.identity.fingerprint as Fingerprint, addrs: this.router.addrs().slice(0, 16) };
  }

  /** Waits until the approved cluster's snapshot made this node a member. */
  private async awaitMembership(clusterId: ClusterId): Promise<void> {
    const deadline = performance.now() + JOIN_TIMEOUT_MS;
    while (performance.now() < deadline) {
      const state = this.core.view().state;
      if (state.clusterId === clusterId && state.members[this.nodeId] !== undefined) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new ShoalError('NOT_FOUND', `the cluster accepted this node but its state did not arrive within ${JOIN_TIMEOUT_MS / 1000} s: check that the members can reach this machine on its p2p port`);
  }

  private resolveMember(target: string): MemberInfo {
    const state = this.core.view().state;
    const members = Object.values(state.members);
    const exact = members.find((m) => m.nodeId === target);
    if (exact) return exact;
    const byName = members.filter((m) => m.name === target || m.nickname === target);
    if (byName.length === 1) return byName[0]!;
    if (byName.length > 1) throw new ShoalError('BAD_REQUEST', `'${target}' names ${byName.length} members: use the node id (${byName.map((m) => m.nodeId).join(', ')})`);
    throw new ShoalError('NOT_FOUND', `no member is called '${target}': 'shoal status' lists the members`);
  }

  // ---- NodeControl ----

  status(): StatusView {
    const view = this.core.view();
    const state = view.state;
    const now = performance.now();
    for (const [id, d] of this.discovered) if (now - d.lastSeenMs > DISCOVERED_TTL_MS && !this.router.isConnected(id)) this.discovered.delete(id);
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
    const storeHealth = this.store.health();
    const member = state.clusterId !== null && !state.dissolved && state.members[this.nodeId] !== undefined;
    return {
      nodeId: this.identity.nodeId,
      name: this.options.name,
      fingerprint: this.identity.fingerprint,
      addrs: this.router.addrs().map((a) => `${a}/p2p/${this.nodeId}`),
      clusterId: member ? state.clusterId : null,
      role: member ? 'member' : 'standalone',
      masterId: view.masterId,
      term: view.term,
      lastIdx: view.lastIdx,
      stateHash: view.stateHash,
      members,
      discovered: [...this.discovered.values()]
        .filter((d) => liveMembers(state)[d.hello.nodeId as NodeId] === undefined)
        .map((d) => ({ nodeId: d.hello.nodeId, name: d.hello.name, fingerprint: d.hello.fingerprint, addrs: d.hello.addrs })),
      invitations: this.pending.list().map((p) => ({
        id: p.id,
        fromNodeId: p.fromNodeId,
        fromName: p.fromName,
        fingerprint: p.fingerprint,
        clusterId: p.clusterId,
        expiresAt: new Date(p.expiresAtMs).toISOString(),
      })),
      health: storeHealth.level === 'ok' ? { level: 'ok', reasons: [] } : { level: 'degraded', reasons: [{ text: storeHealth.reason, remediation: storeHealth.remediation }] },
      models: [],
      instances: [],
      resources: {},
      links: [],
      artifacts: {},
    };
  }

  async invite(target: string): Promise<{ invitationId: string; nodeId: string }> {
    const candidates = [...this.discovered.values()].filter((d) => d.hello.nodeId === target || d.hello.name === target);
    if (candidates.length === 0) throw new ShoalError('NOT_FOUND', `no node called '${target}' is on this network: 'shoal status' lists the nodes this one sees; use 'shoal invite --code' for a node it cannot see`);
    if (candidates.length > 1) throw new ShoalError('BAD_REQUEST', `'${target}' names ${candidates.length} nodes: invite by node id`);
    const invitee = candidates[0]!.hello;
    if (liveMembers(this.core.view().state)[invitee.nodeId as NodeId]) throw new ShoalError('BAD_REQUEST', `${invitee.name} is already a member`);
    const clusterId = await this.ensureCluster();
    const invitation = this.book.create({ clusterId, inviter: this.inviterInfo(), inviteeNodeId: invitee.nodeId as NodeId });
    const result = await this.router.request<InviteResult>(invitee.nodeId, INVITE_PROTOCOL, this.book.offerFor(invitation), { timeoutMs: INVITE_REQUEST_TIMEOUT_MS, schema: InviteMessage as never });
    if (!result.ok) throw new ShoalError('BAD_REQUEST', `${invitee.name} refused the invitation: ${result.message ?? result.code}`);
    return { invitationId: invitation.id, nodeId: invitee.nodeId };
  }

  async inviteCode(): Promise<{ code: string; expiresAt: string }> {
    const clusterId = await this.ensureCluster();
    const invitation = this.book.createForJoinCode({ clusterId, inviter: this.inviterInfo() });
    const addrs = this.router.addrs().filter((a) => !a.includes('/127.0.0.1/') || this.router.addrs().every((b) => b.includes('/127.0.0.1/')));
    return { code: encodeJoinCode(joinCodeFor(invitation, addrs.map((a) => `${a}/p2p/${this.nodeId}`))), expiresAt: new Date(invitation.expiresAtMs).toISOString() };
  }

  async join(text: string): Promise<{ clusterId: string }> {
    const code = decodeJoinCode(text);
    if (this.core.view().state.clusterId !== null && !this.core.view().state.dissolved) {
      throw new ShoalError('BAD_REQUEST', "this node is already in a cluster: run 'shoal leave' first");
    }
    let reached = false;
    for (const addr of code.addrs) {
      try {
        await this.router.dial(addr);
        reached = true;
        break;
      } catch (error) {
        this.options.log.debug({ err: error, addr }, 'join: address unreachable');
      }
    }
    if (!reached) throw new ShoalError('NOT_FOUND', `none of the inviter's addresses answered (${code.addrs.join(', ')}): check the network between the two machines`);
    this.joining = { clusterId: code.clusterId, inviter: code.inviter.nodeId as NodeId };
    const result = await this.router.request<InviteResult>(code.inviter.nodeId, INVITE_PROTOCOL, buildJoinRequest(code, this.memberClaim()), { timeoutMs: INVITE_REQUEST_TIMEOUT_MS });
    if (!result.ok) {
      this.joining = null;
      throw new ShoalError('BAD_REQUEST', `the cluster refused the join code: ${result.message ?? result.code}`);
    }
    await this.trusted.remember(code.clusterId, [code.inviter.fingerprint]);
    await this.awaitMembership(code.clusterId);
    return { clusterId: code.clusterId };
  }

  async approve(selector: string | null): Promise<{ clusterId: string }> {
    const invitation = this.pending.approve(selector ?? undefined);
    this.joining = { clusterId: invitation.clusterId, inviter: invitation.fromNodeId as NodeId };
    const result = await this.router.request<InviteResult>(invitation.fromNodeId, INVITE_PROTOCOL, buildInviteAccept(invitation.offer, this.memberClaim()), { timeoutMs: INVITE_REQUEST_TIMEOUT_MS });
    if (!result.ok) {
      this.joining = null;
      throw new ShoalError('BAD_REQUEST', `${invitation.fromName} did not admit this node: ${result.message ?? result.code}`);
    }
    await this.trusted.remember(invitation.clusterId, [invitation.fingerprint]);
    await this.awaitMembership(invitation.clusterId);
    return { clusterId: invitation.clusterId };
  }

  async decline(selector: string | null): Promise<void> {
    const invitation = this.pending.decline(selector ?? undefined);
    await this.router
      .request(invitation.fromNodeId, INVITE_PROTOCOL, { type: 'invite-decline', id: invitation.id }, { timeoutMs: INVITE_REQUEST_TIMEOUT_MS })
      .catch((error: unknown) => this.options.log.debug({ err: error }, 'could not tell the inviter about the decline'));
  }

  async remove(target: string): Promise<void> {
    const member = this.resolveMember(target);
    if (member.nodeId === this.nodeId) throw new ShoalError('BAD_REQUEST', "to take this node out, use 'shoal leave'");
    await this.command({ type: 'RemoveMember', nodeId: member.nodeId });
  }

  async leave(): Promise<void> {
    await this.command({ type: 'LeaveCluster', nodeId: this.nodeId });
  }

  async dissolve(): Promise<void> {
    await this.command({ type: 'DissolveCluster' });
  }

  async nickname(target: string, nickname: string | null): Promise<void> {
    await this.command({ type: 'SetNickname', nodeId: this.resolveMember(target).nodeId, nickname });
  }

  async makeHost(target: string): Promise<void> {
    await this.command({ type: 'SetHostPreference', nodeId: this.resolveMember(target).nodeId, preferred: true });
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.ticker) clearInterval(this.ticker);
    await this.effects.catch(() => undefined);
    await this.router.stop();
    await this.store.close();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** The roster of a cluster that still exists; a dissolved cluster's last roster admits nobody. */
function liveMembers(state: ClusterState): ClusterState['members'] {
  return state.dissolved ? {} : state.members;
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
function commandErrorCode(code: string): 'BAD_REQUEST' | 'NOT_FOUND' | 'UNAUTHORIZED' | 'INTERNAL' | 'PLACEMENT_FAILED' {
  switch (code) {
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
