import assert from 'node:assert/strict';
import { createHmac, randomBytes as nodeRandomBytes, timingSafeEqual } from 'node:crypto';
import { fingerprintOfNodeId } from './identity.js';
import {
  INVITATION_TTL_MS,
  InvitationId,
  type ClusterId,
  type InviteAccept,
  type InviteOffer,
  type InviteRefusal,
  type InviterInfo,
  type JoinRequest,
  type MemberClaim,
  type NodeId,
} from './messages.js';

/**
 * The inviter's side of consent-based joining. An invitation is a single-use secret bound either to
 * one invitee node (an invite sent to a discovered node) or to whoever redeems it first (a join code,
 * a bearer secret). Accepting proves possession of the secret with an HMAC over the accepting node's
 * authenticated id, so an overheard proof is useless to any other node.
 */

export const INVITATION_BOOK_MAX = 64;
export const INVITATION_SECRET_BYTES = 32;
const INVITATION_ID_BYTES = 8;
const INVITE_PROOF_DOMAIN = 'shoal-invite|';
const JOIN_PROOF_DOMAIN = 'shoal-join|';

export interface Invitation {
  id: InvitationId;
  clusterId: ClusterId;
  inviter: InviterInfo;
  /** The only node that may accept it; null for a join code, which whoever holds it may redeem once. */
  inviteeNodeId: NodeId | null;
  /** 32 random bytes, base64url. */
  secret: string;
  expiresAtMs: number;
}

/** What the inviter's operator and dashboard see of an invitation: never the secret. */
export interface InvitationView {
  id: InvitationId;
  clusterId: ClusterId;
  inviteeNodeId: NodeId | null;
  expiresAtMs: number;
}

export type Verdict = { ok: true; invitation: Invitation } | { ok: false; refusal: InviteRefusal };

export function invitationProof(secret: string, id: string, inviteeNodeId: string, clusterId: string): string {
  return hmac(secret, `${INVITE_PROOF_DOMAIN}${id}|${inviteeNodeId}|${clusterId}`);
}

/** The join-code proof has its own domain, so an invite proof never passes as a join proof or back. */
export function joinProof(secret: string, id: string, joinerNodeId: string, clusterId: string): string {
  return hmac(secret, `${JOIN_PROOF_DOMAIN}${id}|${joinerNodeId}|${clusterId}`);
}

function hmac(secret: string, text: string): string {
  return createHmac('sha256', Buffer.from(secret, 'base64url')).update(text, 'utf8').digest('base64url');
}

function proofMatches(expected: string, given: string): boolean {
  const a = Buffer.from(expected, 'base64url');
  const b = Buffer.from(given, 'base64url');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The invitee's answer to an offer its operator approved. */
export function buildInviteAccept(offer: Pick<InviteOffer, 'id' | 'secret' | 'clusterId'>, member: MemberClaim): InviteAccept {
  return { type: 'invite-accept', id: offer.id, proof: invitationProof(offer.secret, offer.id, member.nodeId, offer.clusterId), member };
}

/** The joiner's redemption of a decoded join code. */
export function buildJoinRequest(code: { id: InvitationId; secret: string; clusterId: ClusterId }, member: MemberClaim): JoinRequest {
  return { type: 'join-request', id: code.id, proof: joinProof(code.secret, code.id, member.nodeId, code.clusterId), member };
}

/** A sentence for the operator of the refused node. */
export function describeRefusal(refusal: InviteRefusal): string {
  switch (refusal) {
    case 'unknown-invitation':
      return 'the inviter does not know this invitation (it was revoked, replaced by a newer one, or the inviter restarted): ask for a new one';
    case 'expired':
      return `the invitation expired (they last ${INVITATION_TTL_MS / 60_000} minutes): ask for a new one`;
    case 'wrong-invitee':
      return 'this invitation was made for another node: ask for one for this node';
    case 'bad-proof':
      return 'the acceptance does not match the invitation (it was altered on the way): ask for a new one';
    case 'already-used':
      return 'this invitation was already used, and each works once: ask for a new one';
    case 'identity-mismatch':
      return "the joining node's id or fingerprint does not match the key it connected with";
    case 'admission-failed':
      return 'the invitation was valid but the cluster could not admit this node: try again with a new invitation';
  }
}

/** True when the claim describes the peer Noise authenticated: same node id, and the fingerprint of that id's key. */
export function claimMatchesPeer(member: MemberClaim, remoteNodeId: NodeId): boolean {
  return member.nodeId === remoteNodeId && fingerprintOfNodeId(remoteNodeId) === member.fingerprint;
}

export interface InvitationBookOptions {
  nowMs?: () => number;
  randomBytes?: (size: number) => Uint8Array;
}

interface Entry {
  invitation: Invitation;
  used: boolean;
}

/**
 * The invitations this member made, in memory. Bounded: expired ones go first, then the oldest.
 * A used invitation stays until it expires so that a replay is told "already used".
 */
export class InvitationBook {
  private readonly entries = new Map<InvitationId, Entry>();
  private readonly nowMs: () => number;
  private readonly randomBytes: (size: number) => Uint8Array;

  constructor(options: InvitationBookOptions = {}) {
    this.nowMs = options.nowMs ?? Date.now;
    this.randomBytes = options.randomBytes ?? ((size) => nodeRandomBytes(size));
  }

  /** An invitation for one discovered node; a newer one for the same node replaces its unused predecessor. */
  create(args: { clusterId: ClusterId; inviter: InviterInfo; inviteeNodeId: NodeId }): Invitation {
    for (const [id, entry] of this.entries) {
      if (!entry.used && entry.invitation.inviteeNodeId === args.inviteeNodeId) this.entries.delete(id);
    }
    return this.add(args.clusterId, args.inviter, args.inviteeNodeId);
  }

  /** A bearer invitation for a join code. */
  createForJoinCode(args: { clusterId: ClusterId; inviter: InviterInfo }): Invitation {
    return this.add(args.clusterId, args.inviter, null);
  }

  /** The offer to send to the invitee, its lifetime as the time left now. */
  offerFor(invitation: Invitation): InviteOffer {
    assert(invitation.inviteeNodeId !== null, 'a join-code invitation has no invitee to offer it to');
    return {
      type: 'invite-offer',
      id: invitation.id,
      clusterId: invitation.clusterId,
      inviter: invitation.inviter,
      inviteeNodeId: invitation.inviteeNodeId,
      secret: invitation.secret,
      expiresInMs: Math.max(1, Math.min(INVITATION_TTL_MS, invitation.expiresAtMs - this.nowMs())),
    };
  }

  /** Checks an invitee's acceptance; `remoteNodeId` is the peer id the stream's Noise handshake authenticated. */
  accept(message: InviteAccept, remoteNodeId: NodeId): Verdict {
    return this.verify(message, remoteNodeId, 'invite');
  }

  /** Checks a join-code redemption; whoever redeems it first (with a valid proof) gets it. */
  redeem(message: JoinRequest, remoteNodeId: NodeId): Verdict {
    return this.verify(message, remoteNodeId, 'join');
  }

  /** The invitee said no: only the invitee itself can withdraw its invitation. */
  decline(id: InvitationId, remoteNodeId: NodeId): Invitation | null {
    const entry = this.entries.get(id);
    if (!entry || entry.used || entry.invitation.inviteeNodeId !== remoteNodeId) return null;
    this.entries.delete(id);
    return entry.invitation;
  }

  /** The inviter's operator withdraws an invitation that was not used yet. */
  revoke(id: InvitationId): boolean {
    const entry = this.entries.get(id);
    if (!entry || entry.used) return false;
    return this.entries.delete(id);
  }

  /** Unused, unexpired invitations, oldest first. */
  pending(): InvitationView[] {
    this.dropExpired();
    return [...this.entries.values()]
      .filter((entry) => !entry.used)
      .map(({ invitation }) => ({
        id: invitation.id,
        clusterId: invitation.clusterId,
        inviteeNodeId: invitation.inviteeNodeId,
        expiresAtMs: invitation.expiresAtMs,
      }));
  }

  get size(): number {
    return this.entries.size;
  }

  private add(clusterId: ClusterId, inviter: InviterInfo, inviteeNodeId: NodeId | null): Invitation {
    this.dropExpired();
    while (this.entries.size >= INVITATION_BOOK_MAX) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value);
    }
    let id: InvitationId;
    do id = InvitationId.parse(Buffer.from(this.randomBytes(INVITATION_ID_BYTES)).toString('hex'));
    while (this.entries.has(id));
    const invitation: Invitation = {
      id,
      clusterId,
      inviter,
      inviteeNodeId,
      secret: Buffer.from(this.randomBytes(INVITATION_SECRET_BYTES)).toString('base64url'),
      expiresAtMs: this.nowMs() + INVITATION_TTL_MS,
    };
    this.entries.set(id, { invitation, used: false });
    return invitation;
  }

  private dropExpired(): void {
    const now = this.nowMs();
    for (const [id, entry] of this.entries) if (entry.invitation.expiresAtMs <= now) this.entries.delete(id);
  }

  /**
   * The order matters: whether an invitation was used is told only to a node that proved it holds
   * the secret, so nobody else learns anything about its state.
   */
  private verify(message: InviteAccept | JoinRequest, remoteNodeId: NodeId, kind: 'invite' | 'join'): Verdict {
    if (!claimMatchesPeer(message.member, remoteNodeId)) return { ok: false, refusal: 'identity-mismatch' };
    const entry = this.entries.get(message.id);
    if (!entry || (entry.invitation.inviteeNodeId === null) !== (kind === 'join')) return { ok: false, refusal: 'unknown-invitation' };
    const { invitation } = entry;
    if (invitation.expiresAtMs <= this.nowMs()) return { ok: false, refusal: 'expired' };
    if (kind === 'invite' && invitation.inviteeNodeId !== remoteNodeId) return { ok: false, refusal: 'wrong-invitee' };
    const expected =
      kind === 'invite'
        ? invitationProof(invitation.secret, invitation.id, remoteNodeId, invitation.clusterId)
        : joinProof(invitation.secret, invitation.id, remoteNodeId, invitation.clusterId);
    if (!proofMatches(expected, message.proof)) return { ok: false, refusal: 'bad-proof' };
    if (entry.used) return { ok: false, refusal: 'already-used' };
    entry.used = true;
    return { ok: true, invitation };
  }
}
