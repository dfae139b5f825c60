import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { generateKeyPairFromSeed } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { fingerprint } from './identity.js';
import {
  ClusterId,
  Fingerprint,
  INVITE_MESSAGE_MAX_BYTES,
  InvitationId,
  MEMBER_ADDRS_MAX,
  MULTIADDR_MAX_CHARS,
  MultiaddrString,
  NODE_NAME_MAX_CHARS,
  NodeId,
  NodeName,
  decodeInviteMessage,
  encodeInviteMessage,
  type InviteMessage,
  type MemberClaim,
} from './messages.js';

const key = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(5));
const nodeId = NodeId.parse(peerIdFromPrivateKey(key).toString());
const member: MemberClaim = { nodeId, name: 'box', fingerprint: fingerprint(key.publicKey.raw), addrs: ['/ip4/10.1.2.3/tcp/52601'] };
const id = InvitationId.parse('0011223344556677');
const clusterId = ClusterId.parse('ffffffffffffffffffffffffffffffff');
const proof = Buffer.alloc(32, 3).toString('base64url');

const samples: InviteMessage[] = [
  {
    type: 'invite-offer',
    id,
    clusterId,
    inviter: { nodeId, name: 'box', fingerprint: member.fingerprint },
    inviteeNodeId: nodeId,
    secret: Buffer.alloc(32, 1).toString('base64url'),
    expiresInMs: 600_000,
  },
  { type: 'invite-accept', id, proof, member },
  { type: 'invite-decline', id },
  { type: 'join-request', id, proof, member },
  { type: 'invite-result', ok: true, clusterId },
  { type: 'invite-result', ok: false, clusterId, code: 'expired', message: 'the invitation expired' },
];

const text = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

describe('invite protocol messages', () => {
  it('round-trips every message type', () => {
    for (const message of samples) assert.deepEqual(decodeInviteMessage(encodeInviteMessage(message)), { ok: true, message });
  });

  it('checks the size before parsing', () => {
    const decoded = decodeInviteMessage(new Uint8Array(INVITE_MESSAGE_MAX_BYTES + 1).fill(0x7b));
    assert.equal(decoded.ok ? 'ok' : decoded.problem, 'too-large');
  });

  it('tells malformed bytes from invalid messages', () => {
    const problem = (bytes: Uint8Array) => {
      const decoded = decodeInviteMessage(bytes);
      return decoded.ok ? 'ok' : decoded.problem;
    };
    assert.equal(problem(new TextEncoder().encode('{"type":')), 'malformed');
    assert.equal(problem(new Uint8Array([0x22, 0xff, 0x22])), 'malformed');
    assert.equal(problem(text({ ...samples[2], extra: 1 })), 'invalid');
    assert.equal(problem(text({ type: 'invite-nonsense', id })), 'invalid');
    assert.equal(problem(text({ ...samples[1], proof: 'short' })), 'invalid');
    assert.equal(problem(text({ ...samples[0], expiresInMs: 3_600_000 })), 'invalid');
    assert.equal(problem(text({ type: 'invite-result', ok: true, clusterId, code: 'expired' })), 'invalid');
    assert.equal(problem(text({ type: 'invite-result', ok: false, clusterId })), 'invalid');
    assert.equal(problem(text({ type: 'invite-result', ok: false, clusterId, code: 'who-knows' })), 'invalid');
  });

  it('fits the largest valid message under the byte limit', () => {
    const longAddr = `/dns4/${'a'.repeat(MULTIADDR_MAX_CHARS - '/dns4//tcp/65535'.length)}/tcp/65535`;
    assert.equal(longAddr.length, MULTIADDR_MAX_CHARS);
    const largest: InviteMessage = {
      type: 'join-request',
      id,
      proof,
      member: { ...member, name: '\u{1F41F}'.repeat(NODE_NAME_MAX_CHARS / 2), addrs: Array(MEMBER_ADDRS_MAX).fill(longAddr) },
    };
    assert.ok(encodeInviteMessage(largest).byteLength <= INVITE_MESSAGE_MAX_BYTES);
    const tooMany = { ...largest, member: { ...largest.member, addrs: Array(MEMBER_ADDRS_MAX + 1).fill(longAddr) } };
    const decoded = decodeInviteMessage(text(tooMany));
    assert.equal(decoded.ok, false);
  });

  it('validates ids, fingerprints, names and addresses', () => {
    assert.equal(NodeId.safeParse(nodeId).success, true);
    assert.equal(NodeId.safeParse('QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N').success, false);
    assert.equal(Fingerprint.safeParse('47Z3-3QX1-AJH6-2RKB').success, true);
    assert.equal(Fingerprint.safeParse('47Z3-3QX1-AJH6-2RKU').success, false);
    assert.equal(Fingerprint.safeParse('47z3-3qx1-ajh6-2rkb').success, false);
    assert.equal(NodeName.safeParse('a\nb').success, false);
    assert.equal(NodeName.safeParse('x'.repeat(NODE_NAME_MAX_CHARS + 1)).success, false);
    assert.equal(MultiaddrString.safeParse('/ip4/127.0.0.1/tcp/1').success, true);
    assert.equal(MultiaddrString.safeParse('/nonsense/1').success, false);
    assert.equal(MultiaddrString.safeParse('127.0.0.1:1').success, false);
  });
});
