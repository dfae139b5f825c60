import { randomUUID } from 'node:crypto';
import { z } from 'zod';

export const InstanceId = z.string().min(1).max(64).brand<'InstanceId'>();
export type InstanceId = z.infer<typeof InstanceId>;

export const ModelId = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*(:[A-Za-z0-9._-]+)?$/, 'a model id looks like "owner/name"')
  .brand<'ModelId'>();
export type ModelId = z.infer<typeof ModelId>;

export function newInstanceId(): InstanceId {
  return `inst-${randomUUID().slice(0, 8)}` as InstanceId;
}

/** An Ed25519 libp2p peer id in base58btc (the identity multihash of the public key). */
export const NodeId = z
  .string()
  .regex(/^12D3KooW[1-9A-HJ-NP-Za-km-z]{44}$/, 'a node id looks like "12D3KooW…" (52 characters)')
  .brand<'NodeId'>();
export type NodeId = z.infer<typeof NodeId>;

/** SHA-256 of the raw public key, first 10 bytes, Crockford base32, grouped by four. */
export const Fingerprint = z
  .string()
  .regex(/^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){3}$/, 'a fingerprint looks like "XXXX-XXXX-XXXX-XXXX"')
  .brand<'Fingerprint'>();
export type Fingerprint = z.infer<typeof Fingerprint>;

/** 16 random bytes in lowercase hex, chosen by the founder. */
export const ClusterId = z.string().regex(/^[0-9a-f]{32}$/, 'a cluster id is 32 lowercase hex digits').brand<'ClusterId'>();
export type ClusterId = z.infer<typeof ClusterId>;

/** A UUID chosen by whoever submits the command; the master dedupes retries and re-proposals by it. */
export const CommandId = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/, 'a command id is a lowercase UUID')
  .brand<'CommandId'>();
export type CommandId = z.infer<typeof CommandId>;

function randomHex(random: () => number, digits: number): string {
  let out = '';
  for (let i = 0; i < digits; i++) out += Math.min(15, Math.floor(random() * 16)).toString(16);
  return out;
}

/**
 * A version-4 UUID drawn from `random` (not crypto): the core takes its randomness injected so a seeded
 * simulation replays exactly. Uniqueness only has to hold among commands in flight, not against an attacker.
 */
export function commandIdFrom(random: () => number): CommandId {
  const hex = randomHex(random, 32);
  const variant = ((parseInt(hex[16] ?? '0', 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}` as CommandId;
}

/** A cluster id drawn from `random`; the shell passes crypto-backed randomness when founding for real. */
export function clusterIdFrom(random: () => number): ClusterId {
  return randomHex(random, 32) as ClusterId;
}
