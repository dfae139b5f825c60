// The hub side of the catalog: search, and `add`, which resolves a repo to a pinned commit, picks the
// GGUF and writes its card; after a download the card is rewritten with the header facts of its file.

import { mkdir, readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { modelInfo } from '@huggingface/hub';
import { ShoalError } from '../../common/errors.js';
import { writeFileAtomic } from '../../common/durable-fs.js';
import { ModelCard, type ModelCardInput } from '../cards/card.js';
import { cardsDir, loadCatalog, type CatalogEntry } from '../cards/catalog.js';
import { parseCard } from '../cards/parse.js';
import { parseHubReference, resolveRepo, search as hubSearch, type ResolvedRepo } from '../hub/client.js';
import { hubError, resolveHubOptions, type HubOptions } from '../hub/endpoint.js';
import { ModelsError } from '../hub/errors.js';
import { chooseProjector, parseWhisperName, type GgufGroup } from '../hub/gguf-files.js';
import { planDownload } from '../store/plan.js';
import type { StoredModel } from '../store/store.js';
import type { AddRequest, AddResult, SearchModelView, SearchView } from '../views.js';
import { addedCardComments, cardFileName, FACTS_LINE, factsLine, GENERATED_CARD_MARKER, HUB_BACKENDS, HUB_VISION_BACKENDS, renderCard, WHISPER_BACKENDS, templateCapabilities, type RepoMeta } from './card-text.js';
import type { ModelsContext } from './context.js';
import type { Downloads } from './downloads.js';
import type { Listing } from './listing.js';

const EMBEDDING_PIPELINES = new Set(['feature-extraction', 'sentence-similarity']);

function groupView(g: GgufGroup, defaultName: string | null): SearchModelView {
  return {
    tag: g.tag,
    quant: g.quant,
    name: g.name,
    file: g.primaryPath,
    files: g.files.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 })),
    bytes: g.totalBytes,
    complete: g.complete,
    projector: g.projector,
    isDefault: g.name === defaultName,
  };
}

export async function search(ctx: ModelsContext, query: string, limit?: number): Promise<SearchView> {
  const results = await ctx.hub.withHub((hub) => hubSearch(query, { ...hub, ...(limit === undefined ? {} : { limit }) }));
  return {
    endpoint: ctx.hub.endpoint(),
    query,
    results: results.map((r) => {
      const def = r.groups.find((g) => g.name === r.defaultGroup) ?? null;
      return {
        repo: r.repo,
        revision: r.revision,
        downloads: r.downloads,
        likes: r.likes,
        updatedAt: r.updatedAt,
        defaultQuant: def?.tag ?? null,
        defaultBytes: def?.totalBytes ?? null,
        matchedFile: r.matchedFile,
        models: r.groups.map((g) => groupView(g, r.defaultGroup)),
      };
    }),
  };
}

/** Resolves a repo (pinned to a commit), picks the GGUF and writes its card; downloads only with `pull`. */
export async function add(ctx: ModelsContext, parts: { downloads: Downloads; listing: Listing }, request: AddRequest): Promise<AddResult> {
  const ref = parseHubReference(request.repo);
  if (!ref) throw new ModelsError('INVALID_NAME', `"${request.repo}" is not a Hugging Face repo: write owner/name (find one with shoal models search <name>)`);
  if (request.file !== undefined && request.quant !== undefined) throw new ShoalError('BAD_REQUEST', 'name a file or a quant, not both');
  const selector = request.file ?? request.quant ?? ref.file ?? ref.quant;
  const requestedRevision = request.revision ?? ref.revision;
  const endpoint = ctx.hub.endpoint();
  const { resolved, meta } = await ctx.hub.withHub(async (hub) => {
    const resolvedRepo = await resolveRepo(ref.repo, { ...hub, ...(requestedRevision === undefined ? {} : { revision: requestedRevision }) });
    return { resolved: resolvedRepo, meta: await repoMeta(ctx, hub, resolvedRepo) };
  });
  const chosen = planDownload(resolved, selector);
  // A whisper model transcribes on the whisper engine: no projector, one transcription at a time.
  const speech = parseWhisperName(chosen.primaryPath) !== null;
  if (speech && typeof request.projector === 'string') throw new ShoalError('BAD_REQUEST', `${chosen.primaryPath} is a whisper.cpp speech-to-text model, which takes no projector: add it without --projector`);
  const projector = speech ? null : pickProjector(resolved, request.projector);
  const plan = projector === null ? chosen : planDownload(resolved, selector, projector.primaryPath);
  const id = plan.modelId;

  const dir = cardsDir(ctx.dataDir);
  const cardFile = join(dir, cardFileName(id));
  const catalog = await loadCatalog(ctx.dataDir);
  const existing = catalog.entries.get(id);
  if (existing && existing.origin !== 'builtin' && resolve(existing.origin) !== resolve(cardFile)) {
    throw new ShoalError('BAD_REQUEST', `a card for ${id} already exists at ${existing.origin}: edit that card, or remove it (shoal models rm ${id}) and add again`);
  }
  const previousText = await readFile(cardFile, 'utf8').catch(() => null);
  if (previousText !== null && !previousText.startsWith(GENERATED_CARD_MARKER)) {
    throw new ShoalError('BAD_REQUEST', `${cardFile} exists and was not written by 'shoal models add': move it away or edit it by hand`);
  }
  if (previousText !== null) {
    let previousId: string | null = null;
    try {
      previousId = parseCard(previousText, cardFile).id;
    } catch {
      // A damaged card of ours is replaced.
    }
    if (previousId !== null && previousId !== id) throw new ShoalError('BAD_REQUEST', `${cardFile} already holds the card of ${previousId}: remove that model first (shoal models rm ${previousId})`);
  }

  // The header facts, when this exact copy is already on disk.
  const stored = ctx.store.get(id);
  const onDisk = stored && stored.revision === plan.revision ? await ctx.facts.of(stored.path) : null;
  const fromTemplate = templateCapabilities(onDisk?.template ?? null);
  const repoName = ref.repo.slice(ref.repo.indexOf('/') + 1);
  const card = ModelCard.parse({
    id,
    name: `${repoName} ${plan.modelId.slice(plan.modelId.lastIndexOf(':') + 1)}`.slice(0, 200),
    source: { kind: 'huggingface', repo: plan.repo, file: plan.primaryPath, revision: plan.revision },
    tasks: speech ? ['transcription'] : meta.embeddings ? ['embeddings'] : ['chat', 'completion'],
    capabilities: { tools: fromTemplate.tools, reasoning: fromTemplate.reasoning, vision: projector !== null },
    compatible_backends: speech ? WHISPER_BACKENDS : projector !== null ? HUB_VISION_BACKENDS : HUB_BACKENDS,
    ...(projector !== null ? { projector: { kind: 'huggingface', file: projector.primaryPath } } : {}),
    backend_preference: [],
    runtime: speech ? { min_nodes: 1, parallel: 1 } : { min_nodes: 1 },
  } satisfies ModelCardInput);
  const bytes = plan.files.reduce((s, f) => s + f.size, 0);
  const text = renderCard(card, addedCardComments({ endpoint, plan, requestedRevision, selector, bytes, meta, facts: onDisk?.facts ?? null, projector: projector?.primaryPath ?? null }));
  parseCard(text, cardFile); // the catalog must accept what is written
  await mkdir(dir, { recursive: true });
  await writeFileAtomic(cardFile, text);
  ctx.log.info({ modelId: id, cardFile, revision: plan.revision }, 'model card written');

  const download = request.pull ? parts.downloads.launch(id, { repo: plan.repo, revision: plan.revision, file: plan.primaryPath, projector: projector?.primaryPath ?? null }, { ...plan, modelId: id }, null) : null;
  const entry: CatalogEntry = { card, origin: cardFile, overridesBuiltin: false };
  return {
    card,
    cardFile,
    created: previousText === null,
    hub: {
      endpoint,
      repo: plan.repo,
      requestedRevision: resolved.requestedRevision,
      revision: plan.revision,
      file: plan.primaryPath,
      files: plan.files.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 })),
      bytes,
      chosen: selector ? 'named' : 'default',
      projector: projector ? { path: projector.primaryPath, size: projector.totalBytes } : null,
    },
    model: await parts.listing.modelView(entry, ctx.inUse()),
    download: download ? parts.downloads.view(download) : null,
  };
}

/**
 * The projector a card of `resolved` is added with: the one asked for (a typed error when the repo
 * has no such projector), none when `asked` is false, else the repo's default (none in a text repo).
 */
function pickProjector(resolved: ResolvedRepo, asked: string | false | undefined): GgufGroup | null {
  if (asked === false) return null;
  const projector = chooseProjector(resolved.groups, asked);
  if (asked !== undefined && projector === null) {
    const there = resolved.groups.filter((g) => g.projector).map((g) => g.primaryPath);
    throw new ModelsError('NO_GGUF', `${resolved.repo}@${resolved.revision.slice(0, 12)} has no projector "${asked}": ${there.length > 0 ? `it has ${there.join(', ')}` : 'it has none, so it serves text only; add it without --projector'}`);
  }
  return projector;
}

/** Repo metadata for a card: embedding model or not, license, base model; best effort. */
async function repoMeta(ctx: ModelsContext, hub: HubOptions, resolved: ResolvedRepo): Promise<RepoMeta> {
  const projector = resolved.groups.some((g) => g.projector);
  const r = resolveHubOptions(hub);
  try {
    const info = await modelInfo({ name: resolved.repo, revision: resolved.revision, additionalFields: ['tags', 'cardData'], hubUrl: r.endpoint, fetch: r.fetch, accessToken: r.accessToken });
    const pipeline = typeof info.task === 'string' ? info.task : null;
    const tags = Array.isArray(info.tags) ? (info.tags as unknown[]).filter((t): t is string => typeof t === 'string') : [];
    const cardData = (info.cardData ?? {}) as Record<string, unknown>;
    const license = typeof cardData.license === 'string' ? cardData.license : (tags.find((t) => t.startsWith('license:'))?.slice(8) ?? null);
    const base = cardData.base_model;
    const baseModel = typeof base === 'string' ? base : Array.isArray(base) && typeof base[0] === 'string' ? base[0] : null;
    return { embeddings: pipeline !== null && EMBEDDING_PIPELINES.has(pipeline), pipeline, license, baseModel, projector };
  } catch (error) {
    if (r.signal?.aborted) throw hubError(error, r, `repo ${resolved.repo}`);
    ctx.log.debug({ err: error, repo: resolved.repo }, 'repo metadata not available; the card uses defaults');
    return { embeddings: false, pipeline: null, license: null, baseModel: null, projector };
  }
}

/** After a download: rewrites a card of `shoal models add` with the header facts of its file. */
export async function refreshCard(ctx: ModelsContext, id: string, stored: StoredModel): Promise<void> {
  const catalog = await loadCatalog(ctx.dataDir);
  const entry = catalog.entries.get(id);
  if (!entry || entry.origin === 'builtin') return;
  const text = await readFile(entry.origin, 'utf8').catch(() => null);
  if (text === null || !text.startsWith(GENERATED_CARD_MARKER)) return;
  const source = entry.card.source;
  if (source.kind !== 'huggingface' || source.revision !== stored.revision) return;
  const read = await ctx.facts.of(stored.path);
  if (!read) return;
  const lines = text.split('\n');
  const comments = lines.slice(0, lines.findIndex((l) => !l.startsWith('#')));
  const hadFacts = comments.some((l) => l.startsWith(FACTS_LINE) && !l.includes('not read yet'));
  let card = entry.card;
  if (!hadFacts) {
    const fromTemplate = templateCapabilities(read.template);
    card = ModelCard.parse({ ...card, capabilities: { ...card.capabilities, tools: card.capabilities.tools || fromTemplate.tools, reasoning: card.capabilities.reasoning || fromTemplate.reasoning } });
  }
  const newComments = comments.map((l) => (l.startsWith(FACTS_LINE) ? factsLine(read.facts) : l));
  if (!newComments.some((l) => l.startsWith(FACTS_LINE))) newComments.push(factsLine(read.facts));
  const next = renderCard(card, newComments);
  parseCard(next, entry.origin);
  if (next !== text) await writeFileAtomic(entry.origin, next);
}
