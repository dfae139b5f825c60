// Calls to a test node's control and model routes, and file digests, shared by the integration tests.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import assert from 'node:assert/strict';
import type { DownloadView, ModelView } from '../../src/models/views.js';
import { eventually } from './cli.js';
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

/** The download `id` on `node` once it has finished (done, failed or cancelled), within 30 s. */
export async function downloaded(node: TestNode, id: string): Promise<DownloadView> {
  return eventually(`download ${id} on ${node.url}`, 30_000, async () => {
    const { body } = await api<{ download: DownloadView }>(node, 'GET', `/models/downloads/${id}`);
    return body.download.finishedAt !== null ? body.download : undefined;
  });
}

/** The model `id` as `GET /models` on `node` lists it; fails the test when it is not listed. */
export async function listedModel(node: TestNode, id: string): Promise<ModelView> {
  const { body } = await api<{ models: ModelView[] }>(node, 'GET', '/models');
  const model = body.models.find((m) => m.id === id);
  assert.ok(model, `${id} is not listed on ${node.url}`);
  return model;
}
