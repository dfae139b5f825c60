import assert from 'node:assert/strict';
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ADMIN_TOKEN_FILE, loadAdminToken } from './admin-token.js';

test('a token file that is kept is tightened to 0600 again; a new one is made 0600', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-token-'));
  try {
    const made = await loadAdminToken(dir);
    const path = join(dir, ADMIN_TOKEN_FILE);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    // Loosened by hand or restored from a backup: the same token, private again.
    await chmod(path, 0o644);
    assert.equal(await loadAdminToken(dir), made);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    // A file that holds no token is replaced.
    await writeFile(path, 'not a token\n', { mode: 0o666 });
    await chmod(path, 0o666);
    const replaced = await loadAdminToken(dir);
    assert.notEqual(replaced, made);
    assert.equal((await readFile(path, 'utf8')).trim(), replaced);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
