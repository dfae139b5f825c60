// The node's models on disk: Hugging Face search, cards written from a hub repo or a local file, downloads in the
// background with progress, removal, and the storage report. The /models and /store routes (through
// their port, src/api/control/models-port.ts) and the `shoal models` commands are thin shells over
// this; each part lives in its own file of this folder.

import { ShoalError } from '../../common/errors.js';
import type { Logger } from '../../common/log.js';
import { ModelStore } from '../store/store.js';
import type { AddFileRequest, AddFileResult, AddRequest, AddResult, ClusterRemoveResult, DownloadListView, DownloadView, ModelListView, ModelView, PullView, RemoveResult, SearchView, StorageView } from '../views.js';
import { add, refreshCard, search } from './catalog.js';
import type { ModelsContext } from './context.js';
import { Downloads } from './downloads.js';
import { FactsCache } from './facts.js';
import { HubAccess } from './hub-access.js';
import { Listing } from './listing.js';
import { addFile } from './local-import.js';
import type { ModelPeers } from './peers.js';
import { remove, removeEverywhere } from './removal.js';
import { storageView } from './storage.js';
import type { RecordMoment } from '../../diagnostics/recorder.js';

export interface ModelsServiceOptions {
  dataDir: string;
  log: Logger;
  /** Hub base URL as configured (SHOAL_HF_ENDPOINT / HF_ENDPOINT); checked when first used. */
  endpoint?: string;
  /** Free disk downloads leave alone (default the store's, 10 GiB). */
  reserveBytes?: number;
  /** Model ids loaded on this node: never removed, never evicted. */
  inUse?: () => Iterable<string>;
  /** A store to use instead of opening one (tests). */
  store?: ModelStore;
  /** Members that hold models: pulls copy from them before the hub; removal reaches them. Without it, this node alone. */
  peers?: ModelPeers;
  /** The node's flight recorder: failed downloads are recorded there (src/diagnostics/recorder.ts). */
  moments?: RecordMoment;
}

export class ModelsService {
  private readonly ctx: ModelsContext;
  private readonly downloads: Downloads;
  private readonly listing: Listing;

  private constructor(
    opts: ModelsServiceOptions,
    readonly store: ModelStore,
  ) {
    this.ctx = {
      dataDir: opts.dataDir,
      log: opts.log,
      store,
      hub: new HubAccess(opts.endpoint),
      facts: new FactsCache(opts.log),
      peers: opts.peers,
      inUse: () => new Set(opts.inUse?.() ?? []),
      moments: opts.moments,
    };
    this.downloads = new Downloads(this.ctx, (modelId, stored) => refreshCard(this.ctx, modelId, stored));
    this.listing = new Listing(this.ctx, this.downloads);
  }

  static async open(opts: ModelsServiceOptions): Promise<ModelsService> {
    const store =
      opts.store ??
      (await ModelStore.open({
        dataDir: opts.dataDir,
        hub: new HubAccess(opts.endpoint).options(),
        ...(opts.reserveBytes === undefined ? {} : { reserveBytes: opts.reserveBytes }),
        inUse: () => opts.inUse?.() ?? [],
      }));
    if (store.damagedIndex) opts.log.warn({ aside: store.damagedIndex }, 'the model store index was damaged and was set aside; its files show as untracked in the storage report');
    return new ModelsService(opts, store);
  }

  /** The hub endpoint this node uses (throws INVALID_NAME when the configured one is not a URL). */
  endpoint(): string {
    return this.ctx.hub.endpoint();
  }

  search(query: string, limit?: number): Promise<SearchView> {
    return search(this.ctx, query, limit);
  }

  /** Resolves a repo (pinned to a commit), picks the GGUF and writes its card; downloads only with `pull`. */
  add(request: AddRequest): Promise<AddResult> {
    return add(this.ctx, { downloads: this.downloads, listing: this.listing }, request);
  }

  /** Makes a GGUF on this machine's disk a model of the store (hard link, else copy) and writes its card. */
  addFile(request: AddFileRequest): Promise<AddFileResult> {
    return addFile(this.ctx, this.listing, request);
  }

  /** Starts getting a model in the background (from the disk, a member that holds it, or the hub), or joins the one running. */
  pull(id: string): Promise<PullView> {
    return this.downloads.pull(id);
  }

  /** Starts (or joins) the download of `modelId` and resolves with the file once it is verified: what a serving node waits for. */
  waitForDownload(modelId: string, signal: AbortSignal): Promise<string> {
    return this.downloads.waitForFile(modelId, signal);
  }

  listDownloads(): DownloadListView {
    return this.downloads.list();
  }

  getDownload(id: string): DownloadView {
    return this.downloads.get(id);
  }

  /** Cancels a running download (its part files stay for a later resume); a finished one is returned as it is. */
  cancel(id: string): Promise<DownloadView> {
    return this.downloads.cancel(id);
  }

  list(): Promise<ModelListView> {
    return this.listing.list();
  }

  get(id: string): Promise<ModelView> {
    return this.listing.get(id);
  }

  /** Deletes a model's files (complete copy and part files) and its card; refuses one in use or downloading. */
  remove(id: string): Promise<RemoveResult> {
    return remove(this.ctx, this.downloads, id);
  }

  /** Removes a model on this node and on every other member; throws ClusterRemoveError when none removed anything. */
  removeEverywhere(id: string): Promise<ClusterRemoveResult> {
    return removeEverywhere(this.ctx, this.downloads, id);
  }

  storage(): Promise<StorageView> {
    return storageView(this.ctx, () => this.downloads.running());
  }

  /** Cancels running downloads (their part files stay for the next start) and waits for them to stop. */
  close(): Promise<void> {
    return this.downloads.close();
  }
}

/** `SHOAL_DISK_RESERVE_BYTES`: the free disk downloads leave alone; undefined means the store's default. */
export function reserveFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const raw = env.SHOAL_DISK_RESERVE_BYTES;
  if (raw === undefined || raw.trim() === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) throw new ShoalError('BAD_REQUEST', `SHOAL_DISK_RESERVE_BYTES must be a whole number of bytes >= 0, got '${raw}'`);
  return n;
}

/** The hub endpoint configured for this process (SHOAL_HF_ENDPOINT, then HF_ENDPOINT); undefined for the default. */
export function endpointFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return [env.SHOAL_HF_ENDPOINT, env.HF_ENDPOINT].find((v) => v !== undefined && v.trim() !== '');
}
