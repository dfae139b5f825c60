import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { generateKeyPairFromSeed } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { fingerprint } from './identity.js';
import {
  INVITATION_BOOK_MAX,
  InvitationBook,
  buildInviteAccept,
  buildJoinRequest,
  claimMatchesPeer,
  describeRefusal,
  invitationProof,
  joinProof,
} from './invitations.js';
import { ClusterId, INVITATION_TTL_MS, InviteRefusal, NodeId, type MemberClaim } from './messages.js';

async function node(seed: number, name: string): Promise<MemberClaim> {
  const key = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(seed));
  return { nodeId: NodeId.parse(peerIdFromPrivateKey(key).toString()), name, fingerprint: fingerprint(key.publicKey.raw), addrs: ['/ip4/10.0.0.2/tcp/52601'] };
}

const inviterClaim = await node(1, 'rig');
const inviter = { nodeId: inviterClaim.nodeId, name: inviterClaim.name, fingerprint: inviterClaim.fingerprint };
const invitee = await node(2, 'laptop');
const stranger = await node(3, 'stranger');
const clusterId = ClusterId.parse('0123456789abcdef0123456789abcdef');
const otherCluster = ClusterId.parse('fedcba9876543210fedcba9876543210');

function setup() {
  const clock = { now: 1_000_000 };
  const book = new InvitationBook({ nowMs: () => clock.now });
  return { clock, book };
}

describe('invitation proofs', () => {
  it('is HMAC-SHA256 keyed by the secret over the documented text', () => {
    const secret = Buffer.alloc(32, 7).toString('base64url');
    const expected = createHmac('sha256', Buffer.alloc(32, 7))
      .update(`shoal-invite|00112233aabbccdd|${invitee.nodeId}|${clusterId}`)
      .digest('base64url');
    assert.equal(invitationProof(secret, '00112233aabbccdd', invitee.nodeId, clusterId), expected);
    assert.notEqual(joinProof(secret, '00112233aabbccdd', invitee.nodeId, clusterId), expected);
  });

  it('checks claims against the authenticated peer', () => {
    assert.equal(claimMatchesPeer(invitee, invitee.nodeId), true);
    assert.equal(claimMatchesPeer(invitee, stranger.nodeId), false);
    assert.equal(claimMatchesPeer({ ...invitee, fingerprint: stranger.fingerprint }, invitee.nodeId), false);
  });
});

describe('InvitationBook: invitations for a discovered node', () => {
  it('accepts the invitee once, with the proof built from the offer', () => {
    const { book } = setup();
    const invitation = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    assert.match(invitation.id, /^[0-9a-f]{16}$/);
    assert.equal(Buffer.from(invitation.secret, 'base64url').byteLength, 32);
    const offer = book.offerFor(invitation);
    assert.equal(offer.expiresInMs, INVITATION_TTL_MS);
    const accept = buildInviteAccept(offer, invitee);
    const verdict = book.accept(accept, invitee.nodeId);
    assert.deepEqual(verdict, { ok: true, invitation });
    assert.deepEqual(book.accept(accept, invitee.nodeId), { ok: false, refusal: 'already-used' });
    assert.deepEqual(book.pending(), []);
  });

  it('expires after ten minutes by the injected clock', () => {
    const { book, clock } = setup();
    const first = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    clock.now += INVITATION_TTL_MS - 1;
    assert.equal(book.offerFor(first).expiresInMs, 1);
    assert.equal(book.accept(buildInviteAccept(book.offerFor(first), invitee), invitee.nodeId).ok, true);

    const second = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    const accept = buildInviteAccept(book.offerFor(second), invitee);
    clock.now += INVITATION_TTL_MS;
    assert.deepEqual(book.accept(accept, invitee.nodeId), { ok: false, refusal: 'expired' });
  });

  it('refuses another node, even one that saw the secret', () => {
    const { book } = setup();
    const invitation = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    const stolen = buildInviteAccept(book.offerFor(invitation), stranger);
    assert.deepEqual(book.accept(stolen, stranger.nodeId), { ok: false, refusal: 'wrong-invitee' });
    // Replaying the invitee's own acceptance from another connection fails on the claim.
    const genuine = buildInviteAccept(book.offerFor(invitation), invitee);
    assert.deepEqual(book.accept(genuine, stranger.nodeId), { ok: false, refusal: 'identity-mismatch' });
    assert.equal(book.accept(genuine, invitee.nodeId).ok, true);
  });

  it('refuses a bad proof without using the invitation up', () => {
    const { book } = setup();
    const invitation = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    const good = buildInviteAccept(book.offerFor(invitation), invitee);
    const flipped = (good.proof[0] === 'A' ? 'B' : 'A') + good.proof.slice(1);
    assert.deepEqual(book.accept({ ...good, proof: flipped }, invitee.nodeId), { ok: false, refusal: 'bad-proof' });
    const forOtherCluster = buildInviteAccept({ ...book.offerFor(invitation), clusterId: otherCluster }, invitee);
    assert.deepEqual(book.accept(forOtherCluster, invitee.nodeId), { ok: false, refusal: 'bad-proof' });
    const wrongSecret = buildInviteAccept({ ...book.offerFor(invitation), secret: Buffer.alloc(32).toString('base64url') }, invitee);
    assert.deepEqual(book.accept(wrongSecret, invitee.nodeId), { ok: false, refusal: 'bad-proof' });
    assert.equal(book.accept(good, invitee.nodeId).ok, true);
  });

  it('refuses unknown ids and claims that do not match the connection', () => {
    const { book } = setup();
    const invitation = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    const accept = buildInviteAccept(book.offerFor(invitation), invitee);
    assert.deepEqual(book.accept({ ...accept, id: 'ffffffffffffffff' as typeof accept.id }, invitee.nodeId), {
      ok: false,
      refusal: 'unknown-invitation',
    });
    const lying = { ...accept, member: { ...accept.member, fingerprint: stranger.fingerprint } };
    assert.deepEqual(book.accept(lying, invitee.nodeId), { ok: false, refusal: 'identity-mismatch' });
  });

  it('lets a newer invitation for the same node replace the unused older one', () => {
    const { book } = setup();
    const older = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    const newer = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    assert.deepEqual(book.accept(buildInviteAccept(book.offerFor(older), invitee), invitee.nodeId), { ok: false, refusal: 'unknown-invitation' });
    assert.equal(book.accept(buildInviteAccept(book.offerFor(newer), invitee), invitee.nodeId).ok, true);
  });

  it('lets only the invitee decline, and the operator revoke', () => {
    const { book } = setup();
    const invitation = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    assert.equal(book.decline(invitation.id, stranger.nodeId), null);
    assert.deepEqual(book.decline(invitation.id, invitee.nodeId), invitation);
    assert.deepEqual(book.accept(buildInviteAccept(book.offerFor(invitation), invitee), invitee.nodeId), {
      ok: false,
      refusal: 'unknown-invitation',
    });
    const another = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    assert.deepEqual(book.pending().map((view) => view.id), [another.id]);
    assert.equal(book.revoke(another.id), true);
    assert.equal(book.revoke(another.id), false);
  });

  it('keeps at most 64, dropping expired ones first and then the oldest', async () => {
    const { book, clock } = setup();
    const invitees = await Promise.all(Array.from({ length: INVITATION_BOOK_MAX + 6 }, (_, i) => node(10 + i, `n${i}`)));
    const made = invitees.map((claim) => book.create({ clusterId, inviter, inviteeNodeId: claim.nodeId }));
    assert.equal(book.size, INVITATION_BOOK_MAX);
    const kept = new Set(book.pending().map((view) => view.id));
    assert.deepEqual(made.slice(0, 6).filter((inv) => kept.has(inv.id)), []);
    assert.equal(made.slice(6).every((inv) => kept.has(inv.id)), true);
    clock.now += INVITATION_TTL_MS;
    book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    assert.equal(book.size, 1);
  });

  it('draws ids and secrets from the injected source', () => {
    let counter = 0;
    const book = new InvitationBook({ nowMs: () => 0, randomBytes: (size) => new Uint8Array(size).fill(++counter) });
    const invitation = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    assert.equal(invitation.id, '0101010101010101');
    assert.equal(invitation.secret, Buffer.alloc(32, 2).toString('base64url'));
    assert.equal(invitation.expiresAtMs, INVITATION_TTL_MS);
  });
});

describe('InvitationBook: join codes', () => {
  it('lets the first node with the secret redeem it, once', () => {
    const { book } = setup();
    const invitation = book.createForJoinCode({ clusterId, inviter });
    assert.equal(invitation.inviteeNodeId, null);
    assert.throws(() => book.offerFor(invitation));
    const request = buildJoinRequest(invitation, stranger);
    assert.deepEqual(book.redeem(request, stranger.nodeId), { ok: true, invitation });
    assert.deepEqual(book.redeem(buildJoinRequest(invitation, invitee), invitee.nodeId), { ok: false, refusal: 'already-used' });
  });

  it('binds the proof to the redeeming node and keeps the two proof kinds apart', () => {
    const { book } = setup();
    const code = book.createForJoinCode({ clusterId, inviter });
    const overheard = buildJoinRequest(code, invitee);
    assert.deepEqual(book.redeem({ ...overheard, member: stranger }, stranger.nodeId), { ok: false, refusal: 'bad-proof' });
    const inviteStyle = { ...overheard, proof: invitationProof(code.secret, code.id, invitee.nodeId, clusterId) };
    assert.deepEqual(book.redeem(inviteStyle, invitee.nodeId), { ok: false, refusal: 'bad-proof' });
    assert.deepEqual(book.accept({ ...overheard, type: 'invite-accept' }, invitee.nodeId), { ok: false, refusal: 'unknown-invitation' });

    const targeted = book.create({ clusterId, inviter, inviteeNodeId: invitee.nodeId });
    const asJoin = buildJoinRequest(targeted, invitee);
    assert.deepEqual(book.redeem(asJoin, invitee.nodeId), { ok: false, refusal: 'unknown-invitation' });
  });

  it('expires join codes too', () => {
    const { book, clock } = setup();
    const code = book.createForJoinCode({ clusterId, inviter });
    clock.now = code.expiresAtMs;
    assert.deepEqual(book.redeem(buildJoinRequest(code, stranger), stranger.nodeId), { ok: false, refusal: 'expired' });
  });
});

describe('describeRefusal', () => {
  it('has a sentence for every refusal', () => {
    for (const refusal of InviteRefusal.options) assert.ok(describeRefusal(refusal).length > 20, refusal);
  });
});
