import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../../common/durable-fs.js';

/**
 * The node's admin token, kept in its data dir (mode 0600) across restarts, so a dashboard that was
 * given it once keeps working; `shoal token --rotate` replaces it (the running node at once, through
 * `POST /token/rotate`, or the file when no node runs).
 */
export const ADMIN_TOKEN_FILE = 'admin.token';
/** Random bytes in a token (hex in the file and on the wire). */
export const ADMIN_TOKEN_BYTES = 32;

const tokenPath = (dataDir: string): string => join(dataDir, ADMIN_TOKEN_FILE);
const VALID = /^[0-9a-f]{64}$/;

/** The token in `dataDir`, made (and saved) when there is none or the file does not hold one. */
export async function loadAdminToken(dataDir: string): Promise<string> {
  const text = await readFile(tokenPath(dataDir), 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null;
    throw error;
  });
  const token = text?.trim() ?? '';
  if (!VALID.test(token)) return rotateAdminTokenFile(dataDir);
  // A file copied in, restored from a backup or loosened by hand: the token is the node's admin access.
  await chmod(tokenPath(dataDir), 0o600);
  return token;
}

/** Writes a new token to `dataDir` and returns it; the old one stops working once the node reads it (at start, or on rotation). */
export async function rotateAdminTokenFile(dataDir: string): Promise<string> {
  const token = randomBytes(ADMIN_TOKEN_BYTES).toString('hex');
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  await writeFileAtomic(tokenPath(dataDir), `${token}\n`, { mode: 0o600 });
  return token;
}
