// Downloads in the background: started or joined by pull (and `add --pull`), with progress, cancel,
// a short history of finished ones, and the wait of a serving node for the file it needs.

import { randomUUID } from 'node:crypto';
import { errorMessage, ShoalError } from '../../common/errors.js';
import { storeCoordinates } from '../cards/card.js';
import { loadCatalog } from '../cards/catalog.js';
import type { FileProgress } from '../store/progress.js';
import type { DownloadPlan } from '../store/plan.js';
import type { StoredModel } from '../store/store.js';
import type { ByteSource } from '../store/transfer.js';
import type { DownloadListView, DownloadView, PullView, StorageView } from '../views.js';
import type { ModelsContext } from './context.js';
import { downloadView, type DownloadRecord } from './download-record.js';
import { findPeerCopy, obtain, type KnownCopy } from './download-sources.js';
import { withPeerFailures } from './failures.js';

/** Finished downloads kept in GET /models/downloads (the running ones are always listed). */
export const FINISHED_DOWNLOADS_KEPT = 20;
/** How long DELETE /models/downloads/:id waits for the transfer to stop before answering. */
const CANCEL_WAIT_MS = 10_000;
/** How long stopping the service waits for its running downloads to stop. */
const CLOSE_WAIT_MS = 2000;
/** How often a serving node checks on a download it waits for. */
const DOWNLOAD_POLL_MS = 500;
/** How long a serving node waits for a member to report the file of a model it has no card for (telemetry lags a placement). */
export const PEER_REPORT_WAIT_MS = 20_000;

/** The repo, revision and file a download must end with, and the projector of a vision model (a path in the repo), fetched with it. */
export interface WantedCopy {
  repo: string;
  revision: string;
  file: string;
  projector: string | null;
}

export class Downloads {
  private readonly records = new Map<string, DownloadRecord>();
  private closed = false;

  /** `afterDone`: what follows a verified download (the card rewritten with the file's facts). */
  constructor(
    private readonly ctx: ModelsContext,
    private readonly afterDone: (modelId: string, stored: StoredModel) => Promise<void>,
  ) {}

  /**
   * Starts getting a model in the background, or joins the one running: from a member that holds it
   * (src/models/peer-models.ts), else from the hub. Without a card here, a member's copy is still taken:
   * an instance placed on this node needs the file of a model only another node added.
   */
  async pull(id: string): Promise<PullView> {
    const running = this.activeFor(id);
    if (running) return { download: this.view(running), joined: true };
    const catalog = await loadCatalog(this.ctx.dataDir);
    const entry = catalog.entries.get(id);
    if (!entry) {
      const copy = await findPeerCopy(this.ctx, id);
      const again = this.activeFor(id);
      if (again) return { download: this.view(again), joined: true };
      // A hub download's id is always `<repo>:<tag>`; an id that is its own repo is a file a member imported.
      const imported = copy && copy.copy.repo === id ? `${id} is a file another member imported, and no member could give it: add the file there again with 'shoal models add <path>'` : null;
      // Without a card, what the member holds is what is wanted: its projector, if it has one, travels with its files.
      if (copy) return { download: this.view(this.launch(id, { repo: copy.copy.repo, revision: copy.copy.revision, file: copy.copy.primaryPath, projector: null }, null, copy, imported)), joined: false };
      const broken = catalog.errors.find((e) => e.message.includes(id));
      throw new ShoalError('NOT_FOUND', `no model card '${id}'${broken ? ` (a card file is broken: ${broken.message})` : ''}: add it first with 'shoal models add <owner/repo>[:<quant>]', or see 'shoal models ls'`);
    }
    const source = entry.card.source;
    if (source.kind === 'builtin') throw new ShoalError('BAD_REQUEST', `${id} is a built-in model: it is generated on first use, there is nothing to download`);
    if (source.kind === 'file') throw new ShoalError('BAD_REQUEST', `${id} is a local file (${source.path}): there is nothing to download`);
    const again = this.activeFor(id);
    if (again) return { download: this.view(again), joined: true };
    const want = storeCoordinates(entry.card) as WantedCopy;
    // An imported file has no hub behind it: only this disk or a member holds its bytes.
    const noHub = source.kind === 'huggingface' ? null : `${id} was imported from ${source.imported_from} and no member holds it any more: add the file again with 'shoal models add <path>'`;
    const download = this.view(this.launch(id, want, null, null, noHub));
    const draft = await this.pullDraft(entry.card.id, entry.card.runtime.speculative?.draft, catalog);
    return { download, joined: false, ...(draft !== null ? { draft } : {}) };
  }

  /**
   * Starts (or joins) the download of the speculative draft a card names, so the draft is on disk with
   * its target (it is a model of its own in the store, copied from members like any). Null when the
   * card names none or the draft has nothing to fetch (built-in, a file card); a draft that cannot be
   * had is logged, not thrown: the target serves without it (src/worker/draft.ts).
   */
  private async pullDraft(targetId: string, draftId: string | undefined, catalog: Awaited<ReturnType<typeof loadCatalog>>): Promise<DownloadView | null> {
    if (draftId === undefined) return null;
    const kind = catalog.entries.get(draftId)?.card.source.kind;
    if (kind === 'builtin' || kind === 'file') return null;
    try {
      return (await this.pull(draftId)).download;
    } catch (error) {
      this.ctx.log.warn({ modelId: targetId, draft: draftId, err: error }, `${targetId} is fetched without its draft ${draftId}: ${errorMessage(error)}`);
      return null;
    }
  }

  /** Starts (or joins) the download of `modelId` and resolves with the file once it is verified. */
  async waitForFile(modelId: string, signal: AbortSignal): Promise<string> {
    const { download } = await this.pullOnceReported(modelId, signal);
    for (;;) {
      const now = this.get(download.id);
      if (now.state === 'done' && now.path !== null) return now.path;
      if (now.state === 'failed' || now.state === 'cancelled') {
        throw new ShoalError('MODEL_FAILED', `downloading ${modelId} ${now.state}: ${now.error?.message ?? 'no reason given'}`);
      }
      if (signal.aborted) throw new ShoalError('CANCELLED', `stopped waiting for the download of ${modelId}`);
      await new Promise((resolve) => setTimeout(resolve, DOWNLOAD_POLL_MS));
    }
  }

  /**
   * `pull` for a serving node. An instance can be placed here the moment another member added the
   * model, before that member's artifacts report (telemetry) says it holds the file: without a card
   * here, no holder known yet is waited for (PEER_REPORT_WAIT_MS) instead of failing the placement.
   */
  private async pullOnceReported(modelId: string, signal: AbortSignal): Promise<PullView> {
    const deadline = performance.now() + PEER_REPORT_WAIT_MS;
    for (;;) {
      try {
        return await this.pull(modelId);
      } catch (error) {
        const unknown = error instanceof ShoalError && error.code === 'NOT_FOUND';
        if (!unknown || performance.now() >= deadline || signal.aborted) throw error;
      }
      await new Promise((resolve) => setTimeout(resolve, DOWNLOAD_POLL_MS));
    }
  }

  /** The download of `modelId` under way, if there is one. */
  activeFor(modelId: string): DownloadRecord | undefined {
    return [...this.records.values()].find((d) => d.modelId === modelId && d.finishedAtMs === null);
  }

  /**
   * Starts a download of `want` in the background: from `preset` (the hub's plan) or `known` (a member's
   * copy) when given. `noHub`: the model has no hub repo, and this is the failure when disk and members fail.
   */
  launch(modelId: string, want: WantedCopy, preset: DownloadPlan | null, known: KnownCopy | null, noHub: string | null = null): DownloadRecord {
    if (this.closed) throw new ShoalError('RUNNER_STOPPED', 'the node is stopping');
    const record: DownloadRecord = {
      id: `dl-${randomUUID().slice(0, 8)}`,
      modelId,
      repo: want.repo,
      revision: want.revision,
      state: 'resolving',
      progress: null,
      progressAtMs: Date.now(),
      startedAtMs: Date.now(),
      finishedAtMs: null,
      path: null,
      error: null,
      controller: new AbortController(),
      settled: Promise.resolve(),
      source: null,
      peerFailures: [],
    };
    this.records.set(record.id, record);
    const signal = record.controller.signal;
    const log = this.ctx.log.child({ modelId, download: record.id });
    record.settled = (async () => {
      try {
        const stored = await obtain(this.ctx, record, want, preset, known, log, (plan, source) => this.transfer(record, plan, source), noHub);
        record.path = stored.path;
        record.state = 'done';
        log.info({ path: stored.path, fetched: record.progress?.fetchedBytes ?? 0, source: record.source }, 'download done');
        await this.afterDone(modelId, stored).catch((error: unknown) => log.warn({ err: error }, 'could not rewrite the card with the GGUF facts'));
      } catch (error) {
        if (signal.aborted) {
          record.state = 'cancelled';
          record.error = new ShoalError('CANCELLED', `the download of ${modelId} was cancelled; its part files are kept and the next pull resumes them`);
          log.info('download cancelled');
        } else {
          record.state = 'failed';
          record.error = withPeerFailures(this.ctx.hub.friendly(error), record.peerFailures);
          log.warn({ err: error }, `download failed: ${record.error.message}`);
          // A full disk is its own moment: it is what the operator must fix, whatever was downloading.
          this.ctx.moments?.(record.error.code === 'DISK_FULL' ? 'disk-full' : 'download-failed', `download of ${modelId} failed: ${record.error.message}`, { model: modelId, download: record.id, code: record.error.code, source: record.source?.kind ?? null });
        }
      } finally {
        record.finishedAtMs = Date.now();
        this.trimFinished();
      }
    })();
    return record;
  }

  /** Starts the store's transfer of `plan` from `source` (the hub when undefined), with progress into `record`. */
  private transfer(record: DownloadRecord, plan: DownloadPlan, source: ByteSource | undefined): Promise<StoredModel> {
    record.state = 'downloading';
    record.progress = {
      modelId: record.modelId,
      repo: record.repo,
      revision: plan.revision,
      files: plan.files.map((f): FileProgress => ({ path: f.path, totalBytes: f.size, doneBytes: 0, state: 'queued' })),
      doneBytes: 0,
      totalBytes: plan.files.reduce((s, f) => s + f.size, 0),
      fetchedBytes: 0,
      bytesPerSecond: 0,
      etaSeconds: null,
      done: false,
    };
    record.progressAtMs = Date.now();
    return this.ctx.store.download(plan, {
      signal: record.controller.signal,
      onProgress: (p) => {
        record.progress = p;
        record.progressAtMs = Date.now();
      },
      ...(source === undefined ? {} : { source }),
    });
  }

  private trimFinished(): void {
    const finished = [...this.records.values()].filter((d) => d.finishedAtMs !== null).sort((a, b) => (a.finishedAtMs as number) - (b.finishedAtMs as number));
    for (const d of finished.slice(0, Math.max(0, finished.length - FINISHED_DOWNLOADS_KEPT))) this.records.delete(d.id);
  }

  view(d: DownloadRecord): DownloadView {
    return downloadView(d, Date.now());
  }

  list(): DownloadListView {
    return { downloads: [...this.records.values()].sort((a, b) => a.startedAtMs - b.startedAtMs).map((d) => this.view(d)) };
  }

  get(id: string): DownloadView {
    const d = this.records.get(id);
    if (!d) throw new ShoalError('NOT_FOUND', `no download '${id}': see GET /models/downloads`);
    return this.view(d);
  }

  /** Downloads under way with their bytes so far, for the storage report. */
  running(): StorageView['downloads'] {
    return [...this.records.values()]
      .filter((d) => d.finishedAtMs === null)
      .map((d) => ({ id: d.id, modelId: d.modelId, doneBytes: d.progress?.doneBytes ?? 0, totalBytes: d.progress?.totalBytes ?? 0 }));
  }

  /** Cancels a running download (its part files stay for a later resume); a finished one is returned as it is. */
  async cancel(id: string): Promise<DownloadView> {
    const d = this.records.get(id);
    if (!d) throw new ShoalError('NOT_FOUND', `no download '${id}': see GET /models/downloads`);
    if (d.finishedAtMs === null) {
      d.controller.abort(new ShoalError('CANCELLED', `the download of ${d.modelId} was cancelled`));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([d.settled, new Promise<void>((r) => (timer = setTimeout(r, CANCEL_WAIT_MS)))]);
      clearTimeout(timer);
    }
    return this.view(d);
  }

  /** Cancels running downloads (their part files stay for the next start) and waits for them to stop. */
  async close(): Promise<void> {
    this.closed = true;
    const running = [...this.records.values()].filter((d) => d.finishedAtMs === null);
    for (const d of running) d.controller.abort(new ShoalError('CANCELLED', 'the node is stopping'));
    await Promise.race([Promise.all(running.map((d) => d.settled)), new Promise((r) => setTimeout(r, CLOSE_WAIT_MS).unref())]);
  }
}
