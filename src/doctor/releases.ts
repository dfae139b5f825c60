// Prebuilt engine releases: per platform, CPU architecture and compute, the archive of `llama-server`
// and `ggml-rpc-server` for the pinned llama.cpp commit, with the SHA-256 it must have. The provisioner
// (provision.ts) downloads one from the release host instead of building the bundled source when this
// machine's platform has an entry; every other machine builds, as `shoal doctor --fix` does.
//
// An entry is added only with a checksum taken from the archive itself: a guessed or copied checksum
// would make the verification prove nothing. The table is empty until such entries are recorded.

import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import { ENGINE_COMPUTES, type EngineCompute, type EngineName } from './engines.js';

/** Where release archives are fetched from; SHOAL_ENGINE_RELEASE_URL replaces it (a mirror, or a local server in tests). */
export const DEFAULT_ENGINE_RELEASE_URL = 'https://github.com/ggml-org/llama.cpp/releases/download';

export interface EngineRelease {
  /** The llama.cpp commit the archive was built from: only an entry for the pinned commit is used. */
  commit: string;
  platform: NodeJS.Platform;
  arch: NodeJS.Architecture;
  compute: EngineCompute;
  /** The archive's path under the release host's base URL (`b6000/llama-b6000-bin-ubuntu-x64.tar.gz`). */
  path: string;
  /** Only gzip-compressed tar archives: the `tar` package unpacks them without a native tool. */
  archive: 'tar.gz';
  /** Lowercase hex SHA-256 of the whole archive. */
  sha256: string;
  /** Each engine's path inside the archive (upstream names the rpc server `rpc-server`). */
  files: Record<EngineName, string>;
  /** Shared libraries inside the archive the engines load, installed beside them. */
  libs: string[];
}

export const ENGINE_RELEASES: readonly EngineRelease[] = [];

const ReleaseEntry = z.strictObject({
  commit: z.string().regex(/^[0-9a-f]{40}$/),
  platform: z.string().min(1),
  arch: z.string().min(1),
  compute: z.enum(ENGINE_COMPUTES),
  path: z.string().min(1),
  archive: z.literal('tar.gz'),
  sha256: z.string().regex(/^[0-9a-f]{64}$/i),
  files: z.strictObject({ 'llama-server': z.string().min(1), 'ggml-rpc-server': z.string().min(1) }),
  libs: z.array(z.string().min(1)).default([]),
});
const ReleaseTable = z.array(ReleaseEntry);

/**
 * The release table: the pinned one, or SHOAL_ENGINE_RELEASE_MANIFEST's (a JSON array of EngineRelease,
 * for a site that hosts its own builds beside SHOAL_ENGINE_RELEASE_URL). A table that does not parse is
 * an error rather than a silent build: its operator meant to use it.
 */
export async function engineReleases(env: NodeJS.ProcessEnv = process.env): Promise<readonly EngineRelease[]> {
  const path = env.SHOAL_ENGINE_RELEASE_MANIFEST;
  if (path === undefined || path === '') return ENGINE_RELEASES;
  let parsed;
  try {
    parsed = ReleaseTable.safeParse(JSON.parse(await readFile(path, 'utf8')));
  } catch (error) {
    throw new ShoalError('BAD_REQUEST', `SHOAL_ENGINE_RELEASE_MANIFEST: cannot read ${path}: ${(error as Error).message}`, { cause: error });
  }
  if (!parsed.success) {
    throw new ShoalError('BAD_REQUEST', `SHOAL_ENGINE_RELEASE_MANIFEST: ${path} is not a list of engine releases: ${parsed.error.issues[0]?.path.join('.')} ${parsed.error.issues[0]?.message}`);
  }
  return parsed.data.map((entry) => ({ ...entry, platform: entry.platform as NodeJS.Platform, arch: entry.arch as NodeJS.Architecture, sha256: entry.sha256.toLowerCase() }));
}

/** The release base URL: SHOAL_ENGINE_RELEASE_URL when set, else DEFAULT_ENGINE_RELEASE_URL. */
export function engineReleaseBaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.SHOAL_ENGINE_RELEASE_URL;
  return configured !== undefined && configured !== '' ? configured : DEFAULT_ENGINE_RELEASE_URL;
}

/** The entry for this commit, platform, architecture and compute, or null when none is recorded. */
export function findEngineRelease(
  releases: readonly EngineRelease[],
  want: { commit: string; compute: EngineCompute; platform?: NodeJS.Platform; arch?: NodeJS.Architecture },
): EngineRelease | null {
  const platform = want.platform ?? process.platform;
  const arch = want.arch ?? process.arch;
  return releases.find((r) => r.commit === want.commit && r.compute === want.compute && r.platform === platform && r.arch === arch) ?? null;
}

/** The archive's URL: `path` resolved under the base URL (a trailing slash on the base is optional). */
export function releaseUrl(baseUrl: string, release: Pick<EngineRelease, 'path'>): string {
  return new URL(release.path.replace(/^\/+/, ''), baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`).toString();
}
