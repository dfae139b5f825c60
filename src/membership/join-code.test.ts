import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { generateKeyPairFromSeed } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { encode } from '@msgpack/msgpack';
import { fingerprint } from './identity.js';
import { InvitationBook, buildJoinRequest } from './invitations.js';
import { JOIN_CODE_CLOCK_SKEW_MS, JOIN_CODE_PREFIX, JoinCodeError, decodeJoinCode, encodeJoinCode, joinCodeFor, type JoinCode } from './join-code.js';
import { ClusterId, InvitationId, NodeId, type InviterInfo, type MemberClaim } from './messages.js';

const inviterKey = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(1));
const inviter: InviterInfo = {
  nodeId: NodeId.parse(peerIdFromPrivateKey(inviterKey).toString()),
  name: 'gpu-rig-01 (basement)',
  fingerprint: fingerprint(inviterKey.publicKey.raw),
};
const joinerKey = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(2));
const joiner: MemberClaim = {
  nodeId: NodeId.parse(peerIdFromPrivateKey(joinerKey).toString()),
  name: 'laptop',
  fingerprint: fingerprint(joinerKey.publicKey.raw),
  addrs: [],
};
const NOW = 1_760_000_000_000;
const addrs = ['/ip4/192.168.1.23/tcp/52601', '/ip6/fd00::1:2:3:4/tcp/52601', '/dns4/rig.home.arpa/tcp/52601'];
const code: JoinCode = {
  v: 1,
  clusterId: ClusterId.parse('00112233445566778899aabbccddeeff'),
  inviter,
  addrs,
  id: InvitationId.parse('0a1b2c3d4e5f6071'),
  secret: Buffer.alloc(32, 9).toString('base64url'),
  expiresAtMs: NOW + 10 * 60_000,
};

function problemOf(text: string, nowMs = NOW): JoinCodeError['problem'] | 'ok' {
  try {
    decodeJoinCode(text, nowMs);
    return 'ok';
  } catch (error) {
    assert.ok(error instanceof JoinCodeError, String(error));
    return error.problem;
  }
}

/** A code with a valid checksum around an arbitrary payload: what a newer version or a bug could produce. */
function wrap(payload: Uint8Array): string {
  const sum = createHash('sha256').update(payload).digest().subarray(0, 4);
  return JOIN_CODE_PREFIX + Buffer.concat([payload, sum]).toString('base64url');
}

describe('join codes', () => {
  it('round-trips, under 400 characters with three addresses', () => {
    const text = encodeJoinCode(code);
    assert.ok(text.startsWith('shoal1-'));
    assert.ok(text.length < 400, `${text.length} characters`);
    assert.deepEqual(decodeJoinCode(text, NOW), code);
  });

  it('ignores whitespace and line breaks from pasting', () => {
    const text = encodeJoinCode(code);
    const pasted = `  ${text.slice(0, 60)}\n${text.slice(60, 130)}\r\n ${text.slice(130)}\n`;
    assert.deepEqual(decodeJoinCode(pasted, NOW), code);
  });

  it('catches every single-character typo as damage', () => {
    const text = encodeJoinCode(code);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    for (let i = JOIN_CODE_PREFIX.length; i < text.length; i++) {
      const replacement = alphabet[(alphabet.indexOf(text[i]!) + 1 + (i % 63)) % 64]!;
      const typo = text.slice(0, i) + replacement + text.slice(i + 1);
      assert.equal(problemOf(typo), 'damaged', `typo at ${i}`);
    }
  });

  it('says the code is damaged when it is cut short, extended or has stray characters', () => {
    const text = encodeJoinCode(code);
    assert.equal(problemOf(text.slice(0, -1)), 'damaged');
    assert.equal(problemOf(text.slice(0, 40)), 'damaged');
    assert.equal(problemOf(`${text}A`), 'damaged');
    assert.equal(problemOf(`${text.slice(0, 50)}!${text.slice(50)}`), 'damaged');
    assert.equal(problemOf(JOIN_CODE_PREFIX), 'damaged');
    assert.throws(() => decodeJoinCode(text.slice(0, -3), NOW), /the join code is damaged: copy it again/);
  });

  it('tells other text and newer formats apart from damage', () => {
    assert.equal(problemOf('hello world'), 'not-a-code');
    assert.equal(problemOf('x'.repeat(5000)), 'not-a-code');
    assert.equal(problemOf(encodeJoinCode(code).replace('shoal1-', 'shoal2-')), 'unsupported-version');
    assert.equal(problemOf(wrap(encode([2, 'anything']))), 'unsupported-version');
  });

  it('refuses a well-checksummed payload that is not a join code', () => {
    assert.equal(problemOf(wrap(encode({ hello: 'world' }))), 'damaged');
    assert.equal(problemOf(wrap(encode([1, new Uint8Array(3)]))), 'damaged');
    assert.equal(problemOf(wrap(new Uint8Array([0xc1]))), 'damaged');
  });

  it('expires, allowing for a little clock skew, and says to ask for a new code', () => {
    const text = encodeJoinCode(code);
    assert.equal(problemOf(text, code.expiresAtMs + JOIN_CODE_CLOCK_SKEW_MS - 1), 'ok');
    assert.equal(problemOf(text, code.expiresAtMs + JOIN_CODE_CLOCK_SKEW_MS), 'expired');
    assert.throws(() => decodeJoinCode(text, code.expiresAtMs + 3_600_000), /expired .*ask for a new one/);
  });

  it("derives the inviter's fingerprint from its key and refuses to encode a mismatched one", () => {
    const decoded = decodeJoinCode(encodeJoinCode(code), NOW);
    assert.equal(decoded.inviter.fingerprint, fingerprint(inviterKey.publicKey.raw));
    assert.throws(() => encodeJoinCode({ ...code, inviter: { ...inviter, fingerprint: joiner.fingerprint } }));
  });

  it('carries a join-code invitation from the inviter to a redemption the inviter accepts', () => {
    const book = new InvitationBook({ nowMs: () => NOW });
    const invitation = book.createForJoinCode({ clusterId: code.clusterId, inviter });
    const text = encodeJoinCode(joinCodeFor(invitation, addrs));
    const received = decodeJoinCode(text, NOW + 60_000);
    assert.deepEqual(received.addrs, addrs);
    const verdict = book.redeem(buildJoinRequest(received, joiner), joiner.nodeId);
    assert.equal(verdict.ok, true);
    const targeted = book.create({ clusterId: code.clusterId, inviter, inviteeNodeId: joiner.nodeId });
    assert.throws(() => joinCodeFor(targeted, addrs));
  });
});
