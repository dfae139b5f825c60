/**
 * Splits an installed node_modules by what package-lock.json says each top-level package is for.
 * Pure: the sizes are measured by the caller (bench/install-size.ts).
 */

export type InstallCategory = 'production' | 'optional' | 'dev';

export interface LockEntry {
  dev?: boolean;
  optional?: boolean;
  devOptional?: boolean;
}

export interface PackageSize {
  name: string;
  bytes: number;
  category: InstallCategory;
}

export interface InstallBreakdown {
  /** Bytes of each category's top-level package directories (their nested node_modules included). */
  bytesByCategory: Record<InstallCategory, number>;
  largest: PackageSize[];
}

/** `node_modules/x` and `node_modules/@scope/x`: packages installed at the top level, not nested in another. */
export function topLevelName(lockPath: string): string | null {
  const match = /^node_modules\/((?:@[^/]+\/)?[^/@][^/]*)$/.exec(lockPath);
  return match ? match[1]! : null;
}

/**
 * Optional packages are the ones npm skips on platforms they do not fit (node-llama-cpp's prebuilt
 * engines for each OS and GPU); `npm ci --omit=optional` leaves them out, `--omit=dev` the dev ones.
 */
export function categoryOf(entry: LockEntry): InstallCategory {
  if (entry.dev || entry.devOptional) return 'dev';
  if (entry.optional) return 'optional';
  return 'production';
}

export function installBreakdown(lockPackages: Record<string, LockEntry>, sizes: ReadonlyMap<string, number>, largestCount = 10): InstallBreakdown {
  const bytesByCategory: Record<InstallCategory, number> = { production: 0, optional: 0, dev: 0 };
  const all: PackageSize[] = [];
  for (const [path, entry] of Object.entries(lockPackages)) {
    const name = topLevelName(path);
    const bytes = name === null ? undefined : sizes.get(name);
    if (name === null || bytes === undefined) continue;
    const category = categoryOf(entry);
    bytesByCategory[category] += bytes;
    all.push({ name, bytes, category });
  }
  all.sort((a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : 1));
  return { bytesByCategory, largest: all.slice(0, largestCount) };
}
