import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateKeyPairFromSeed } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { fingerprint } from './identity.js';
import { InvitationBook, buildInviteAccept } from './invitations.js';
import { ClusterId, INVITATION_TTL_MS, NodeId, type InviterInfo, type MemberClaim } from './messages.js';
import { PENDING_INVITATIONS_MAX, PendingInvitations, PendingSelectionError } from './pending.js';

async function node(seed: number, name: string): Promise<MemberClaim> {
  const key = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(seed));
  return { nodeId: NodeId.parse(peerIdFromPrivateKey(key).toString()), name, fingerprint: fingerprint(key.publicKey.raw), addrs: [] };
}
const asInviter = ({ nodeId, name, fingerprint: fp }: MemberClaim): InviterInfo => ({ nodeId, name, fingerprint: fp });

const self = await node(1, 'laptop');
const rig = await node(2, 'rig');
const otherRig = await node(3, 'Rig');
const desk = await node(4, 'desk');
const clusterId = ClusterId.parse('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');

function setup() {
  const clock = { now: 50_000 };
  const inviterBook = new InvitationBook({ nowMs: () => clock.now });
  const pending = new PendingInvitations({ selfNodeId: self.nodeId, nowMs: () => clock.now });
  const offerFrom = (from: MemberClaim, to: NodeId = self.nodeId) =>
    inviterBook.offerFor(inviterBook.create({ clusterId, inviter: asInviter(from), inviteeNodeId: to }));
  return { clock, inviterBook, pending, offerFrom };
}

function selectionProblem(run: () => unknown): { problem: string; candidates: string[] } {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof PendingSelectionError, String(error));
    return { problem: error.problem, candidates: error.candidates.map((view) => view.fromName) };
  }
  assert.fail('expected a selection error');
}

describe('PendingInvitations', () => {
  it('shows an offer with the fingerprint of the connected key, and approval yields a valid acceptance', () => {
    const { pending, offerFrom, inviterBook } = setup();
    const offer = offerFrom(rig);
    const outcome = pending.receive(offer, rig.nodeId);
    assert.equal(outcome.ok, true);
    assert.deepEqual(pending.list(), [
      { id: offer.id, fromNodeId: rig.nodeId, fromName: 'rig', fingerprint: rig.fingerprint, clusterId, expiresAtMs: 50_000 + INVITATION_TTL_MS },
    ]);
    assert.equal('secret' in pending.list()[0]!, false);
    const approved = pending.approve('rig');
    assert.equal(inviterBook.accept(buildInviteAccept(approved.offer, self), self.nodeId).ok, true);
    assert.deepEqual(pending.list(), []);
  });

  it('refuses offers for another node and offers whose inviter is not the connected peer', () => {
    const { pending, offerFrom } = setup();
    assert.deepEqual(pending.receive(offerFrom(rig, desk.nodeId), rig.nodeId), { ok: false, problem: 'not-for-this-node' });
    assert.deepEqual(pending.receive(offerFrom(rig), desk.nodeId), { ok: false, problem: 'inviter-mismatch' });
    const spoofed = { ...offerFrom(desk), inviter: { ...asInviter(desk), fingerprint: rig.fingerprint } };
    assert.deepEqual(pending.receive(spoofed, desk.nodeId), { ok: false, problem: 'inviter-mismatch' });
    assert.deepEqual(pending.list(), []);
  });

  it('expires offers on this machine\'s clock, counted from arrival', () => {
    const { pending, offerFrom, clock } = setup();
    const offer = { ...offerFrom(rig), expiresInMs: 1_000 };
    pending.receive(offer, rig.nodeId);
    clock.now += 999;
    assert.equal(pending.list().length, 1);
    clock.now += 1;
    assert.deepEqual(pending.list(), []);
    assert.equal(selectionProblem(() => pending.approve('rig')).problem, 'none-pending');
  });

  it('selects by id, node id or name, and lists the candidates when a name is ambiguous', () => {
    const { pending, offerFrom } = setup();
    const fromRig = offerFrom(rig);
    const fromOtherRig = offerFrom(otherRig);
    const fromDesk = offerFrom(desk);
    for (const [offer, from] of [[fromRig, rig], [fromOtherRig, otherRig], [fromDesk, desk]] as const) pending.receive(offer, from.nodeId);

    const ambiguous = selectionProblem(() => pending.approve('RIG'));
    assert.deepEqual(ambiguous, { problem: 'ambiguous', candidates: ['rig', 'Rig'] });
    assert.throws(() => pending.approve('rig'), (error: Error) => error.message.includes(fromRig.id) && error.message.includes(fromOtherRig.id));
    assert.deepEqual(selectionProblem(() => pending.approve()), { problem: 'ambiguous', candidates: ['rig', 'Rig', 'desk'] });
    assert.equal(selectionProblem(() => pending.decline('nobody')).problem, 'no-match');

    assert.equal(pending.decline(fromRig.id).fromNodeId, rig.nodeId);
    assert.equal(pending.approve(otherRig.nodeId).id, fromOtherRig.id);
    assert.equal(pending.approve().id, fromDesk.id);
    assert.deepEqual(pending.list(), []);
  });

  it('keeps one offer per inviter and at most 16, the oldest going first', async () => {
    const { pending, offerFrom } = setup();
    const first = offerFrom(rig);
    pending.receive(first, rig.nodeId);
    const second = offerFrom(rig);
    const outcome = pending.receive(second, rig.nodeId);
    assert.deepEqual(outcome.ok && outcome.replaced, first.id);
    assert.deepEqual(pending.list().map((view) => view.id), [second.id]);

    const inviters = await Promise.all(Array.from({ length: PENDING_INVITATIONS_MAX }, (_, i) => node(20 + i, `n${i}`)));
    let lastEvicted = null;
    for (const inviter of inviters) {
      const result = pending.receive(offerFrom(inviter), inviter.nodeId);
      if (result.ok) lastEvicted = result.evicted;
    }
    assert.equal(lastEvicted, second.id);
    assert.equal(pending.list().length, PENDING_INVITATIONS_MAX);
  });
});
