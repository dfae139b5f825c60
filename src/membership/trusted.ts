import { mkdir, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from '../common/durable-fs.js';
import { ShoalError } from '../common/errors.js';
import { ClusterId, Fingerprint } from './messages.js';

/**
 * The clusters this node's operator approved once: a later invitation into one of them is accepted
 * without asking. A cluster id alone is not proof (any node can claim any id), so an invitation is
 * trusted only when it comes from a key remembered for that cluster.
 */

export const TRUSTED_CLUSTERS_FILE = 'trusted-clusters.json';
export const TRUSTED_CLUSTERS_MAX = 32;
export const TRUSTED_FINGERPRINTS_PER_CLUSTER_MAX = 64;

export const TrustedCluster = z.strictObject({
  clusterId: ClusterId,
  /** When the operator (or a trusted re-invitation) last approved it, by this machine's clock. */
  approvedAtMs: z.number().int().nonnegative(),
  /** The members whose invitations into this cluster are accepted without asking. */
  inviterFingerprints: z.array(Fingerprint).min(1).max(TRUSTED_FINGERPRINTS_PER_CLUSTER_MAX),
});
export type TrustedCluster = z.infer<typeof TrustedCluster>;

const TrustedFile = z.strictObject({
  v: z.literal(1),
  clusters: z.array(TrustedCluster).max(TRUSTED_CLUSTERS_MAX),
});

export type TrustedStoreProblem = 'insecure-permissions' | 'unreadable' | 'corrupt';

export class TrustedStoreError extends ShoalError {
  readonly problem: TrustedStoreProblem;

  constructor(problem: TrustedStoreProblem, message: string, cause?: unknown) {
    super('INTERNAL', message, { cause });
    this.name = 'TrustedStoreError';
    this.problem = problem;
  }
}

export class TrustedClusters {
  private clusters: TrustedCluster[];
  private writing: Promise<void> = Promise.resolve();

  private constructor(
    private readonly path: string,
    clusters: TrustedCluster[],
    private readonly nowMs: () => number,
  ) {
    this.clusters = clusters;
  }

  /** Reads `<dataDir>/trusted-clusters.json`; no file means no trusted cluster yet. */
  static async load(dataDir: string, options: { nowMs?: () => number } = {}): Promise<TrustedClusters> {
    const path = join(dataDir, TRUSTED_CLUSTERS_FILE);
    return new TrustedClusters(path, await readClusters(path), options.nowMs ?? Date.now);
  }

  isTrusted(clusterId: ClusterId, inviterFingerprint: Fingerprint): boolean {
    return this.get(clusterId)?.inviterFingerprints.includes(inviterFingerprint) ?? false;
  }

  get(clusterId: ClusterId): TrustedCluster | null {
    return this.clusters.find((cluster) => cluster.clusterId === clusterId) ?? null;
  }

  list(): TrustedCluster[] {
    return this.clusters.map((cluster) => ({ ...cluster, inviterFingerprints: [...cluster.inviterFingerprints] }));
  }

  /**
   * Trusts `fingerprints` for the cluster (adding to those already known, the newest kept when there
   * are too many). Pass the roster's fingerprints too when they are known, so that any member can
   * invite this node back. The oldest approved cluster is forgotten beyond TRUSTED_CLUSTERS_MAX.
   */
  remember(clusterId: ClusterId, fingerprints: Fingerprint[]): Promise<void> {
    return this.update((clusters) => {
      const previous = clusters.find((cluster) => cluster.clusterId === clusterId);
      const merged = [...(previous?.inviterFingerprints ?? []).filter((known) => !fingerprints.includes(known)), ...new Set(fingerprints)];
      if (merged.length === 0) return clusters;
      const entry: TrustedCluster = {
        clusterId,
        approvedAtMs: this.nowMs(),
        inviterFingerprints: merged.slice(-TRUSTED_FINGERPRINTS_PER_CLUSTER_MAX),
      };
      const others = clusters.filter((cluster) => cluster.clusterId !== clusterId);
      return [...others, entry].sort((a, b) => a.approvedAtMs - b.approvedAtMs).slice(-TRUSTED_CLUSTERS_MAX);
    });
  }

  /** Stops trusting a cluster: its next invitation asks the operator again. Resolves false when it was not trusted. */
  async forget(clusterId: ClusterId): Promise<boolean> {
    let found = false;
    await this.update((clusters) => {
      found = clusters.some((cluster) => cluster.clusterId === clusterId);
      return found ? clusters.filter((cluster) => cluster.clusterId !== clusterId) : clusters;
    });
    return found;
  }

  /** Writes run one at a time; memory changes only once the file holds the new list. */
  private update(change: (clusters: TrustedCluster[]) => TrustedCluster[]): Promise<void> {
    const next = this.writing.then(async () => {
      const clusters = change(this.clusters);
      if (clusters === this.clusters) return;
      await writeAtomic(this.path, `${JSON.stringify(TrustedFile.parse({ v: 1, clusters }), null, 2)}\n`);
      this.clusters = clusters;
    });
    this.writing = next.catch(() => undefined);
    return next;
  }
}

async function readClusters(path: string): Promise<TrustedCluster[]> {
  let text: string;
  try {
    const info = await stat(path);
    // Anyone who can write this file can make the node join their cluster without asking.
    if (process.platform !== 'win32' && (info.mode & 0o022) !== 0) {
      throw new TrustedStoreError(
        'insecure-permissions',
        `${path} is writable by other users (mode ${(info.mode & 0o777).toString(8).padStart(4, '0')}): run 'chmod 600 ${path}' and start again`,
      );
    }
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (error instanceof TrustedStoreError) throw error;
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw new TrustedStoreError('unreadable', `cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? String(error)}): fix its owner and permissions`, error);
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw corrupt(path, error);
  }
  const parsed = TrustedFile.safeParse(json);
  if (!parsed.success) throw corrupt(path, parsed.error);
  return parsed.data.clusters;
}

function corrupt(path: string, cause: unknown): TrustedStoreError {
  return new TrustedStoreError(
    'corrupt',
    `${path} is damaged: delete it to start again (invitations from clusters approved before will then ask for approval once more)`,
    cause,
  );
}

async function writeAtomic(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await writeFileAtomic(path, text, { mode: 0o600 });
}
