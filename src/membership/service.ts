// Membership on a live node: the invitation conversations over /shoal/invite/1 (invite, join code,
// join, approve, decline), the books they keep (invitations this node issued, invitations it received,
// clusters it trusts, nodes it sees on the network), and the roster commands the CLI names members in.
// What membership decides goes to the master as commands through the control plane (MembershipPlane).

import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { StatusView } from '../api/control/control.js';
import { ShoalError, toShoalError } from '../common/errors.js';
import type { ClusterId, Fingerprint, NodeId } from '../common/ids.js';
import type { Logger } from '../common/log.js';
import type { Command } from '../master/state/commands.js';
import type { MemberInfo } from '../master/state/events.js';
import type { ClusterState } from '../master/state/state.js';
import type { PeerHello, Router } from '../router/index.js';
import type { Identity } from './identity.js';
import { buildInviteAccept, buildJoinRequest, describeRefusal, InvitationBook } from './invitations.js';
import { decodeJoinCode, encodeJoinCode, joinCodeFor } from './join-code.js';
import { INVITE_PROTOCOL, InviteMessage, type InviteResult } from './messages.js';
import { PendingInvitations } from './pending.js';
import type { TrustedClusters } from './trusted.js';

/** How long an approved node waits for the cluster's snapshot before it reports failure. */
const JOIN_TIMEOUT_MS = 30_000;
/** A non-member unseen this long drops off "nodes on this network". */
const DISCOVERED_TTL_MS = 10_000;
const INVITE_REQUEST_TIMEOUT_MS = 10_000;
const INVITE_MESSAGE_MAX_BYTES = 8192;

/** What membership needs of the control plane (ControlPlane provides it). */
export interface MembershipPlane {
  readonly nodeId: NodeId;
  view(): { state: ClusterState };
  /** Submits a command to the master and waits for its outcome (typed errors). */
  submit(command: Command): Promise<{ idx: number }>;
}

export interface MembershipServiceOptions {
  plane: MembershipPlane;
  router: Router;
  identity: Identity;
  name: string;
  trusted: TrustedClusters;
  log: Logger;
}

interface Discovered {
  hello: PeerHello;
  lastSeenMs: number;
}

/** The roster of a cluster that still exists; a dissolved cluster's last roster admits nobody. */
export function liveMembers(state: ClusterState): ClusterState['members'] {
  return state.dissolved ? {} : state.members;
}

export class MembershipService {
  private readonly discovered = new Map<string, Discovered>();
  private readonly book = new InvitationBook();
  private readonly pending: PendingInvitations;
  /** The cluster this node approved joining, and who invited it: they may reach it before the snapshot arrives. */
  private joining: { clusterId: ClusterId; inviter: NodeId } | null = null;

  constructor(private readonly options: MembershipServiceOptions) {
    this.pending = new PendingInvitations({ selfNodeId: options.identity.nodeId });
  }

  /** Serves the invitation protocol and keeps the book of nodes seen on the network. */
  async wire(): Promise<void> {
    const { router } = this.options;
    await router.handle(INVITE_PROTOCOL, (message, { from }) => this.onInvite(message as InviteMessage, from as NodeId), {
      schema: InviteMessage,
      maxMessageBytes: INVITE_MESSAGE_MAX_BYTES,
    });
    router.onHello((hello) => {
      if (hello.nodeId === this.options.identity.nodeId) return;
      this.discovered.set(hello.nodeId, { hello, lastSeenMs: performance.now() });
    });
    router.onPeerDown((nodeId) => this.discovered.delete(nodeId));
  }

  /** Admission while joining: the inviter and the nodes that say they belong to the approved cluster. */
  admitsWhileJoining(nodeId: string): boolean {
    // The inviter's hello may predate the cluster (it founds one when it first invites), so it is named.
    return this.joining !== null && (nodeId === this.joining.inviter || this.options.router.helloOf(nodeId)?.clusterId === this.joining.clusterId);
  }

  /** The replicated state now names `clusterId`: a join into it is over. */
  clusterReached(clusterId: ClusterId): void {
    if (this.joining?.clusterId === clusterId) this.joining = null;
  }

  /** Non-members seen on the network lately, for status. */
  discoveredView(state: ClusterState): StatusView['discovered'] {
    const now = performance.now();
    for (const [id, d] of this.discovered) if (now - d.lastSeenMs > DISCOVERED_TTL_MS && !this.options.router.isConnected(id)) this.discovered.delete(id);
    return [...this.discovered.values()]
      .filter((d) => liveMembers(state)[d.hello.nodeId as NodeId] === undefined)
      .map((d) => ({ nodeId: d.hello.nodeId, name: d.hello.name, fingerprint: d.hello.fingerprint, addrs: d.hello.addrs }));
  }

  /** Invitations this node received and has not answered, for status. */
  invitationsView(): StatusView['invitations'] {
    return this.pending.list().map((p) => ({
      id: p.id,
      fromNodeId: p.fromNodeId,
      fromName: p.fromName,
      fingerprint: p.fingerprint,
      clusterId: p.clusterId,
      expiresAt: new Date(p.expiresAtMs).toISOString(),
    }));
  }

  async invite(target: string): Promise<{ invitationId: string; nodeId: string }> {
    const candidates = [...this.discovered.values()].filter((d) => d.hello.nodeId === target || d.hello.name === target);
    if (candidates.length === 0) throw new ShoalError('NOT_FOUND', `no node called '${target}' is on this network: 'shoal status' lists the nodes this one sees; use 'shoal invite --code' for a node it cannot see`);
    if (candidates.length > 1) throw new ShoalError('BAD_REQUEST', `'${target}' names ${candidates.length} nodes: invite by node id`);
    const invitee = candidates[0]!.hello;
    if (liveMembers(this.options.plane.view().state)[invitee.nodeId as NodeId]) throw new ShoalError('BAD_REQUEST', `${invitee.name} is already a member`);
    const clusterId = await this.ensureCluster();
    const invitation = this.book.create({ clusterId, inviter: this.inviterInfo(), inviteeNodeId: invitee.nodeId as NodeId });
    const result = await this.options.router.request<InviteResult>(invitee.nodeId, INVITE_PROTOCOL, this.book.offerFor(invitation), { timeoutMs: INVITE_REQUEST_TIMEOUT_MS, schema: InviteMessage as never });
    if (!result.ok) throw new ShoalError('BAD_REQUEST', `${invitee.name} refused the invitation: ${result.message ?? result.code}`);
    return { invitationId: invitation.id, nodeId: invitee.nodeId };
  }

  async inviteCode(): Promise<{ code: string; expiresAt: string }> {
    const { router } = this.options;
    const clusterId = await this.ensureCluster();
    const invitation = this.book.createForJoinCode({ clusterId, inviter: this.inviterInfo() });
    const addrs = router.addrs().filter((a) => !a.includes('/127.0.0.1/') || router.addrs().every((b) => b.includes('/127.0.0.1/')));
    return { code: encodeJoinCode(joinCodeFor(invitation, addrs.map((a) => `${a}/p2p/${this.options.plane.nodeId}`))), expiresAt: new Date(invitation.expiresAtMs).toISOString() };
  }

  async join(text: string): Promise<{ clusterId: string }> {
    const { router, log } = this.options;
    const code = decodeJoinCode(text);
    const state = this.options.plane.view().state;
    if (state.clusterId !== null && !state.dissolved) {
      throw new ShoalError('BAD_REQUEST', "this node is already in a cluster: run 'shoal leave' first");
    }
    let reached = false;
    for (const addr of code.addrs) {
      try {
        await router.dial(addr);
        reached = true;
        break;
      } catch (error) {
        log.debug({ err: error, addr }, 'join: address unreachable');
      }
    }
    if (!reached) throw new ShoalError('NOT_FOUND', `none of the inviter's addresses answered (${code.addrs.join(', ')}): check the network between the two machines`);
    this.joining = { clusterId: code.clusterId, inviter: code.inviter.nodeId as NodeId };
    const result = await router.request<InviteResult>(code.inviter.nodeId, INVITE_PROTOCOL, buildJoinRequest(code, this.memberClaim()), { timeoutMs: INVITE_REQUEST_TIMEOUT_MS });
    if (!result.ok) {
      this.joining = null;
      throw new ShoalError('BAD_REQUEST', `the cluster refused the join code: ${result.message ?? result.code}`);
    }
    await this.options.trusted.remember(code.clusterId, [code.inviter.fingerprint]);
    await this.awaitMembership(code.clusterId);
    return { clusterId: code.clusterId };
  }

  async approve(selector: string | null): Promise<{ clusterId: string }> {
    const invitation = this.pending.approve(selector ?? undefined);
    this.joining = { clusterId: invitation.clusterId, inviter: invitation.fromNodeId as NodeId };
    const result = await this.options.router.request<InviteResult>(invitation.fromNodeId, INVITE_PROTOCOL, buildInviteAccept(invitation.offer, this.memberClaim()), { timeoutMs: INVITE_REQUEST_TIMEOUT_MS });
    if (!result.ok) {
      this.joining = null;
      throw new ShoalError('BAD_REQUEST', `${invitation.fromName} did not admit this node: ${result.message ?? result.code}`);
    }
    await this.options.trusted.remember(invitation.clusterId, [invitation.fingerprint]);
    await this.awaitMembership(invitation.clusterId);
    return { clusterId: invitation.clusterId };
  }

  async decline(selector: string | null): Promise<void> {
    const invitation = this.pending.decline(selector ?? undefined);
    await this.options.router
      .request(invitation.fromNodeId, INVITE_PROTOCOL, { type: 'invite-decline', id: invitation.id }, { timeoutMs: INVITE_REQUEST_TIMEOUT_MS })
      .catch((error: unknown) => this.options.log.debug({ err: error }, 'could not tell the inviter about the decline'));
  }

  /** Founds a cluster of one if this node has none yet (inviting, or placing an instance, needs a log to record it). */
  async ensureCluster(): Promise<ClusterId> {
    let state = this.options.plane.view().state;
    if (state.clusterId !== null && !state.dissolved) return state.clusterId;
    // A dissolving master lingers until the others have the news; a new cluster waits for that.
    const deadline = performance.now() + JOIN_TIMEOUT_MS;
    while (state.clusterId !== null && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      state = this.options.plane.view().state;
    }
    if (state.clusterId !== null) throw new ShoalError('BAD_REQUEST', 'the previous cluster is still winding down: try again in a few seconds');
    const clusterId = randomBytes(16).toString('hex') as ClusterId;
    await this.options.plane.submit({ type: 'FoundCluster', clusterId, founder: this.memberClaim() as MemberInfo });
    this.options.log.info({ clusterId }, 'founded a cluster');
    return clusterId;
  }

  async remove(target: string): Promise<void> {
    const member = this.resolveMember(target);
    if (member.nodeId === this.options.plane.nodeId) throw new ShoalError('BAD_REQUEST', "to take this node out, use 'shoal leave'");
    await this.options.plane.submit({ type: 'RemoveMember', nodeId: member.nodeId });
  }

  async leave(): Promise<void> {
    await this.options.plane.submit({ type: 'LeaveCluster', nodeId: this.options.plane.nodeId });
  }

  async dissolve(): Promise<void> {
    await this.options.plane.submit({ type: 'DissolveCluster' });
  }

  async nickname(target: string, nickname: string | null): Promise<void> {
    await this.options.plane.submit({ type: 'SetNickname', nodeId: this.resolveMember(target).nodeId, nickname });
  }

  async makeHost(target: string): Promise<void> {
    await this.options.plane.submit({ type: 'SetHostPreference', nodeId: this.resolveMember(target).nodeId, preferred: true });
  }

  private async onInvite(message: InviteMessage, from: NodeId): Promise<InviteResult> {
    const { log } = this.options;
    const state = this.options.plane.view().state;
    const refused = (code: InviteResult['code'], text: string): InviteResult => ({ type: 'invite-result', ok: false, clusterId: state.clusterId ?? ('0'.repeat(32) as ClusterId), code, message: text }) as InviteResult;
    switch (message.type) {
      case 'invite-offer': {
        const outcome = this.pending.receive(message, from);
        if (!outcome.ok) return refused('identity-mismatch', 'this invitation is not for this node');
        log.info({ from, fingerprint: outcome.pending.fingerprint }, `invitation from ${outcome.pending.fromName}: approve with 'shoal approve' after comparing fingerprints`);
        // A cluster this node approved before, offered by a key it knows, is joined without asking again.
        if (this.options.trusted.isTrusted(message.clusterId, outcome.pending.fingerprint)) {
          setImmediate(() => void this.approve(message.id).catch((error: unknown) => log.warn({ err: error }, 'automatic approval failed')));
        }
        return { type: 'invite-result', ok: true, clusterId: message.clusterId } as InviteResult;
      }
      case 'invite-accept':
      case 'join-request': {
        const verdict = message.type === 'invite-accept' ? this.book.accept(message, from) : this.book.redeem(message, from);
        if (!verdict.ok) return refused(verdict.refusal, describeRefusal(verdict.refusal));
        try {
          await this.options.plane.submit({ type: 'AdmitMember', member: { ...message.member, addrs: message.member.addrs.slice(0, 16) } as MemberInfo });
        } catch (error) {
          return refused('admission-failed', toShoalError(error).message);
        }
        log.info({ nodeId: from, name: message.member.name }, 'admitted a member');
        return { type: 'invite-result', ok: true, clusterId: verdict.invitation.clusterId } as InviteResult;
      }
      case 'invite-decline':
        this.book.decline(message.id, from);
        return { type: 'invite-result', ok: true, clusterId: state.clusterId ?? ('0'.repeat(32) as ClusterId) } as InviteResult;
      case 'invite-result':
        return refused('unknown-invitation', 'a result is an answer, not a request');
    }
  }

  private inviterInfo(): { nodeId: NodeId; name: string; fingerprint: Fingerprint } {
    return { nodeId: this.options.plane.nodeId, name: this.options.name, fingerprint: this.options.identity.fingerprint as Fingerprint };
  }

  private memberClaim(): { nodeId: NodeId; name: string; fingerprint: Fingerprint; addrs: string[] } {
    return { ...this.inviterInfo(), addrs: this.options.router.addrs().slice(0, 16) };
  }

  /** Waits until the approved cluster's snapshot made this node a member. */
  private async awaitMembership(clusterId: ClusterId): Promise<void> {
    const deadline = performance.now() + JOIN_TIMEOUT_MS;
    while (performance.now() < deadline) {
      const state = this.options.plane.view().state;
      if (state.clusterId === clusterId && state.members[this.options.plane.nodeId] !== undefined) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new ShoalError('NOT_FOUND', `the cluster accepted this node but its state did not arrive within ${JOIN_TIMEOUT_MS / 1000} s: check that the members can reach this machine on its p2p port`);
  }

  private resolveMember(target: string): MemberInfo {
    const members = Object.values(this.options.plane.view().state.members);
    const exact = members.find((m) => m.nodeId === target);
    if (exact) return exact;
    const byName = members.filter((m) => m.name === target || m.nickname === target);
    if (byName.length === 1) return byName[0]!;
    if (byName.length > 1) throw new ShoalError('BAD_REQUEST', `'${target}' names ${byName.length} members: use the node id (${byName.map((m) => m.nodeId).join(', ')})`);
    throw new ShoalError('NOT_FOUND', `no member is called '${target}': 'shoal status' lists the members`);
  }
}
