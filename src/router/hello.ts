import { createHash } from 'node:crypto';
import { peerIdFromString } from '@libp2p/peer-id';
import type { PeerId } from '@libp2p/interface';
import { z } from 'zod';
import { WIRE_VERSION } from '../wire/version.js';

export { WIRE_VERSION };

export const HELLO_PROTOCOL = '/shoal/hello/1';
export const INVITE_PROTOCOL = '/shoal/invite/1';
/** The only Shoal protocols a peer outside the roster may open (see admission.ts). */
export const NON_MEMBER_PROTOCOLS: readonly string[] = [HELLO_PROTOCOL, INVITE_PROTOCOL];
export const HELLO_MAX_BYTES = 8 * 1024;

/**
 * Read first, before the full schema: whatever a future hello looks like, it keeps a numeric
 * `wireVersion`, so a node can always say which version its peer speaks.
 */
export const HelloProbe = z.looseObject({ wireVersion: z.number().int().nonnegative() });

export const Hello = z.strictObject({
  type: z.literal('hello'),
  wireVersion: z.number().int().nonnegative(),
  nodeId: z.string().min(1).max(128),
  name: z.string().max(256),
  fingerprint: z.string().max(32),
  clusterId: z.string().max(64).nullable(),
  /** Listen addresses the sender can be dialled on (non-members get no identify, so they learn them here). */
  addrs: z.array(z.string().max(512)).max(32),
});
export type Hello = z.infer<typeof Hello>;

/** What `onHello` reports about a peer after its hello was verified against its Noise-proven key. */
export interface PeerHello {
  nodeId: string;
  name: string;
  /** Recomputed here from the peer's public key, never taken from the payload. */
  fingerprint: string;
  clusterId: string | null;
  wireVersion: number;
  /** Addresses the peer announced, plus the address we dialled it on when the connection is ours. */
  addrs: string[];
  /** The roster's verdict when the hello arrived. */
  member: boolean;
  direction: 'inbound' | 'outbound';
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * CLUSTER.md: SHA-256 of the raw 32-byte Ed25519 public key, first 10 bytes, Crockford base32
 * (16 chars), grouped XXXX-XXXX-XXXX-XXXX.
 */
export function fingerprintOfPublicKey(raw: Uint8Array): string {
  const digest = createHash('sha256').update(raw).digest().subarray(0, 10);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of digest) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += CROCKFORD[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    value &= (1 << bits) - 1;
  }
  return `${out.slice(0, 4)}-${out.slice(4, 8)}-${out.slice(8, 12)}-${out.slice(12, 16)}`;
}

/** The fingerprint of an Ed25519 peer id, or null for key types that do not inline their key. */
export function fingerprintOfPeer(peer: PeerId | string): string | null {
  const id = typeof peer === 'string' ? peerIdFromString(peer) : peer;
  if (id.type !== 'Ed25519') return null;
  return fingerprintOfPublicKey(id.publicKey.raw);
}

export function wireMismatchLine(peer: string, theirs: number, ours: number): string {
  return `peer ${peer} speaks wire version ${theirs}, this node speaks ${ours}: upgrade the older one`;
}
