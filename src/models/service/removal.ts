// Removing a model: on this node (its files, part files and card), or on every member that holds it.
// Each node decides for itself; one using or downloading the model refuses.

import { unlink } from 'node:fs/promises';
import { resolve, sep } from 'node:path';
import { ShoalError, toShoalError } from '../../common/errors.js';
import { cardsDir, loadCatalog } from '../cards/catalog.js';
import { ClusterRemoveError } from '../cluster-remove-error.js';
import { ModelsError } from '../hub/errors.js';
import type { ClusterRemoveResult, NodeRemoval, RemoveResult } from '../views.js';
import type { ModelsContext } from './context.js';
import type { Downloads } from './downloads.js';
import { failureView, remoteError } from './failures.js';

/** Deletes a model's files (complete copy and part files) and its card; refuses one in use or downloading. */
export async function remove(ctx: ModelsContext, downloads: Downloads, id: string): Promise<RemoveResult> {
  const catalog = await loadCatalog(ctx.dataDir);
  const entry = catalog.entries.get(id);
  if (entry?.origin === 'builtin') {
    throw new ShoalError('BAD_REQUEST', `${id} is a built-in model: it has no card file and its generated file is recreated on use; nothing to remove`);
  }
  const running = downloads.activeFor(id);
  if (running) {
    throw new ModelsError('MODEL_IN_USE', `${id} is downloading (${running.id}): cancel the download first (Ctrl-C in 'shoal models pull', or DELETE /models/downloads/${running.id}), then remove it`);
  }
  if (ctx.inUse().has(id)) {
    throw new ModelsError('MODEL_IN_USE', `${id} is loaded on this node and serving: unload it (place another model) before removing it`);
  }
  const before = await ctx.store.usage();
  const removedFiles = await ctx.store.remove(id);
  const after = removedFiles ? await ctx.store.usage() : before;
  let cardFile: string | null = null;
  if (entry) {
    const dir = resolve(cardsDir(ctx.dataDir));
    const file = resolve(entry.origin);
    if (file.startsWith(dir + sep)) {
      await unlink(file).catch((error: unknown) => {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      });
      cardFile = file;
    }
  }
  if (!removedFiles && cardFile === null) {
    if (entry) throw new ShoalError('BAD_REQUEST', `${id} comes from ${entry.origin}, outside ${cardsDir(ctx.dataDir)}, and has no files in the store: nothing to remove`);
    throw new ShoalError('NOT_FOUND', `no model '${id}' on this node: see 'shoal models ls'`);
  }
  // What the disk got back: a file hard-linked from another model frees nothing.
  const freedBytes = Math.max(0, before.modelBytes + before.partialBytes - (after.modelBytes + after.partialBytes));
  ctx.log.info({ modelId: id, freedBytes, cardFile }, 'model removed');
  return { id, freedBytes, removedFiles, cardFile };
}

/**
 * Removes a model on this node and on every other member (DELETE /models/:id). Each member decides
 * for itself as remove() does here: one that is using or downloading it refuses, the others remove
 * it. Alone (no peers, no other members) this is remove(), errors and all. Throws ClusterRemoveError
 * when no member removed anything; its code and message are this node's own error when it had one to give.
 */
export async function removeEverywhere(ctx: ModelsContext, downloads: Downloads, id: string): Promise<ClusterRemoveResult> {
  const peers = ctx.peers;
  const self = peers?.self() ?? { nodeId: '', name: 'this node' };
  const [local, others] = await Promise.all([
    remove(ctx, downloads, id).then(
      (result) => ({ result, error: null }),
      (error: unknown) => ({ result: null, error: toShoalError(error) }),
    ),
    peers ? peers.removeElsewhere(id) : Promise.resolve([] as NodeRemoval[]),
  ]);
  const mine: NodeRemoval = local.result
    ? { nodeId: self.nodeId, name: self.name, self: true, outcome: 'removed', freedBytes: local.result.freedBytes, removedFiles: local.result.removedFiles, cardFile: local.result.cardFile, error: null }
    : {
        nodeId: self.nodeId,
        name: self.name,
        self: true,
        outcome: local.error?.code === 'NOT_FOUND' ? 'absent' : 'refused',
        freedBytes: 0,
        removedFiles: false,
        cardFile: null,
        error: local.error ? failureView(local.error) : null,
      };
  const nodes = [mine, ...others];
  if (local.error && others.length === 0) throw local.error;
  if (!nodes.some((n) => n.outcome === 'removed')) {
    const refusal = nodes.find((n) => n.outcome === 'refused');
    let error: ShoalError;
    if (mine.outcome === 'refused' && local.error) error = local.error;
    else if (refusal?.error) error = remoteError(refusal);
    else error = new ShoalError('NOT_FOUND', `no model '${id}' on any of the ${nodes.length} members${nodes.some((n) => n.outcome === 'unreachable') ? ` that answered (${nodes.filter((n) => n.outcome === 'unreachable').map((n) => n.name).join(', ')} did not)` : ''}: see 'shoal models ls'`);
    throw new ClusterRemoveError(error, nodes);
  }
  const removed = nodes.filter((n) => n.outcome === 'removed');
  ctx.log.info({ modelId: id, removedOn: removed.map((n) => n.nodeId), refusedBy: nodes.filter((n) => n.outcome === 'refused').map((n) => n.nodeId) }, 'model removed across the cluster');
  return {
    id,
    freedBytes: local.result?.freedBytes ?? 0,
    removedFiles: local.result?.removedFiles ?? false,
    cardFile: local.result?.cardFile ?? null,
    nodes,
    totalFreedBytes: removed.reduce((s, n) => s + n.freedBytes, 0),
  };
}
