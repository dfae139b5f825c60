import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { publicKeyFromRaw } from '@libp2p/crypto/keys';
import { peerIdFromPublicKey } from '@libp2p/peer-id';
import { decode, encode } from '@msgpack/msgpack';
import { multiaddr } from '@multiformats/multiaddr';
import { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import { fingerprint, fingerprintOfNodeId, publicKeyOfNodeId } from './identity.js';
import type { Invitation } from './invitations.js';
import { ClusterId, INVITATION_TTL_MS, InvitationId, InvitationSecret, InviterInfo, MultiaddrString, NodeName } from './messages.js';

/**
 * A join code carries a join-code invitation to a node that cannot be discovered: where to dial the
 * inviter, who it is (its key, so the joiner authenticates it), and the one-time secret. Whoever
 * holds the code can redeem it once within 10 minutes, so it is shown only to the inviter's operator.
 *
 * Format: `shoal1-` + base64url(msgpack tuple + 4 checksum bytes). The tuple holds binary fields
 * (ids, key, secret, multiaddr bytes) rather than their text forms: with three addresses that is
 * about 240 characters, where deflated JSON was about 420. The fingerprint is not in the code;
 * it is computed from the inviter's key, so it cannot disagree with the key that is dialed.
 */

export const JOIN_CODE_PREFIX = 'shoal1-';
const JOIN_CODE_VERSION = 1;
export const JOIN_CODE_MAX_ADDRS = 8;
/** The longest text decodeJoinCode looks at (8 addresses of the longest kind fit). */
export const JOIN_CODE_MAX_CHARS = 4096;
/** How far this machine's clock may run ahead of the inviter's before a fresh code looks expired here. */
export const JOIN_CODE_CLOCK_SKEW_MS = 60_000;
const CHECKSUM_BYTES = 4;
const CLUSTER_ID_BYTES = 16;
const INVITATION_ID_BYTES = 8;
const SECRET_BYTES = 32;
const ED25519_PUBLIC_KEY_BYTES = 32;

export const JoinCode = z.strictObject({
  v: z.literal(JOIN_CODE_VERSION),
  clusterId: ClusterId,
  inviter: InviterInfo,
  addrs: z.array(MultiaddrString).min(1).max(JOIN_CODE_MAX_ADDRS),
  id: InvitationId,
  secret: InvitationSecret,
  expiresAtMs: z.number().int().positive(),
});
export type JoinCode = z.infer<typeof JoinCode>;

export type JoinCodeProblem = 'not-a-code' | 'damaged' | 'unsupported-version' | 'expired';

export class JoinCodeError extends ShoalError {
  readonly problem: JoinCodeProblem;

  constructor(problem: JoinCodeProblem, message: string, cause?: unknown) {
    super('BAD_REQUEST', message, { cause, param: 'code' });
    this.name = 'JoinCodeError';
    this.problem = problem;
  }
}

const bytes = (length: number) => z.instanceof(Uint8Array).refine((value) => value.byteLength === length);

const CodeTuple = z.tuple([
  z.literal(JOIN_CODE_VERSION),
  bytes(CLUSTER_ID_BYTES),
  bytes(ED25519_PUBLIC_KEY_BYTES),
  z.string(),
  bytes(INVITATION_ID_BYTES),
  bytes(SECRET_BYTES),
  z.number().int().positive(),
  z.array(z.instanceof(Uint8Array)).min(1).max(JOIN_CODE_MAX_ADDRS),
]);

/** The join code for a join-code invitation (one with no invitee) and the addresses the inviter listens on. */
export function joinCodeFor(invitation: Invitation, addrs: string[]): JoinCode {
  assert(invitation.inviteeNodeId === null, 'a join code carries a join-code invitation, not one bound to an invitee');
  return JoinCode.parse({
    v: JOIN_CODE_VERSION,
    clusterId: invitation.clusterId,
    inviter: invitation.inviter,
    addrs: addrs.slice(0, JOIN_CODE_MAX_ADDRS),
    id: invitation.id,
    secret: invitation.secret,
    expiresAtMs: invitation.expiresAtMs,
  });
}

export function encodeJoinCode(code: JoinCode): string {
  const valid = JoinCode.parse(code);
  const publicKey = publicKeyOfNodeId(valid.inviter.nodeId);
  assert(publicKey !== null, 'the inviter node id names an Ed25519 key');
  assert.equal(fingerprintOfNodeId(valid.inviter.nodeId), valid.inviter.fingerprint, "the inviter's fingerprint is its key's");
  const payload = encode([
    JOIN_CODE_VERSION,
    Buffer.from(valid.clusterId, 'hex'),
    publicKey,
    valid.inviter.name,
    Buffer.from(valid.id, 'hex'),
    Buffer.from(valid.secret, 'base64url'),
    valid.expiresAtMs,
    valid.addrs.map((addr) => multiaddr(addr).bytes),
  ]);
  return JOIN_CODE_PREFIX + Buffer.concat([payload, checksum(payload)]).toString('base64url');
}

function checksum(payload: Uint8Array): Buffer {
  return createHash('sha256').update(payload).digest().subarray(0, CHECKSUM_BYTES);
}

const damaged = (cause?: unknown): JoinCodeError =>
  new JoinCodeError('damaged', 'the join code is damaged: copy it again, whole, from the inviting node', cause);

/**
 * Reads a pasted join code (whitespace and line breaks are ignored) and checks it has not expired by
 * this machine's clock. The inviter checks expiry again on its own clock when the code is redeemed.
 */
export function decodeJoinCode(text: string, nowMs: number = Date.now()): JoinCode {
  const compact = text.replace(/\s+/g, '');
  if (compact.length > JOIN_CODE_MAX_CHARS) throw new JoinCodeError('not-a-code', `that is not a shoal join code: it is longer than ${JOIN_CODE_MAX_CHARS} characters`);
  if (!compact.startsWith(JOIN_CODE_PREFIX)) {
    if (/^shoal\d+-/.test(compact)) {
      throw new JoinCodeError('unsupported-version', 'the join code was made by a newer version of shoal: update shoal on this node, then use the code');
    }
    throw new JoinCodeError('not-a-code', `that is not a shoal join code: they start with "${JOIN_CODE_PREFIX}" (run 'shoal invite --code' on a member to get one)`);
  }
  const body = compact.slice(JOIN_CODE_PREFIX.length);
  // Node's base64 decoder skips characters it does not know and ignores trailing bits; a typo must not slip through either way.
  if (!/^[A-Za-z0-9_-]+$/.test(body)) throw damaged();
  const raw = Buffer.from(body, 'base64url');
  if (raw.toString('base64url') !== body || raw.byteLength <= CHECKSUM_BYTES) throw damaged();
  const payload = raw.subarray(0, raw.byteLength - CHECKSUM_BYTES);
  if (!checksum(payload).equals(raw.subarray(raw.byteLength - CHECKSUM_BYTES))) throw damaged();

  let tuple: unknown;
  try {
    tuple = decode(payload);
  } catch (error) {
    throw damaged(error);
  }
  if (Array.isArray(tuple) && typeof tuple[0] === 'number' && tuple[0] !== JOIN_CODE_VERSION) {
    throw new JoinCodeError('unsupported-version', `the join code has format version ${tuple[0]}, this shoal reads version ${JOIN_CODE_VERSION}: use the same shoal version on both nodes`);
  }
  const parsed = CodeTuple.safeParse(tuple);
  if (!parsed.success) throw damaged(parsed.error);
  const [, clusterId, publicKeyRaw, name, id, secret, expiresAtMs, addrBytes] = parsed.data;

  let code;
  try {
    const nodeId = peerIdFromPublicKey(publicKeyFromRaw(publicKeyRaw)).toString();
    code = JoinCode.safeParse({
      v: JOIN_CODE_VERSION,
      clusterId: Buffer.from(clusterId).toString('hex'),
      inviter: { nodeId, name: NodeName.parse(name), fingerprint: fingerprint(publicKeyRaw) },
      addrs: addrBytes.map((addr) => multiaddr(addr).toString()),
      id: Buffer.from(id).toString('hex'),
      secret: Buffer.from(secret).toString('base64url'),
      expiresAtMs,
    });
  } catch (error) {
    throw damaged(error);
  }
  if (!code.success) throw damaged(code.error);

  if (code.data.expiresAtMs + JOIN_CODE_CLOCK_SKEW_MS <= nowMs) {
    throw new JoinCodeError(
      'expired',
      `the join code expired at ${new Date(code.data.expiresAtMs).toISOString()} (codes last ${INVITATION_TTL_MS / 60_000} minutes): ` +
        "ask for a new one ('shoal invite --code' on a member); if it was made just now, check this machine's clock",
    );
  }
  return code.data;
}
