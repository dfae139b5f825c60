import { createHash, randomBytes } from 'node:crypto';
import { link, mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Ed25519PrivateKey } from '@libp2p/interface';
import { generateKeyPair, privateKeyFromProtobuf, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey, peerIdFromString } from '@libp2p/peer-id';
import { fsyncDir } from '../common/durable-fs.js';
import { errorMessage, ShoalError } from '../common/errors.js';
import { Fingerprint, NodeId } from './messages.js';

/**
 * A node's identity: the Ed25519 key in its data dir. The node id (libp2p peer id) is what Noise
 * authenticates; the fingerprint is the same key rendered for people to compare.
 */

export const IDENTITY_FILE = 'identity.key';
const FINGERPRINT_BYTES = 10;
const CROCKFORD_ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export interface Identity {
  privateKey: Ed25519PrivateKey;
  nodeId: NodeId;
  /** The raw 32-byte Ed25519 public key. */
  publicKeyRaw: Uint8Array;
  fingerprint: Fingerprint;
}

export type IdentityProblem = 'insecure-permissions' | 'unreadable' | 'corrupt';

/** The node cannot start with the key file as it is; the message says what to do. */
export class IdentityError extends ShoalError {
  readonly problem: IdentityProblem;

  constructor(problem: IdentityProblem, message: string, cause?: unknown) {
    super('INTERNAL', message, { cause });
    this.name = 'IdentityError';
    this.problem = problem;
  }
}

/** SHA-256 of the raw public key, first 10 bytes, Crockford base32, grouped `XXXX-XXXX-XXXX-XXXX`. */
export function fingerprint(publicKeyRaw: Uint8Array): Fingerprint {
  const digest = createHash('sha256').update(publicKeyRaw).digest().subarray(0, FINGERPRINT_BYTES);
  let bits = 0n;
  for (const byte of digest) bits = (bits << 8n) | BigInt(byte);
  let text = '';
  for (let shift = BigInt(FINGERPRINT_BYTES * 8 - 5); shift >= 0n; shift -= 5n) {
    text += CROCKFORD_ALPHABET[Number((bits >> shift) & 31n)];
  }
  return Fingerprint.parse(text.match(/.{4}/g)?.join('-'));
}

/** The raw Ed25519 public key inside a node id (the peer id embeds it), or null for any other key type. */
export function publicKeyOfNodeId(nodeId: string): Uint8Array | null {
  try {
    const peerId = peerIdFromString(nodeId);
    return peerId.type === 'Ed25519' ? peerId.publicKey.raw : null;
  } catch {
    return null;
  }
}

/** The fingerprint of the key a node id names: what a peer's fingerprint must be, whatever it claims. */
export function fingerprintOfNodeId(nodeId: string): Fingerprint | null {
  const raw = publicKeyOfNodeId(nodeId);
  return raw === null ? null : fingerprint(raw);
}

function identityOf(privateKey: Ed25519PrivateKey): Identity {
  const publicKeyRaw = privateKey.publicKey.raw;
  return {
    privateKey,
    nodeId: NodeId.parse(peerIdFromPrivateKey(privateKey).toString()),
    publicKeyRaw,
    fingerprint: fingerprint(publicKeyRaw),
  };
}

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/**
 * Loads `<dataDir>/identity.key`, or creates it (mode 0600) when the data dir has none. Refuses a
 * key file other users can read, and one it cannot read or parse: starting with a new key would
 * silently turn this machine into a different node.
 */
export async function loadOrCreateIdentity(dataDir: string): Promise<Identity> {
  const path = join(dataDir, IDENTITY_FILE);
  const mode = await keyFileMode(path);
  return mode === null ? createIdentity(path) : loadIdentity(path, mode);
}

/** The key file's mode, or null when there is none. */
async function keyFileMode(path: string): Promise<number | null> {
  let info;
  try {
    info = await stat(path);
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return null;
    throw unreadable(path, error);
  }
  if (!info.isFile()) {
    throw new IdentityError('corrupt', `${path} is not a regular file: move it aside so that shoal can create the node's key there`);
  }
  return info.mode;
}

async function loadIdentity(path: string, mode: number): Promise<Identity> {
  if (process.platform !== 'win32' && (mode & 0o077) !== 0) {
    throw new IdentityError(
      'insecure-permissions',
      `the node's private key ${path} is accessible to other users (mode ${(mode & 0o777).toString(8).padStart(4, '0')}): run 'chmod 600 ${path}' and start again`,
    );
  }
  let bytes: Uint8Array;
  try {
    bytes = await readFile(path);
  } catch (error) {
    throw unreadable(path, error);
  }
  return identityOf(parseKey(path, bytes));
}

function unreadable(path: string, error: unknown): IdentityError {
  const reason = errnoOf(error) ?? errorMessage(error);
  return new IdentityError(
    'unreadable',
    `cannot read the node's private key ${path} (${reason}): run shoal as the user that owns it, or fix its owner and permissions`,
    error,
  );
}

function parseKey(path: string, bytes: Uint8Array): Ed25519PrivateKey {
  let key;
  try {
    key = privateKeyFromProtobuf(bytes);
  } catch (error) {
    throw corrupt(path, errorMessage(error), error);
  }
  if (key.type !== 'Ed25519') throw corrupt(path, `it holds a ${key.type} key, shoal nodes use Ed25519`);
  return key;
}

function corrupt(path: string, reason: string, cause?: unknown): IdentityError {
  return new IdentityError(
    'corrupt',
    `the node's private key ${path} is damaged (${reason}): restore it from a backup, or move it aside to create a new one ` +
      '(this machine then becomes a new node, with a new fingerprint, and must be invited into its cluster again)',
    cause,
  );
}

/**
 * Writes the new key to a temporary file, fsyncs it, then links it into place: a crash leaves
 * either no key or a whole one, and a second process racing to create it adopts the winner's key
 * instead of replacing it.
 */
async function createIdentity(path: string): Promise<Identity> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const privateKey = await generateKeyPair('Ed25519');
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await open(tmp, 'wx', 0o600);
  try {
    await handle.chmod(0o600);
    await handle.writeFile(privateKeyToProtobuf(privateKey));
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(tmp, path);
  } catch (error) {
    const code = errnoOf(error);
    if (code === 'EEXIST') {
      await rm(tmp, { force: true });
      const mode = await keyFileMode(path);
      if (mode === null) {
        throw new IdentityError(
          'unreadable',
          `${path} is a symbolic link to a missing file: restore the file it points to, or remove the link so that shoal creates a new key`,
        );
      }
      return loadIdentity(path, mode);
    }
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') {
      await rm(tmp, { force: true });
      throw error;
    }
    // Filesystems without hard links: rename is still atomic, only the creation race is unguarded.
    await rename(tmp, path);
  }
  await rm(tmp, { force: true });
  await fsyncDir(dirname(path));
  return identityOf(privateKey);
}
