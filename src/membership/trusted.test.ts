import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fingerprint } from './identity.js';
import { ClusterId } from './messages.js';
import {
  TRUSTED_CLUSTERS_FILE,
  TRUSTED_CLUSTERS_MAX,
  TRUSTED_FINGERPRINTS_PER_CLUSTER_MAX,
  TrustedClusters,
  TrustedStoreError,
} from './trusted.js';

const dirs: string[] = [];
async function freshDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-trusted-'));
  dirs.push(dir);
  return dir;
}
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

const fp = (n: number) => fingerprint(Buffer.from(`key-${n}`));
const cluster = (n: number) => ClusterId.parse(n.toString(16).padStart(32, '0'));

async function problemOf(dataDir: string): Promise<TrustedStoreError['problem']> {
  try {
    await TrustedClusters.load(dataDir);
  } catch (error) {
    assert.ok(error instanceof TrustedStoreError, String(error));
    return error.problem;
  }
  assert.fail('expected the load to fail');
}

describe('TrustedClusters', () => {
  it('trusts a remembered cluster only for the keys remembered with it, across restarts', async () => {
    const dataDir = await freshDir();
    let clock = 5_000;
    const trusted = await TrustedClusters.load(dataDir, { nowMs: () => clock });
    assert.equal(trusted.isTrusted(cluster(1), fp(1)), false);
    await trusted.remember(cluster(1), [fp(1)]);
    assert.equal(trusted.isTrusted(cluster(1), fp(1)), true);
    assert.equal(trusted.isTrusted(cluster(1), fp(2)), false);
    assert.equal(trusted.isTrusted(cluster(2), fp(1)), false);

    const path = join(dataDir, TRUSTED_CLUSTERS_FILE);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    assert.deepEqual(await readdir(dataDir), [TRUSTED_CLUSTERS_FILE]);
    assert.deepEqual(JSON.parse(await readFile(path, 'utf8')), {
      v: 1,
      clusters: [{ clusterId: cluster(1), approvedAtMs: 5_000, inviterFingerprints: [fp(1)] }],
    });

    clock = 6_000;
    await trusted.remember(cluster(1), [fp(2), fp(1), fp(2)]);
    const reloaded = await TrustedClusters.load(dataDir);
    assert.deepEqual(reloaded.get(cluster(1)), { clusterId: cluster(1), approvedAtMs: 6_000, inviterFingerprints: [fp(2), fp(1)] });
    assert.equal(reloaded.isTrusted(cluster(1), fp(2)), true);
  });

  it('forgets a cluster, so its next invitation asks again', async () => {
    const dataDir = await freshDir();
    const trusted = await TrustedClusters.load(dataDir);
    await trusted.remember(cluster(1), [fp(1)]);
    await trusted.remember(cluster(2), [fp(2)]);
    assert.equal(await trusted.forget(cluster(1)), true);
    assert.equal(await trusted.forget(cluster(1)), false);
    assert.equal(trusted.isTrusted(cluster(1), fp(1)), false);
    const reloaded = await TrustedClusters.load(dataDir);
    assert.deepEqual(reloaded.list().map((entry) => entry.clusterId), [cluster(2)]);
  });

  it('bounds the clusters and the keys per cluster, keeping the newest', async () => {
    const dataDir = await freshDir();
    let clock = 0;
    const trusted = await TrustedClusters.load(dataDir, { nowMs: () => ++clock });
    for (let i = 0; i < TRUSTED_CLUSTERS_MAX + 3; i++) await trusted.remember(cluster(i), [fp(i)]);
    const kept = trusted.list().map((entry) => entry.clusterId);
    assert.equal(kept.length, TRUSTED_CLUSTERS_MAX);
    assert.equal(kept.includes(cluster(0)), false);
    assert.equal(kept.includes(cluster(TRUSTED_CLUSTERS_MAX + 2)), true);

    const many = Array.from({ length: TRUSTED_FINGERPRINTS_PER_CLUSTER_MAX + 5 }, (_, i) => fp(1000 + i));
    await trusted.remember(cluster(0), many);
    assert.deepEqual(trusted.get(cluster(0))?.inviterFingerprints, many.slice(5));
    assert.equal((await TrustedClusters.load(dataDir)).list().length, TRUSTED_CLUSTERS_MAX);
  });

  it('serializes concurrent changes so none is lost', async () => {
    const dataDir = await freshDir();
    const trusted = await TrustedClusters.load(dataDir);
    await Promise.all(Array.from({ length: 10 }, (_, i) => trusted.remember(cluster(i), [fp(i)])));
    assert.equal((await TrustedClusters.load(dataDir)).list().length, 10);
    assert.deepEqual(await readdir(dataDir), [TRUSTED_CLUSTERS_FILE]);
  });

  it('refuses a damaged file or one other users can write', async () => {
    const dataDir = await freshDir();
    const path = join(dataDir, TRUSTED_CLUSTERS_FILE);
    await writeFile(path, '{ not json', { mode: 0o600 });
    assert.equal(await problemOf(dataDir), 'corrupt');
    await writeFile(path, JSON.stringify({ v: 1, clusters: [{ clusterId: 'nope', approvedAtMs: 1, inviterFingerprints: [] }] }));
    assert.equal(await problemOf(dataDir), 'corrupt');
    await assert.rejects(TrustedClusters.load(dataDir), /delete it to start again/);

    await writeFile(path, JSON.stringify({ v: 1, clusters: [] }));
    await chmod(path, 0o664);
    assert.equal(await problemOf(dataDir), 'insecure-permissions');
    await assert.rejects(TrustedClusters.load(dataDir), new RegExp(`chmod 600 ${path}`));
    await chmod(path, 0o644);
    assert.deepEqual((await TrustedClusters.load(dataDir)).list(), []);
  });
});
