import assert from 'node:assert/strict';
import { multiaddr } from '@multiformats/multiaddr';
import { z } from 'zod';
import { errorMessage } from '../common/errors.js';
import { ClusterId, Fingerprint, NodeId } from '../common/ids.js';

export { ClusterId, Fingerprint, NodeId };

/**
 * Ids that name nodes and clusters, and the messages of the `/shoal/invite/1` stream protocol.
 * Every limit is checked before parsing; the brands keep a node id from being passed where a
 * fingerprint is expected.
 */

export const INVITE_PROTOCOL = '/shoal/invite/1';
/** The largest invite-protocol message accepted; the largest valid one (16 long addrs) is about 5 KiB. */
export const INVITE_MESSAGE_MAX_BYTES = 8192;
export const NODE_NAME_MAX_CHARS = 64;
export const MEMBER_ADDRS_MAX = 16;
export const MULTIADDR_MAX_CHARS = 256;
export const INVITE_RESULT_MESSAGE_MAX_CHARS = 512;
/** How long an invitation or join code stays valid after it is made. */
export const INVITATION_TTL_MS = 10 * 60_000;

export const InvitationId = z.string().regex(/^[0-9a-f]{16}$/, 'an invitation id is 16 lowercase hex digits').brand<'InvitationId'>();
export type InvitationId = z.infer<typeof InvitationId>;

/** 32 random bytes, base64url without padding. */
export const InvitationSecret = z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'a secret is 43 base64url characters');
/** HMAC-SHA256 output, base64url without padding. */
export const Proof = z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'a proof is 43 base64url characters');

export const NodeName = z
  .string()
  .min(1)
  .max(NODE_NAME_MAX_CHARS)
  // eslint-disable-next-line no-control-regex
  .regex(/^[^\u0000-\u001f\u007f]+$/, 'a node name has no control characters');

export const MultiaddrString = z
  .string()
  .min(1)
  .max(MULTIADDR_MAX_CHARS)
  .refine((text) => {
    try {
      multiaddr(text);
      return true;
    } catch {
      return false;
    }
  }, 'not a valid multiaddr');

export const InviterInfo = z.strictObject({ nodeId: NodeId, name: NodeName, fingerprint: Fingerprint });
export type InviterInfo = z.infer<typeof InviterInfo>;

/** What a node says about itself when it joins; `nodeId` and `fingerprint` are checked against the Noise-authenticated peer. */
export const MemberClaim = z.strictObject({
  nodeId: NodeId,
  name: NodeName,
  fingerprint: Fingerprint,
  addrs: z.array(MultiaddrString).max(MEMBER_ADDRS_MAX),
});
export type MemberClaim = z.infer<typeof MemberClaim>;

/**
 * Why an inviter refused an acceptance or a join request. The first six come from the invitation
 * book; `admission-failed` is the cluster's answer after the invitation itself checked out.
 */
export const InviteRefusal = z.enum([
  'unknown-invitation',
  'expired',
  'wrong-invitee',
  'bad-proof',
  'already-used',
  'identity-mismatch',
  'admission-failed',
]);
export type InviteRefusal = z.infer<typeof InviteRefusal>;

/**
 * Inviter → invitee. It carries the secret: the stream is Noise-encrypted and the invitee's peer id
 * is authenticated, so only the invited node can read it. The lifetime travels as a duration, not a
 * timestamp, so the invitee judges expiry on its own clock whatever the inviter's clock says.
 */
export const InviteOffer = z.strictObject({
  type: z.literal('invite-offer'),
  id: InvitationId,
  clusterId: ClusterId,
  inviter: InviterInfo,
  inviteeNodeId: NodeId,
  secret: InvitationSecret,
  expiresInMs: z.number().int().positive().max(INVITATION_TTL_MS),
});
export type InviteOffer = z.infer<typeof InviteOffer>;

/** Invitee → inviter, after its operator approved (or the cluster is trusted). */
export const InviteAccept = z.strictObject({
  type: z.literal('invite-accept'),
  id: InvitationId,
  proof: Proof,
  member: MemberClaim,
});
export type InviteAccept = z.infer<typeof InviteAccept>;

/** Invitee → inviter: the operator said no; the inviter drops the invitation. */
export const InviteDecline = z.strictObject({ type: z.literal('invite-decline'), id: InvitationId });
export type InviteDecline = z.infer<typeof InviteDecline>;

/** Joiner → inviter, redeeming a join code: the proof binds the code's secret to the joiner's node id. */
export const JoinRequest = z.strictObject({
  type: z.literal('join-request'),
  id: InvitationId,
  proof: Proof,
  member: MemberClaim,
});
export type JoinRequest = z.infer<typeof JoinRequest>;

/** Inviter → invitee/joiner: the answer to an accept or a join request. */
export const InviteResult = z
  .strictObject({
    type: z.literal('invite-result'),
    ok: z.boolean(),
    clusterId: ClusterId,
    code: InviteRefusal.optional(),
    message: z.string().max(INVITE_RESULT_MESSAGE_MAX_CHARS).optional(),
  })
  .refine((result) => result.ok === (result.code === undefined), 'a refusal has a code and a success has none');
export type InviteResult = z.infer<typeof InviteResult>;

export const InviteMessage = z.discriminatedUnion('type', [InviteOffer, InviteAccept, InviteDecline, JoinRequest, InviteResult]);
export type InviteMessage = z.infer<typeof InviteMessage>;

export type InviteMessageProblem = 'too-large' | 'malformed' | 'invalid';
export type DecodedInviteMessage = { ok: true; message: InviteMessage } | { ok: false; problem: InviteMessageProblem; detail: string };

export function encodeInviteMessage(message: InviteMessage): Uint8Array {
  const bytes = new TextEncoder().encode(JSON.stringify(InviteMessage.parse(message)));
  assert(bytes.byteLength <= INVITE_MESSAGE_MAX_BYTES, `invite message of ${bytes.byteLength} bytes exceeds ${INVITE_MESSAGE_MAX_BYTES}`);
  return bytes;
}

/** Checks the size before parsing anything; the caller drops and counts what does not decode. */
export function decodeInviteMessage(bytes: Uint8Array): DecodedInviteMessage {
  if (bytes.byteLength > INVITE_MESSAGE_MAX_BYTES) {
    return { ok: false, problem: 'too-large', detail: `${bytes.byteLength} bytes, the limit is ${INVITE_MESSAGE_MAX_BYTES}` };
  }
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (error) {
    return { ok: false, problem: 'malformed', detail: errorMessage(error) };
  }
  const parsed = InviteMessage.safeParse(json);
  if (!parsed.success) return { ok: false, problem: 'invalid', detail: z.prettifyError(parsed.error) };
  return { ok: true, message: parsed.data };
}
