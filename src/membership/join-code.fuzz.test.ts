import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { generateKeyPairFromSeed } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { encode } from '@msgpack/msgpack';
import fc from 'fast-check';
import { anyJson, fuzzParams, mutated } from '../../test/support/fuzz.js';
import { fingerprint } from './identity.js';
import { InvitationBook, buildJoinRequest } from './invitations.js';
import { JOIN_CODE_PREFIX, JoinCodeError, decodeJoinCode, encodeJoinCode, joinCodeFor } from './join-code.js';
import { ClusterId, InviteMessage, NodeId, type InviterInfo, type MemberClaim } from './messages.js';

/**
 * Join codes are pasted by people and invitation messages come from any peer that can open a stream:
 * whatever arrives, decoding throws a typed JoinCodeError and the invitation book answers a verdict,
 * and only the holder of the secret is ever admitted.
 */

const inviterKey = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(1));
const inviter: InviterInfo = { nodeId: NodeId.parse(peerIdFromPrivateKey(inviterKey).toString()), name: 'rig', fingerprint: fingerprint(inviterKey.publicKey.raw) };
const joinerKey = await generateKeyPairFromSeed('Ed25519', new Uint8Array(32).fill(2));
const joiner: MemberClaim = { nodeId: NodeId.parse(peerIdFromPrivateKey(joinerKey).toString()), name: 'laptop', fingerprint: fingerprint(joinerKey.publicKey.raw), addrs: ['/ip4/10.0.0.2/tcp/4001'] };
const clusterId = ClusterId.parse('00112233445566778899aabbccddeeff');
const NOW = 1_760_000_000_000;

/** Every book made here holds the same invitation, so one valid request redeems it in any of them. */
function newBook(): InvitationBook {
  return new InvitationBook({ nowMs: () => NOW, randomBytes: (size) => new Uint8Array(size).fill(7) });
}

const invitation = newBook().createForJoinCode({ clusterId, inviter });
const code = joinCodeFor(invitation, ['/ip4/192.168.1.23/tcp/52601', '/dns4/rig.home.arpa/tcp/52601']);
const text = encodeJoinCode(code);

function decodesOrRefuses(input: string): ReturnType<typeof decodeJoinCode> | null {
  try {
    return decodeJoinCode(input, NOW);
  } catch (error) {
    assert.ok(error instanceof JoinCodeError, `not a JoinCodeError: ${String(error)} for ${JSON.stringify(input).slice(0, 200)}`);
    return null;
  }
}

/** A code with a valid checksum around an arbitrary payload: what a newer version or a bug could produce. */
function wrap(payload: Uint8Array): string {
  const sum = createHash('sha256').update(payload).digest().subarray(0, 4);
  return JOIN_CODE_PREFIX + Buffer.concat([payload, sum]).toString('base64url');
}

const bytes = (max: number) => fc.uint8Array({ maxLength: max });

describe('join codes, fuzzed', () => {
  it('arbitrary text is refused with a typed JoinCodeError', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300 }), fc.string({ maxLength: 300 }).map((s) => JOIN_CODE_PREFIX + s), fc.constant('x'.repeat(5000))), (input) => {
        assert.equal(decodesOrRefuses(input), null);
      }),
      fuzzParams(500),
    );
  });

  it('a code with characters changed, dropped or added is refused, or reads as the original', () => {
    const edit = fc.record({ at: fc.nat({ max: text.length - 1 }), kind: fc.constantFrom('replace', 'drop', 'insert'), char: fc.constantFrom(...'AZaz09-_+/= \n'.split('')) });
    fc.assert(
      fc.property(fc.array(edit, { minLength: 1, maxLength: 3 }), (edits) => {
        let s = text;
        for (const e of edits) {
          const at = e.at % s.length;
          s = e.kind === 'drop' ? s.slice(0, at) + s.slice(at + 1) : s.slice(0, at) + e.char + s.slice(at + (e.kind === 'replace' ? 1 : 0));
        }
        const decoded = decodesOrRefuses(s);
        if (decoded !== null) assert.deepEqual(decoded, code, `a changed code read as another: ${s}`);
      }),
      fuzzParams(500),
    );
  });

  it('any payload behind a valid checksum is refused with a typed JoinCodeError or decodes', () => {
    const tupleLike = fc.tuple(
      fc.oneof(fc.constant(1), fc.integer()),
      bytes(20),
      bytes(40),
      fc.string({ maxLength: 80 }),
      bytes(12),
      bytes(40),
      fc.oneof(fc.constant(NOW + 60_000), fc.integer(), fc.double()),
      fc.array(bytes(30), { maxLength: 10 }),
    );
    fc.assert(
      fc.property(fc.oneof(bytes(200), anyJson.map((v) => encode(v)), tupleLike.map((t) => encode(t))), (payload) => {
        decodesOrRefuses(wrap(payload));
      }),
      fuzzParams(500),
    );
  });
});

describe('invitation messages, fuzzed', () => {
  const valid = buildJoinRequest(invitation, joiner);

  it('the unchanged request is admitted once', () => {
    const book = newBook();
    book.createForJoinCode({ clusterId, inviter });
    assert.equal(book.redeem(valid, joiner.nodeId).ok, true);
    assert.deepEqual(book.redeem(valid, joiner.nodeId), { ok: false, refusal: 'already-used' });
  });

  it('arbitrary or near-valid messages parse or are refused, and the book admits only a valid proof', () => {
    fc.assert(
      fc.property(fc.oneof(anyJson, mutated(valid)), fc.boolean(), (value, fromJoiner) => {
        const parsed = InviteMessage.safeParse(value);
        if (!parsed.success) return;
        const message = parsed.data;
        if (message.type !== 'join-request' && message.type !== 'invite-accept') return;
        const book = newBook();
        book.createForJoinCode({ clusterId, inviter });
        const remote = fromJoiner ? joiner.nodeId : inviter.nodeId;
        const verdict = message.type === 'join-request' ? book.redeem(message, remote) : book.accept(message, remote);
        if (verdict.ok) {
          assert.equal(message.type, 'join-request');
          assert.equal(remote, joiner.nodeId);
          assert.ok(Buffer.from(message.proof, 'base64url').equals(Buffer.from(valid.proof, 'base64url')), 'admitted without the proof');
        }
      }),
      fuzzParams(500),
    );
  });
});
