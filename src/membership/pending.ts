import assert from 'node:assert/strict';
import { ShoalError } from '../common/errors.js';
import { fingerprintOfNodeId } from './identity.js';
import { INVITATION_TTL_MS, type ClusterId, type Fingerprint, type InvitationId, type InviteOffer, type NodeId } from './messages.js';

/**
 * The invitee's side: invitations received and waiting for the operator, who compares the
 * fingerprint shown here with the one the inviting node displays. That fingerprint is computed from
 * the key the offer's stream authenticated, never taken from the offer.
 */

export const PENDING_INVITATIONS_MAX = 16;

/** What the operator sees (dashboard, `shoal approve`): never the secret. */
export interface PendingView {
  id: InvitationId;
  fromNodeId: NodeId;
  fromName: string;
  fingerprint: Fingerprint;
  clusterId: ClusterId;
  /** By this machine's clock: the offer's lifetime counted from when it arrived. */
  expiresAtMs: number;
}

export interface PendingInvitation extends PendingView {
  offer: InviteOffer;
}

export type ReceiveOutcome =
  | { ok: true; pending: PendingView; replaced: InvitationId | null; evicted: InvitationId | null }
  | { ok: false; problem: 'not-for-this-node' | 'inviter-mismatch' };

export type PendingSelectionProblem = 'none-pending' | 'no-match' | 'ambiguous';

export class PendingSelectionError extends ShoalError {
  readonly problem: PendingSelectionProblem;
  /** For `ambiguous`: the invitations the selector matched; for `no-match`: every pending one. */
  readonly candidates: PendingView[];

  constructor(problem: PendingSelectionProblem, message: string, candidates: PendingView[]) {
    super(problem === 'ambiguous' ? 'BAD_REQUEST' : 'NOT_FOUND', message, { param: 'invitation' });
    this.name = 'PendingSelectionError';
    this.problem = problem;
    this.candidates = candidates;
  }
}

export class PendingInvitations {
  private readonly entries = new Map<InvitationId, PendingInvitation>();
  private readonly selfNodeId: NodeId;
  private readonly nowMs: () => number;

  constructor(options: { selfNodeId: NodeId; nowMs?: () => number }) {
    this.selfNodeId = options.selfNodeId;
    this.nowMs = options.nowMs ?? Date.now;
  }

  /**
   * Records an offer that arrived on a stream from `fromNodeId` (the Noise-authenticated peer). A
   * newer offer from the same inviter replaces its older one; beyond the bound the oldest goes.
   */
  receive(offer: InviteOffer, fromNodeId: NodeId): ReceiveOutcome {
    if (offer.inviteeNodeId !== this.selfNodeId) return { ok: false, problem: 'not-for-this-node' };
    const derived = fingerprintOfNodeId(fromNodeId);
    if (offer.inviter.nodeId !== fromNodeId || derived === null || derived !== offer.inviter.fingerprint) {
      return { ok: false, problem: 'inviter-mismatch' };
    }
    this.dropExpired();
    let replaced: InvitationId | null = null;
    for (const [id, entry] of this.entries) {
      if (entry.fromNodeId === fromNodeId || id === offer.id) {
        this.entries.delete(id);
        replaced = id;
      }
    }
    let evicted: InvitationId | null = null;
    while (this.entries.size >= PENDING_INVITATIONS_MAX) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.entries.delete(oldest.value);
      evicted = oldest.value;
    }
    const entry: PendingInvitation = {
      id: offer.id,
      fromNodeId,
      fromName: offer.inviter.name,
      fingerprint: derived,
      clusterId: offer.clusterId,
      expiresAtMs: this.nowMs() + offer.expiresInMs,
      offer,
    };
    this.entries.set(entry.id, entry);
    return { ok: true, pending: viewOf(entry), replaced, evicted };
  }

  /** Unexpired invitations, oldest first. */
  list(): PendingView[] {
    this.dropExpired();
    return [...this.entries.values()].map(viewOf);
  }

  /**
   * The invitation `selector` names: its id, the inviter's node id, or the inviter's name (any
   * case). Without a selector, the only pending invitation.
   */
  find(selector?: string): PendingInvitation {
    const all = this.list();
    if (all.length === 0) {
      throw new PendingSelectionError('none-pending', `there is no pending invitation (they expire after ${INVITATION_TTL_MS / 60_000} minutes): ask a member to invite this node`, []);
    }
    const matches =
      selector === undefined
        ? all
        : all.filter(
            (view) => view.id === selector || view.fromNodeId === selector || view.fromName.toLowerCase() === selector.toLowerCase(),
          );
    if (matches.length === 0) {
      throw new PendingSelectionError('no-match', `no pending invitation matches "${selector}"; pending:\n${describe(all)}`, all);
    }
    if (matches.length > 1) {
      const what = selector === undefined ? 'there are several pending invitations' : `"${selector}" matches several pending invitations`;
      throw new PendingSelectionError('ambiguous', `${what}: name one by its id\n${describe(matches)}`, matches);
    }
    const chosen = this.entries.get(matches[0]!.id);
    assert(chosen, 'a listed pending invitation is in the map');
    return chosen;
  }

  /** Takes the chosen invitation out: the caller sends the acceptance (and remembers the cluster as trusted). */
  approve(selector?: string): PendingInvitation {
    return this.take(selector);
  }

  /** Takes the chosen invitation out: the caller tells the inviter with an `invite-decline`. */
  decline(selector?: string): PendingInvitation {
    return this.take(selector);
  }

  private take(selector: string | undefined): PendingInvitation {
    const chosen = this.find(selector);
    this.entries.delete(chosen.id);
    return chosen;
  }

  private dropExpired(): void {
    const now = this.nowMs();
    for (const [id, entry] of this.entries) if (entry.expiresAtMs <= now) this.entries.delete(id);
  }
}

function viewOf(entry: PendingInvitation): PendingView {
  return {
    id: entry.id,
    fromNodeId: entry.fromNodeId,
    fromName: entry.fromName,
    fingerprint: entry.fingerprint,
    clusterId: entry.clusterId,
    expiresAtMs: entry.expiresAtMs,
  };
}

function describe(views: PendingView[]): string {
  return views.map((view) => `  ${view.id}  from ${view.fromName} (${view.fromNodeId}), fingerprint ${view.fingerprint}`).join('\n');
}
