// The models of this node as GET /models shows them: every card (built-in, added, the user's) and
// the store's copies without one, each with what its model has on disk, its download and its facts.

import { open } from 'node:fs/promises';
import { ShoalError } from '../../common/errors.js';
import { storeCoordinates } from '../cards/card.js';
import { loadCatalog, type CatalogEntry } from '../cards/catalog.js';
import { sameCopy } from '../model-copy.js';
import { filePathFor, partPathFor } from '../store/layout.js';
import type { StoredModel } from '../store/store.js';
import type { DiskState, ModelListView, ModelView } from '../views.js';
import { GENERATED_CARD_MARKER } from './card-text.js';
import type { ModelsContext } from './context.js';
import type { Downloads } from './downloads.js';
import { sizeOf } from './storage.js';

/** Whether the card file was written by `shoal models add` (starts with its marker). */
async function isGenerated(file: string): Promise<boolean> {
  try {
    const handle = await open(file, 'r');
    try {
      const buf = Buffer.alloc(GENERATED_CARD_MARKER.length);
      await handle.read(buf, 0, buf.length, 0);
      return buf.toString('utf8') === GENERATED_CARD_MARKER;
    } finally {
      await handle.close();
    }
  } catch {
    return false;
  }
}

export class Listing {
  constructor(
    private readonly ctx: ModelsContext,
    private readonly downloads: Downloads,
  ) {}

  async list(): Promise<ModelListView> {
    const catalog = await loadCatalog(this.ctx.dataDir);
    const inUse = this.ctx.inUse();
    const models: ModelView[] = [];
    for (const entry of catalog.entries.values()) models.push(await this.modelView(entry, inUse));
    const carded = new Set(catalog.entries.keys());
    for (const stored of this.ctx.store.list()) if (!carded.has(stored.modelId)) models.push(await this.storeOnlyView(stored, inUse));
    return { models, errors: catalog.errors.map((e) => ({ file: e.file, message: e.message })) };
  }

  async get(id: string): Promise<ModelView> {
    const catalog = await loadCatalog(this.ctx.dataDir);
    const entry = catalog.entries.get(id);
    if (entry) return this.modelView(entry, this.ctx.inUse());
    const stored = this.ctx.store.get(id);
    if (stored) return this.storeOnlyView(stored, this.ctx.inUse());
    throw new ShoalError('NOT_FOUND', `no model '${id}' on this node: see 'shoal models ls'`);
  }

  private async storeOnlyView(stored: StoredModel, inUse: Set<string>): Promise<ModelView> {
    const download = this.downloads.activeFor(stored.modelId);
    return {
      id: stored.modelId,
      name: stored.modelId,
      origin: 'store',
      cardFile: null,
      source: { kind: 'huggingface', repo: stored.repo, file: stored.primaryPath, revision: stored.revision },
      tasks: [],
      capabilities: null,
      state: download ? 'downloading' : 'on-disk',
      bytes: stored.bytes,
      partialBytes: 0,
      path: stored.path,
      diskRevision: stored.revision,
      inUse: inUse.has(stored.modelId),
      lastUsedAt: new Date(stored.lastUsedMs).toISOString(),
      download: download ? this.downloads.view(download) : null,
      facts: (await this.ctx.facts.of(stored.path))?.facts ?? null,
    };
  }

  /** A card's model as this node has it. */
  async modelView(entry: CatalogEntry, inUse: Set<string>): Promise<ModelView> {
    const { card } = entry;
    const origin: ModelView['origin'] = entry.origin === 'builtin' ? 'builtin' : (await isGenerated(entry.origin)) ? 'added' : 'user';
    const download = this.downloads.activeFor(card.id) ?? null;
    const base = {
      id: card.id,
      name: card.name,
      origin,
      cardFile: entry.origin === 'builtin' ? null : entry.origin,
      source: card.source,
      tasks: card.tasks,
      capabilities: card.capabilities,
      inUse: inUse.has(card.id),
      download: download ? this.downloads.view(download) : null,
    };
    const source = card.source;
    if (source.kind === 'builtin') {
      return { ...base, state: 'builtin', bytes: 0, partialBytes: 0, path: null, diskRevision: null, lastUsedAt: null, facts: null };
    }
    if (source.kind === 'file') {
      const size = await sizeOf(source.path);
      return {
        ...base,
        state: size === null ? 'file-missing' : 'file',
        bytes: size ?? 0,
        partialBytes: 0,
        path: size === null ? null : source.path,
        diskRevision: null,
        lastUsedAt: null,
        facts: size === null ? null : ((await this.ctx.facts.of(source.path))?.facts ?? null),
      };
    }
    const where = storeCoordinates(card) as NonNullable<ReturnType<typeof storeCoordinates>>;
    const stored = this.ctx.store.get(card.id);
    let partialBytes: number;
    try {
      partialBytes = (await sizeOf(partPathFor(filePathFor(this.ctx.store.root, where.repo, where.revision, where.file)))) ?? 0;
    } catch {
      partialBytes = 0; // a card path the store would refuse has no part file
    }
    let state: DiskState;
    if (download) state = 'downloading';
    // A vision model's copy without its projector is not what the card serves: a pull completes it.
    else if (stored && sameCopy(stored, where) === null && (await sizeOf(stored.path)) !== null) state = 'on-disk';
    else if (stored) state = 'stale';
    else state = partialBytes > 0 ? 'partial' : 'not-downloaded';
    return {
      ...base,
      state,
      bytes: stored?.bytes ?? 0,
      partialBytes,
      path: stored?.path ?? null,
      diskRevision: stored?.revision ?? null,
      lastUsedAt: stored ? new Date(stored.lastUsedMs).toISOString() : null,
      facts: stored ? ((await this.ctx.facts.of(stored.path))?.facts ?? null) : null,
    };
  }
}
