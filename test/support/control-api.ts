// Calls to a test node's control and model routes, and file digests, shared by the integration tests.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { TestNode } from './node-process.js';

export const sha256 = async (path: string): Promise<string> => createHash('sha256').update(await readFile(path)).digest('hex');

/** One control-route call from loopback; the body parsed (null when empty) with the status. */
export async function api<T = Record<string, unknown>>(node: Pick<TestNode, 'url'>, method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await fetch(`${node.url}${path}`, {
    method,
    // The header a body-less state-changing control call needs from loopback (docs/API.md).
    headers: { 'x-shoal-client': 'test', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: (text === '' ? null : JSON.parse(text)) as T };
}
