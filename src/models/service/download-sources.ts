// Where a download's bytes come from, in this order of preference: the complete copy already on disk,
// a member that holds the model (src/models/peer-models.ts), the hub.

import { errorMessage, ShoalError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { resolveRepo } from '../hub/client.js';
import { isModelsError, ModelsError } from '../hub/errors.js';
import { clip as clipText, MODEL_COPY_IDLE_TIMEOUT_MS, MODEL_COPY_MAX_HOLDERS_TRIED, sameCopy } from '../model-copy.js';
import { filePathFor } from '../store/layout.js';
import { planDownload, type DownloadPlan } from '../store/plan.js';
import type { StoredModel } from '../store/store.js';
import type { ByteSource } from '../store/transfer.js';
import type { ModelsContext } from './context.js';
import type { DownloadRecord } from './download-record.js';
import type { PeerCopy, PeerHolder } from './peers.js';
import { sizeOf } from './storage.js';

/** Most peer failures a download keeps (one per holder tried). */
const MAX_PEER_FAILURES = 4;
const PEER_FAILURE_MAX_CHARS = 500;

/** A member's copy of a model with the member that described it. */
export interface KnownCopy {
  holder: PeerHolder;
  copy: PeerCopy;
}

/** Starts the store's transfer of a plan from a source (the hub when undefined), with progress into the download's record. */
export type Transfer = (plan: DownloadPlan, source: ByteSource | undefined) => Promise<StoredModel>;

/** A download plan for a copy described by its files (this store's record, or a member's). */
function planOf(copy: Omit<PeerCopy, 'modelId' | 'bytes'>, modelId: string): DownloadPlan {
  return { modelId, repo: copy.repo, revision: copy.revision, group: copy.group, primaryPath: copy.primaryPath, files: copy.files.map((f) => ({ ...f })) };
}

async function isComplete(ctx: ModelsContext, stored: StoredModel): Promise<boolean> {
  for (const f of stored.files) {
    if ((await sizeOf(filePathFor(ctx.store.root, stored.repo, stored.revision, f.path))) !== f.size) return false;
  }
  return true;
}

/** A member's description of its copy of `modelId` (any revision), from the first holder that answers; null when none. */
export async function findPeerCopy(ctx: ModelsContext, modelId: string): Promise<KnownCopy | null> {
  const peers = ctx.peers;
  if (!peers) return null;
  for (const holder of peers.holders(modelId, null).slice(0, MODEL_COPY_MAX_HOLDERS_TRIED)) {
    try {
      const copy = await peers.describe(holder.nodeId, modelId, AbortSignal.timeout(MODEL_COPY_IDLE_TIMEOUT_MS));
      if (copy) return { holder, copy };
    } catch (error) {
      ctx.log.debug({ err: error, modelId, holder: holder.nodeId }, 'a member that reported the model could not describe it');
    }
  }
  return null;
}

/**
 * The model's files (a vision model's projector among them), in this order of preference: the complete
 * copy already on disk (no network at all), a member that holds it (each tried once, MODEL_COPY_MAX_HOLDERS_TRIED at most), the hub. A
 * member's bytes are verified against the hub's hashes when the plan came from the hub (`add --pull`),
 * else against the hashes the member verified its own copy with. Part files are shared, so whatever
 * one source delivered before failing, the next continues from.
 */
export async function obtain(
  ctx: ModelsContext,
  record: DownloadRecord,
  wanted: { file: string; projector: string | null },
  preset: DownloadPlan | null,
  known: KnownCopy | null,
  log: Logger,
  transfer: Transfer,
  noHub: string | null = null,
): Promise<StoredModel> {
  const signal = record.controller.signal;
  const want = { repo: record.repo, revision: record.revision, ...wanted };
  const onDisk = ctx.store.get(record.modelId);
  if (onDisk && sameCopy(onDisk, want) === null && (await isComplete(ctx, onDisk))) {
    record.source = { kind: 'disk' };
    return transfer(preset ?? planOf(onDisk, record.modelId), undefined);
  }

  const peers = ctx.peers;
  if (peers) {
    const candidates = known ? [known.holder] : peers.holders(record.modelId, record.revision);
    for (const holder of candidates.slice(0, MODEL_COPY_MAX_HOLDERS_TRIED)) {
      if (signal.aborted) throw new ShoalError('CANCELLED', `the download of ${record.modelId} was cancelled`);
      try {
        const copy = known?.holder === holder ? known.copy : await peers.describe(holder.nodeId, record.modelId, AbortSignal.any([signal, AbortSignal.timeout(MODEL_COPY_IDLE_TIMEOUT_MS)]));
        if (!copy) throw new ModelsError('PEER_COPY_FAILED', `it no longer holds ${record.modelId}`);
        const mismatch = sameCopy(copy, want);
        if (mismatch) throw new ModelsError('PEER_COPY_FAILED', mismatch);
        const plan = preset ?? planOf(copy, record.modelId);
        record.source = { kind: 'peer', nodeId: holder.nodeId, name: holder.name };
        log.info({ from: holder.nodeId, name: holder.name, repo: plan.repo, revision: plan.revision }, 'copying from a member that holds it');
        return await transfer(plan, peers.source(holder.nodeId, plan.repo, plan.revision));
      } catch (error) {
        if (signal.aborted) throw error;
        // Disk space is not the member's fault: the hub would need the same room.
        if (isModelsError(error, 'INSUFFICIENT_DISK')) throw error;
        const message = clipText(errorMessage(error), PEER_FAILURE_MAX_CHARS);
        if (record.peerFailures.length < MAX_PEER_FAILURES) record.peerFailures.push({ nodeId: holder.nodeId, name: holder.name, message });
        log.warn({ err: error, from: holder.nodeId }, `copying from ${holder.name} failed, trying ${candidates.indexOf(holder) + 1 < Math.min(candidates.length, MODEL_COPY_MAX_HOLDERS_TRIED) ? 'the next member' : 'the hub'}: ${message}`);
      }
    }
  }

  if (noHub !== null) throw new ModelsError('FILE_NOT_FOUND', noHub);
  record.state = 'resolving';
  record.source = { kind: 'hub', endpoint: ctx.hub.endpointOrConfigured() };
  let plan = preset;
  if (!plan) {
    const resolved = await resolveRepo(record.repo, { ...ctx.hub.options(), revision: record.revision, signal });
    plan = { ...planDownload(resolved, wanted.file, wanted.projector ?? undefined), modelId: record.modelId };
  }
  log.info({ repo: record.repo, revision: plan.revision, bytes: plan.files.reduce((s, f) => s + f.size, 0) }, 'download started');
  return transfer(plan, undefined);
}
