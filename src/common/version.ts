import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ShoalError } from './errors.js';

let cached: string | null = null;

/** Shoal's version from its package.json, found by walking up from this module (src or dist). */
export function shoalVersion(): string {
  if (cached !== null) return cached;
  for (let dir = dirname(fileURLToPath(import.meta.url)); ; dir = dirname(dir)) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate)) {
      const pkg = JSON.parse(readFileSync(candidate, 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'shoal' && typeof pkg.version === 'string') {
        cached = pkg.version;
        return cached;
      }
    }
    if (dirname(dir) === dir) throw new ShoalError('INTERNAL', "Shoal's package.json was not found above its code: reinstall Shoal");
  }
}
