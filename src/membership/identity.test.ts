import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { generateKeyPair, generateKeyPairFromSeed, privateKeyToProtobuf } from '@libp2p/crypto/keys';
import { peerIdFromPrivateKey } from '@libp2p/peer-id';
import { IDENTITY_FILE, IdentityError, fingerprint, fingerprintOfNodeId, loadOrCreateIdentity, publicKeyOfNodeId } from './identity.js';

// RFC 8032, section 7.1, test 1.
const RFC8032_SEED = '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60';
const RFC8032_PUBLIC = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';
// Computed independently: base32-crockford(sha256(public)[0:10]).
const RFC8032_FINGERPRINT = '47Z3-3QX1-AJH6-2RKB';
const RFC8032_NODE_ID = '12D3KooWQK1wnefoLrcVHbbnf5tLzbopUd3K3bFAoJpA7YJgL5pV';

const dirs: string[] = [];
async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-identity-'));
  dirs.push(dir);
  return dir;
}
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function rejectsWith(promise: Promise<unknown>, problem: IdentityError['problem'], text: RegExp): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof IdentityError, `expected an IdentityError, got ${String(error)}`);
    assert.equal(error.problem, problem);
    assert.match(error.message, text);
    return true;
  });
}

describe('fingerprint', () => {
  it('matches the known answer for the RFC 8032 test key', () => {
    assert.equal(fingerprint(Buffer.from(RFC8032_PUBLIC, 'hex')), RFC8032_FINGERPRINT);
  });

  it('derives the same node id and fingerprint from the key and from the node id', async () => {
    const key = await generateKeyPairFromSeed('Ed25519', Buffer.from(RFC8032_SEED, 'hex'));
    assert.equal(Buffer.from(key.publicKey.raw).toString('hex'), RFC8032_PUBLIC);
    assert.equal(peerIdFromPrivateKey(key).toString(), RFC8032_NODE_ID);
    assert.equal(fingerprintOfNodeId(RFC8032_NODE_ID), RFC8032_FINGERPRINT);
    assert.equal(Buffer.from(publicKeyOfNodeId(RFC8032_NODE_ID)!).toString('hex'), RFC8032_PUBLIC);
  });

  it('has no fingerprint for ids that are not Ed25519 peer ids', async () => {
    const secp = peerIdFromPrivateKey(await generateKeyPair('secp256k1')).toString();
    assert.equal(fingerprintOfNodeId(secp), null);
    assert.equal(fingerprintOfNodeId('not-a-peer-id'), null);
  });
});

describe('loadOrCreateIdentity', () => {
  it('creates a 0600 key once and loads the same identity afterwards', async () => {
    const dataDir = join(await freshDir(), 'nested', 'data');
    const created = await loadOrCreateIdentity(dataDir);
    const info = await stat(join(dataDir, IDENTITY_FILE));
    assert.equal(info.mode & 0o777, 0o600);
    assert.deepEqual(await readdir(dataDir), [IDENTITY_FILE]);
    assert.equal(created.privateKey.type, 'Ed25519');
    assert.equal(created.fingerprint, fingerprint(created.publicKeyRaw));
    assert.equal(fingerprintOfNodeId(created.nodeId), created.fingerprint);

    const loaded = await loadOrCreateIdentity(dataDir);
    assert.equal(loaded.nodeId, created.nodeId);
    assert.equal(loaded.fingerprint, created.fingerprint);
    assert.deepEqual(loaded.publicKeyRaw, created.publicKeyRaw);
  });

  it('gives two racing starts the same key', async () => {
    const dataDir = await freshDir();
    const [a, b] = await Promise.all([loadOrCreateIdentity(dataDir), loadOrCreateIdentity(dataDir)]);
    assert.equal(a.nodeId, b.nodeId);
    assert.deepEqual(await readdir(dataDir), [IDENTITY_FILE]);
  });

  it('refuses a key other users can read, and says which chmod to run', async () => {
    const dataDir = await freshDir();
    await loadOrCreateIdentity(dataDir);
    const path = join(dataDir, IDENTITY_FILE);
    await chmod(path, 0o644);
    await rejectsWith(loadOrCreateIdentity(dataDir), 'insecure-permissions', new RegExp(`chmod 600 ${path}`));
    await chmod(path, 0o640);
    await rejectsWith(loadOrCreateIdentity(dataDir), 'insecure-permissions', /mode 0640/);
    await chmod(path, 0o600);
    await loadOrCreateIdentity(dataDir);
  });

  it('refuses a corrupt key file instead of replacing it', async () => {
    const dataDir = await freshDir();
    const path = join(dataDir, IDENTITY_FILE);
    await writeFile(path, Buffer.from('definitely not a protobuf key'), { mode: 0o600 });
    await rejectsWith(loadOrCreateIdentity(dataDir), 'corrupt', /damaged.*restore it from a backup/);
    await writeFile(path, Buffer.alloc(0), { mode: 0o600 });
    await rejectsWith(loadOrCreateIdentity(dataDir), 'corrupt', /damaged/);
  });

  it('refuses a key of another type', async () => {
    const dataDir = await freshDir();
    await writeFile(join(dataDir, IDENTITY_FILE), privateKeyToProtobuf(await generateKeyPair('secp256k1')), { mode: 0o600 });
    await rejectsWith(loadOrCreateIdentity(dataDir), 'corrupt', /secp256k1 key, shoal nodes use Ed25519/);
  });

  it('refuses a directory or a dangling link where the key should be', async () => {
    const dirCase = await freshDir();
    await mkdir(join(dirCase, IDENTITY_FILE));
    await rejectsWith(loadOrCreateIdentity(dirCase), 'corrupt', /not a regular file/);

    const linkCase = await freshDir();
    await symlink(join(linkCase, 'gone.key'), join(linkCase, IDENTITY_FILE));
    await rejectsWith(loadOrCreateIdentity(linkCase), 'unreadable', /symbolic link to a missing file/);
    assert.deepEqual(await readdir(linkCase), [IDENTITY_FILE]);
  });
});
