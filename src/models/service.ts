// The node's models on disk: Hugging Face search, cards written from a hub repo, downloads in the
// background with progress, removal, and the storage report. The /models and /store routes and the
// `shoal models` commands are thin shells over this.

import { writeFileAtomic } from '../common/atomic-file.js';
import { randomUUID } from 'node:crypto';
import { mkdir, open, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join, resolve, sep } from 'node:path';
import { gguf } from '@huggingface/gguf';
import { modelInfo } from '@huggingface/hub';
import { stringify as stringifyToml } from 'smol-toml';
import { ShoalError, toShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { modelsDir } from '../common/paths.js';
import { CARD_COMPUTES, ModelCard, type CardCapabilities, type CardSource, type CardTask, type ModelCardInput } from './cards/card.js';
import { cardsDir, loadCatalog, type CatalogEntry } from './cards/catalog.js';
import { factsFromHeader, type GgufFacts } from './cards/gguf-facts.js';
import { parseCard } from './cards/parse.js';
import { parseHubReference, resolveRepo, search as hubSearch, type ResolvedRepo } from './hub/client.js';
import { hubError, resolveHubOptions, type HubOptions } from './hub/endpoint.js';
import { isModelsError, ModelsError, MODELS_ERROR_CODE, type ModelsErrorReason } from './hub/errors.js';
import { knownErrorCode } from '../router/errors.js';
import type { GgufGroup } from './hub/gguf-files.js';
import { filePathFor, partPathFor } from './store/layout.js';
import { RATE_WINDOW_MS, type DownloadProgress, type FileProgress } from './store/progress.js';
import { ModelStore, planDownload, type DownloadPlan, type StoredModel, type StoreUsage } from './store/store.js';
import type { ByteSource } from './store/transfer.js';
import { clip as clipText, MODEL_COPY_IDLE_TIMEOUT_MS, MODEL_COPY_MAX_HOLDERS_TRIED, sameCopy } from './model-copy.js';

/** Hub requests of one search or add must finish within this, or the hub counts as unreachable. */
export const HUB_REQUEST_TIMEOUT_MS = 20_000;
/** Finished downloads kept in GET /models/downloads (the running ones are always listed). */
export const FINISHED_DOWNLOADS_KEPT = 20;
/** How long DELETE /models/downloads/:id waits for the transfer to stop before answering. */
const CANCEL_WAIT_MS = 10_000;
/** First line of every card `shoal models add` writes; it only ever overwrites cards that start with it. */
export const GENERATED_CARD_MARKER = '# Written by `shoal models add`';
const FACTS_LINE = '# GGUF header:';

/** Every engine and compute a hub GGUF can run on; rpc too, so a model too big for one node may be split. */
const HUB_BACKENDS = (['llama_cpp', 'llama_server', 'rpc'] as const).flatMap((engine) => CARD_COMPUTES.map((compute) => `${engine}-${compute}`));
const EMBEDDING_PIPELINES = new Set(['feature-extraction', 'sentence-similarity']);

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
}

// ---- peers -------------------------------------------------------------------------------------

/** A member that reports a complete copy of a model. */
export interface PeerHolder {
  nodeId: string;
  /** Its name (or nickname), for messages. */
  name: string;
  revision: string;
}

/** A member's copy of a model as it describes it: the files with the hashes it verified them against. */
export interface PeerCopy {
  modelId: string;
  repo: string;
  revision: string;
  group: string;
  primaryPath: string;
  files: { path: string; size: number; sha256: string | null; gitOid: string | null }[];
  bytes: number;
}

/** What one member did with a cluster-wide removal. */
export interface NodeRemoval {
  nodeId: string;
  name: string;
  self: boolean;
  /** `absent`: nothing of it there; `refused`: it has it and would not (in use, downloading); `unreachable`: no answer. */
  outcome: 'removed' | 'absent' | 'refused' | 'unreachable';
  freedBytes: number;
  removedFiles: boolean;
  cardFile: string | null;
  error: { code: string; reason: string | null; message: string } | null;
}

/** The cluster as the models service sees it (implemented by src/node/peer-models.ts). */
export interface ModelPeers {
  /** This node, once the cluster planes run; null before. */
  self(): { nodeId: string; name: string } | null;
  /** Connected members that report a complete copy of `modelId` (at `revision`, when given), best first. */
  holders(modelId: string, revision: string | null): PeerHolder[];
  /** The member's copy of `modelId`, or null when it has none (any other failure throws). */
  describe(nodeId: string, modelId: string, signal: AbortSignal): Promise<PeerCopy | null>;
  /** Reads files of `repo@revision` from the member (each verified by the store against the plan's hashes). */
  source(nodeId: string, repo: string, revision: string): ByteSource;
  /** Removes `modelId` on every other member; what each did. */
  removeElsewhere(modelId: string): Promise<NodeRemoval[]>;
}

// ---- views -------------------------------------------------------------------------------------

export interface SearchModelView {
  /** What to write after the repo: `shoal models add <repo>:<tag>`. */
  tag: string;
  quant: string | null;
  /** The GGUF group's name (the path without shard suffix). */
  name: string;
  /** The file that loads (first shard). */
  file: string;
  files: { path: string; size: number; sha256: string | null }[];
  bytes: number;
  complete: boolean;
  projector: boolean;
  isDefault: boolean;
}

export interface SearchResultView {
  repo: string;
  revision: string | null;
  downloads: number;
  likes: number;
  updatedAt: string;
  /** Tag of the quantization `add` picks when none is named; null when the repo has no usable GGUF. */
  defaultQuant: string | null;
  defaultBytes: number | null;
  matchedFile: string | null;
  models: SearchModelView[];
}

export interface SearchView {
  endpoint: string;
  query: string;
  results: SearchResultView[];
}

export type DownloadState = 'resolving' | 'downloading' | 'done' | 'failed' | 'cancelled';

/** Where a download's bytes come from: the copy already on disk, a member that holds it, or the hub. */
export type DownloadSource = { kind: 'disk' } | { kind: 'peer'; nodeId: string; name: string } | { kind: 'hub'; endpoint: string };

/** A download: the store's progress snapshot plus its id, state and outcome. */
export interface DownloadView extends DownloadProgress {
  id: string;
  state: DownloadState;
  startedAt: string;
  finishedAt: string | null;
  /** The file to load, once done. */
  path: string | null;
  error: { code: string; reason: string | null; message: string } | null;
  /** Where the bytes come from now (null while resolving). */
  source: DownloadSource | null;
  /** Members a copy was tried from and why each did not give it (then the next one, then the hub). */
  peerFailures: { nodeId: string; name: string; message: string }[];
}

/** What a model card's model has on this node's disk. */
export type DiskState = 'builtin' | 'on-disk' | 'stale' | 'partial' | 'downloading' | 'not-downloaded' | 'file' | 'file-missing';

export interface FactsView {
  architecture: string;
  trainedContext: number;
  blockCount: number;
  embeddingLength: number;
  headCount: number;
  headCountKv: number;
  vocabSize: number | null;
  fileBytes: number;
  chatTemplate: boolean;
}

export interface ModelView {
  id: string;
  name: string;
  /** 'builtin', 'added' (written by `shoal models add`), 'user' (another card file), 'store' (files without a card). */
  origin: 'builtin' | 'added' | 'user' | 'store';
  cardFile: string | null;
  source: CardSource | null;
  tasks: CardTask[];
  capabilities: CardCapabilities | null;
  state: DiskState;
  /** Bytes of the complete copy on disk (0 when none). */
  bytes: number;
  /** Bytes of an unfinished download's part file (primary file only). */
  partialBytes: number;
  /** The file to load, when it is on disk. */
  path: string | null;
  /** The revision on disk, when a copy is (it differs from the card's when `stale`). */
  diskRevision: string | null;
  inUse: boolean;
  lastUsedAt: string | null;
  download: DownloadView | null;
  facts: FactsView | null;
}

export interface ModelListView {
  models: ModelView[];
  /** Card files that could not be used: `file: problem`. */
  errors: { file: string; message: string }[];
}

export interface AddRequest {
  repo: string;
  file?: string;
  quant?: string;
  revision?: string;
  pull?: boolean;
}

export interface AddResult {
  card: ModelCard;
  cardFile: string;
  /** False when an earlier card of `shoal models add` for the same model was replaced. */
  created: boolean;
  hub: { endpoint: string; repo: string; requestedRevision: string; revision: string; file: string; files: { path: string; size: number; sha256: string | null }[]; bytes: number; chosen: 'named' | 'default' };
  model: ModelView;
  download: DownloadView | null;
}

export interface RemoveResult {
  id: string;
  freedBytes: number;
  /** The store had files (or part files) of it. */
  removedFiles: boolean;
  /** The card file deleted, if there was one. */
  cardFile: string | null;
}

/** DELETE /models/:id in a cluster: this node's result (as RemoveResult) and what every member did. */
export interface ClusterRemoveResult extends RemoveResult {
  /** This node first, then the other members. */
  nodes: NodeRemoval[];
  /** Bytes freed on all members together. */
  totalFreedBytes: number;
}

/** A cluster-wide removal that removed nothing anywhere: `error` says why (this node's own error when it had one), `nodes` what each member said. */
export class ClusterRemoveError extends Error {
  constructor(
    readonly error: ShoalError,
    readonly nodes: NodeRemoval[],
  ) {
    super(error.message, { cause: error });
    this.name = 'ClusterRemoveError';
  }
}

export interface StorageView extends StoreUsage {
  root: string;
  /** Free space above the reserve: what downloads may still take without evicting. */
  availableBytes: number;
  /** Downloads under way: bytes still to come. */
  downloads: { id: string; modelId: string; doneBytes: number; totalBytes: number }[];
  /** Generated built-in models, outside the hub store (not in totalBytes). */
  builtin: { dir: string; bytes: number };
}

// ---- helpers -----------------------------------------------------------------------------------

interface DownloadRecord {
  id: string;
  modelId: string;
  repo: string;
  revision: string;
  state: DownloadState;
  progress: DownloadProgress | null;
  progressAtMs: number;
  startedAtMs: number;
  finishedAtMs: number | null;
  path: string | null;
  error: ShoalError | null;
  controller: AbortController;
  settled: Promise<void>;
  source: DownloadSource | null;
  peerFailures: { nodeId: string; name: string; message: string }[];
}

/** Most peer failures a download keeps (one per holder tried). */
const MAX_PEER_FAILURES = 4;
const PEER_FAILURE_MAX_CHARS = 500;

function rootCause(error: unknown): string {
  let e: unknown = error;
  for (let depth = 0; depth < 6; depth += 1) {
    const next = e instanceof Error ? e.cause : undefined;
    if (next === undefined || next === null) break;
    e = next;
  }
  return e instanceof Error ? e.message : String(e);
}

function unreachable(endpoint: string, why: string, cause?: unknown): ModelsError {
  return new ModelsError('HUB_UNREACHABLE', `the model hub at ${endpoint} cannot be reached (${why}): check the network or set SHOAL_HF_ENDPOINT`, {
    cause,
    details: { endpoint },
  });
}


async function sizeOf(path: string): Promise<number | null> {
  try {
    return (await stat(path)).size;
  } catch {
    return null;
  }
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory()) total += await dirBytes(path);
    else if (e.isFile()) total += (await sizeOf(path)) ?? 0;
  }
  return total;
}

/** A download plan for a copy described by its files (this store's record, or a member's). */
function planOf(copy: Omit<PeerCopy, 'modelId' | 'bytes'>, modelId: string): DownloadPlan {
  return { modelId, repo: copy.repo, revision: copy.revision, group: copy.group, primaryPath: copy.primaryPath, files: copy.files.map((f) => ({ ...f })) };
}

/** A member's refusal as the error this node answers with, its reason (MODEL_IN_USE → 409) kept. */
function remoteError(node: NodeRemoval): ShoalError {
  const error = node.error as NonNullable<NodeRemoval['error']>;
  const message = `${node.name} refused: ${error.message}`;
  if (error.reason !== null && error.reason in MODELS_ERROR_CODE) return new ModelsError(error.reason as ModelsErrorReason, message);
  return new ShoalError(knownErrorCode(error.code), message);
}

/** A failed download's error, saying too why the members that hold the model could not give it. */
function withPeerFailures(error: ShoalError, failures: readonly { name: string; message: string }[]): ShoalError {
  if (failures.length === 0) return error;
  const message = `${error.message}; copying from the members that hold it failed too (${failures.map((f) => `${f.name}: ${f.message}`).join('; ')})`;
  if (error instanceof ModelsError) return new ModelsError(error.reason, message, { cause: error, details: { ...error.details } });
  return new ShoalError(error.code, message, { cause: error });
}

/** `owner/name:Q4_K_M` -> `owner--name--Q4_K_M.toml`. */
export function cardFileName(id: string): string {
  return `${id.replace(/[^A-Za-z0-9._-]+/g, '--').replace(/^[.-]+/, '')}.toml`;
}

function humanBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = bytes;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u += 1;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)} ${units[u]}`;
}

function factsLine(facts: FactsView | null): string {
  if (!facts) return `${FACTS_LINE} not read yet; this card is rewritten with them once the file is downloaded (shoal models pull)`;
  return `${FACTS_LINE} architecture ${facts.architecture}, trained context ${facts.trainedContext} tokens, ${facts.blockCount} layers, embedding ${facts.embeddingLength}, ${facts.headCount} heads (${facts.headCountKv} KV), vocabulary ${facts.vocabSize ?? 'unknown'}, chat template ${facts.chatTemplate ? 'yes' : 'no'}`;
}

function renderCard(card: ModelCard, comments: readonly string[]): string {
  const body: Record<string, unknown> = {
    id: card.id,
    name: card.name,
    tasks: card.tasks,
    compatible_backends: card.compatible_backends,
    backend_preference: card.backend_preference,
    source: card.source,
    capabilities: card.capabilities,
    runtime: card.runtime,
  };
  return `${comments.join('\n')}\n\n${stringifyToml(body)}`;
}

/** Capabilities a chat template shows: native tool calls, a reasoning block. */
function templateCapabilities(template: string | null): Pick<CardCapabilities, 'tools' | 'reasoning'> {
  if (template === null) return { tools: false, reasoning: false };
  return { tools: /\btools\b|tool_call/.test(template), reasoning: /<think>|enable_thinking|reasoning_content/.test(template) };
}

async function readFacts(path: string): Promise<{ facts: FactsView; template: string | null }> {
  const size = (await stat(path)).size;
  const parsed = await gguf(path, { allowLocalFile: true });
  const metadata = parsed.metadata as unknown as Record<string, unknown>;
  const facts: GgufFacts = factsFromHeader({ metadata, tensorInfos: parsed.tensorInfos, tensorDataOffset: parsed.tensorDataOffset }, size, path);
  const template = typeof metadata['tokenizer.chat_template'] === 'string' ? (metadata['tokenizer.chat_template'] as string) : null;
  return {
    facts: {
      architecture: facts.architecture,
      trainedContext: facts.trainedContext,
      blockCount: facts.blockCount,
      embeddingLength: facts.embeddingLength,
      headCount: facts.headCount,
      headCountKv: facts.headCountKv,
      vocabSize: facts.vocabSize,
      fileBytes: facts.fileBytes,
      chatTemplate: template !== null,
    },
    template,
  };
}

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

// ---- the service ---------------------------------------------------------------------------------

export class ModelsService {
  private readonly downloads = new Map<string, DownloadRecord>();
  private readonly factsCache = new Map<string, { key: string; value: { facts: FactsView; template: string | null } | null }>();
  private closed = false;

  private constructor(
    private readonly opts: ModelsServiceOptions,
    readonly store: ModelStore,
  ) {}

  static async open(opts: ModelsServiceOptions): Promise<ModelsService> {
    const store =
      opts.store ??
      (await ModelStore.open({
        dataDir: opts.dataDir,
        hub: opts.endpoint === undefined ? {} : { endpoint: opts.endpoint },
        ...(opts.reserveBytes === undefined ? {} : { reserveBytes: opts.reserveBytes }),
        inUse: () => opts.inUse?.() ?? [],
      }));
    if (store.damagedIndex) opts.log.warn({ aside: store.damagedIndex }, 'the model store index was damaged and was set aside; its files show as untracked in the storage report');
    return new ModelsService(opts, store);
  }

  /** The hub endpoint this node uses (throws INVALID_NAME when the configured one is not a URL). */
  endpoint(): string {
    return resolveHubOptions(this.opts.endpoint === undefined ? {} : { endpoint: this.opts.endpoint }).endpoint;
  }

  private inUse(): Set<string> {
    return new Set(this.opts.inUse?.() ?? []);
  }

  /** Runs hub requests with a deadline; a deadline passed or a network failure says the hub cannot be reached. */
  private async withHub<T>(fn: (hub: HubOptions) => Promise<T>): Promise<T> {
    const endpoint = this.endpoint();
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error('timeout'));
    }, HUB_REQUEST_TIMEOUT_MS);
    try {
      return await fn({ endpoint, signal: controller.signal });
    } catch (error) {
      if (timedOut) throw unreachable(endpoint, `no answer within ${HUB_REQUEST_TIMEOUT_MS / 1000} s`, error);
      throw this.friendly(error);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Rewords a hub failure for an operator: an unreachable hub names the endpoint and what to do. */
  private friendly(error: unknown): ShoalError {
    if (isModelsError(error, 'HUB_UNREACHABLE') && !error.message.startsWith('the model hub at ')) {
      const endpoint = typeof error.details.endpoint === 'string' ? error.details.endpoint : this.opts.endpoint ?? 'the configured endpoint';
      return unreachable(endpoint, rootCause(error), error);
    }
    return toShoalError(error);
  }

  // ---- search ----------------------------------------------------------------------------------

  async search(query: string, limit?: number): Promise<SearchView> {
    const results = await this.withHub((hub) => hubSearch(query, { ...hub, ...(limit === undefined ? {} : { limit }) }));
    return {
      endpoint: this.endpoint(),
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

  // ---- add -------------------------------------------------------------------------------------

  /** Resolves a repo (pinned to a commit), picks the GGUF and writes its card; downloads only with `pull`. */
  async add(request: AddRequest): Promise<AddResult> {
    const ref = parseHubReference(request.repo);
    if (!ref) throw new ModelsError('INVALID_NAME', `"${request.repo}" is not a Hugging Face repo: write owner/name (find one with shoal models search <name>)`);
    if (request.file !== undefined && request.quant !== undefined) throw new ShoalError('BAD_REQUEST', 'name a file or a quant, not both');
    const selector = request.file ?? request.quant ?? ref.file ?? ref.quant;
    const requestedRevision = request.revision ?? ref.revision;
    const endpoint = this.endpoint();
    const { resolved, meta } = await this.withHub(async (hub) => {
      const resolvedRepo = await resolveRepo(ref.repo, { ...hub, ...(requestedRevision === undefined ? {} : { revision: requestedRevision }) });
      return { resolved: resolvedRepo, meta: await this.repoMeta(hub, resolvedRepo) };
    });
    const plan = planDownload(resolved, selector);
    const id = plan.modelId;

    const dir = cardsDir(this.opts.dataDir);
    const cardFile = join(dir, cardFileName(id));
    const catalog = await loadCatalog(this.opts.dataDir);
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
    const stored = this.store.get(id);
    const onDisk = stored && stored.revision === plan.revision ? await this.facts(stored.path) : null;
    const fromTemplate = templateCapabilities(onDisk?.template ?? null);
    const repoName = ref.repo.slice(ref.repo.indexOf('/') + 1);
    const card = ModelCard.parse({
      id,
      name: `${repoName} ${plan.modelId.slice(plan.modelId.lastIndexOf(':') + 1)}`.slice(0, 200),
      source: { kind: 'huggingface', repo: plan.repo, file: plan.primaryPath, revision: plan.revision },
      tasks: meta.embeddings ? ['embeddings'] : ['chat', 'completion'],
      capabilities: { tools: fromTemplate.tools, reasoning: fromTemplate.reasoning, vision: false },
      compatible_backends: HUB_BACKENDS,
      backend_preference: [],
      runtime: { parallel: 1, min_nodes: 1 },
    } satisfies ModelCardInput);
    const bytes = plan.files.reduce((s, f) => s + f.size, 0);
    const comments = [
      `${GENERATED_CARD_MARKER} from ${endpoint}/${plan.repo}`,
      `# Revision: ${requestedRevision ?? 'main'}, pinned to commit ${plan.revision}.`,
      `# File: ${plan.primaryPath}${plan.files.length > 1 ? ` and ${plan.files.length - 1} more shards` : ''}, ${humanBytes(bytes)}; ${selector ? `asked for "${selector}"` : `the default quantization (${plan.modelId.slice(plan.modelId.lastIndexOf(':') + 1)})`}.`,
      ...(meta.pipeline ? [`# Hub pipeline: ${meta.pipeline}.`] : []),
      ...(meta.license ? [`# License: ${meta.license}.`] : []),
      ...(meta.baseModel ? [`# Base model: ${meta.baseModel}.`] : []),
      ...(meta.projector ? ['# The repo also has a multimodal projector; Shoal serves text only.'] : []),
      factsLine(onDisk?.facts ?? null),
      '# Architecture facts come from the GGUF file itself and are never typed here. Edit this card freely;',
      `# 'shoal models add' replaces only cards that start with its first line.`,
    ];
    const text = renderCard(card, comments);
    parseCard(text, cardFile); // the catalog must accept what is written
    await mkdir(dir, { recursive: true });
    await writeFileAtomic(cardFile, text);
    this.opts.log.info({ modelId: id, cardFile, revision: plan.revision }, 'model card written');

    const download = request.pull ? this.launch(id, { repo: plan.repo, revision: plan.revision, file: plan.primaryPath }, { ...plan, modelId: id }, null) : null;
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
      },
      model: await this.modelView(entry, this.inUse()),
      download: download ? this.view(download) : null,
    };
  }

  /** Repo metadata for a card: embedding model or not, license, base model; best effort. */
  private async repoMeta(hub: HubOptions, resolved: ResolvedRepo): Promise<{ embeddings: boolean; pipeline: string | null; license: string | null; baseModel: string | null; projector: boolean }> {
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
      this.opts.log.debug({ err: error, repo: resolved.repo }, 'repo metadata not available; the card uses defaults');
      return { embeddings: false, pipeline: null, license: null, baseModel: null, projector };
    }
  }

  /** GGUF header facts of a local file, cached by size and mtime; null when it cannot be read. */
  private async facts(path: string): Promise<{ facts: FactsView; template: string | null } | null> {
    let key: string;
    try {
      const s = await stat(path);
      key = `${s.size}:${s.mtimeMs}`;
    } catch {
      return null;
    }
    const cached = this.factsCache.get(path);
    if (cached && cached.key === key) return cached.value;
    let value: { facts: FactsView; template: string | null } | null;
    try {
      value = await readFacts(path);
    } catch (error) {
      this.opts.log.warn({ err: error, path }, 'cannot read the GGUF header');
      value = null;
    }
    this.factsCache.set(path, { key, value });
    return value;
  }

  /** After a download: rewrites a card of `shoal models add` with the header facts of its file. */
  private async refreshCard(id: string, stored: StoredModel): Promise<void> {
    const catalog = await loadCatalog(this.opts.dataDir);
    const entry = catalog.entries.get(id);
    if (!entry || entry.origin === 'builtin') return;
    const text = await readFile(entry.origin, 'utf8').catch(() => null);
    if (text === null || !text.startsWith(GENERATED_CARD_MARKER)) return;
    const source = entry.card.source;
    if (source.kind !== 'huggingface' || source.revision !== stored.revision) return;
    const read = await this.facts(stored.path);
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

  // ---- downloads -------------------------------------------------------------------------------

  /**
   * Starts getting a model in the background, or joins the one running: from a member that holds it
   * (src/node/peer-models.ts), else from the hub. Without a card here, a member's copy is still taken:
   * an instance placed on this node needs the file of a model only another node added.
   */
  async pull(id: string): Promise<{ download: DownloadView; joined: boolean }> {
    const running = this.activeFor(id);
    if (running) return { download: this.view(running), joined: true };
    const catalog = await loadCatalog(this.opts.dataDir);
    const entry = catalog.entries.get(id);
    if (!entry) {
      const copy = await this.findPeerCopy(id);
      const again = this.activeFor(id);
      if (again) return { download: this.view(again), joined: true };
      if (copy) return { download: this.view(this.launch(id, { repo: copy.copy.repo, revision: copy.copy.revision, file: copy.copy.primaryPath }, null, copy)), joined: false };
      const broken = catalog.errors.find((e) => e.message.includes(id));
      throw new ShoalError('NOT_FOUND', `no model card '${id}'${broken ? ` (a card file is broken: ${broken.message})` : ''}: add it first with 'shoal models add <owner/repo>[:<quant>]', or see 'shoal models ls'`);
    }
    const source = entry.card.source;
    if (source.kind === 'builtin') throw new ShoalError('BAD_REQUEST', `${id} is a built-in model: it is generated on first use, there is nothing to download`);
    if (source.kind === 'file') throw new ShoalError('BAD_REQUEST', `${id} is a local file (${source.path}): there is nothing to download`);
    const again = this.activeFor(id);
    if (again) return { download: this.view(again), joined: true };
    return { download: this.view(this.launch(id, { repo: source.repo, revision: source.revision, file: source.file }, null, null)), joined: false };
  }

  /** A member's description of its copy of `modelId` (any revision), from the first holder that answers; null when none. */
  private async findPeerCopy(modelId: string): Promise<{ holder: PeerHolder; copy: PeerCopy } | null> {
    const peers = this.opts.peers;
    if (!peers) return null;
    for (const holder of peers.holders(modelId, null).slice(0, MODEL_COPY_MAX_HOLDERS_TRIED)) {
      try {
        const copy = await peers.describe(holder.nodeId, modelId, AbortSignal.timeout(MODEL_COPY_IDLE_TIMEOUT_MS));
        if (copy) return { holder, copy };
      } catch (error) {
        this.opts.log.debug({ err: error, modelId, holder: holder.nodeId }, 'a member that reported the model could not describe it');
      }
    }
    return null;
  }

  private activeFor(modelId: string): DownloadRecord | undefined {
    return [...this.downloads.values()].find((d) => d.modelId === modelId && d.finishedAtMs === null);
  }

  private launch(modelId: string, want: { repo: string; revision: string; file: string }, preset: DownloadPlan | null, known: { holder: PeerHolder; copy: PeerCopy } | null): DownloadRecord {
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
    this.downloads.set(record.id, record);
    const signal = record.controller.signal;
    const log = this.opts.log.child({ modelId, download: record.id });
    record.settled = (async () => {
      try {
        const stored = await this.obtain(record, want.file, preset, known, log);
        record.path = stored.path;
        record.state = 'done';
        log.info({ path: stored.path, fetched: record.progress?.fetchedBytes ?? 0, source: record.source }, 'download done');
        await this.refreshCard(modelId, stored).catch((error: unknown) => log.warn({ err: error }, 'could not rewrite the card with the GGUF facts'));
      } catch (error) {
        if (signal.aborted) {
          record.state = 'cancelled';
          record.error = new ShoalError('CANCELLED', `the download of ${modelId} was cancelled; its part files are kept and the next pull resumes them`);
          log.info('download cancelled');
        } else {
          record.state = 'failed';
          record.error = withPeerFailures(this.friendly(error), record.peerFailures);
          log.warn({ err: error }, `download failed: ${record.error.message}`);
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
    return this.store.download(plan, {
      signal: record.controller.signal,
      onProgress: (p) => {
        record.progress = p;
        record.progressAtMs = Date.now();
      },
      ...(source === undefined ? {} : { source }),
    });
  }

  /**
   * The model's files, in this order of preference: the complete copy already on disk (no network at
   * all), a member that holds it (each tried once, MODEL_COPY_MAX_HOLDERS_TRIED at most), the hub. A
   * member's bytes are verified against the hub's hashes when the plan came from the hub (`add --pull`),
   * else against the hashes the member verified its own copy with. Part files are shared, so whatever
   * one source delivered before failing, the next continues from.
   */
  private async obtain(record: DownloadRecord, file: string, preset: DownloadPlan | null, known: { holder: PeerHolder; copy: PeerCopy } | null, log: Logger): Promise<StoredModel> {
    const signal = record.controller.signal;
    const want = { repo: record.repo, revision: record.revision, file };
    const onDisk = this.store.get(record.modelId);
    if (onDisk && sameCopy(onDisk, want) === null && (await this.isComplete(onDisk))) {
      record.source = { kind: 'disk' };
      return this.transfer(record, preset ?? planOf(onDisk, record.modelId), undefined);
    }

    const peers = this.opts.peers;
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
          return await this.transfer(record, plan, peers.source(holder.nodeId, plan.repo, plan.revision));
        } catch (error) {
          if (signal.aborted) throw error;
          // Disk space is not the member's fault: the hub would need the same room.
          if (isModelsError(error, 'INSUFFICIENT_DISK')) throw error;
          const message = clipText(error instanceof Error ? error.message : String(error), PEER_FAILURE_MAX_CHARS);
          if (record.peerFailures.length < MAX_PEER_FAILURES) record.peerFailures.push({ nodeId: holder.nodeId, name: holder.name, message });
          log.warn({ err: error, from: holder.nodeId }, `copying from ${holder.name} failed, trying ${candidates.indexOf(holder) + 1 < Math.min(candidates.length, MODEL_COPY_MAX_HOLDERS_TRIED) ? 'the next member' : 'the hub'}: ${message}`);
        }
      }
    }

    record.state = 'resolving';
    record.source = { kind: 'hub', endpoint: this.endpointOrConfigured() };
    let plan = preset;
    if (!plan) {
      const resolved = await resolveRepo(record.repo, { ...(this.opts.endpoint === undefined ? {} : { endpoint: this.opts.endpoint }), revision: record.revision, signal });
      plan = { ...planDownload(resolved, file), modelId: record.modelId };
    }
    log.info({ repo: record.repo, revision: plan.revision, bytes: plan.files.reduce((s, f) => s + f.size, 0) }, 'download started');
    return this.transfer(record, plan, undefined);
  }

  /** The hub endpoint for display, even when the configured one does not parse (the download then fails saying so). */
  private endpointOrConfigured(): string {
    try {
      return this.endpoint();
    } catch {
      return this.opts.endpoint ?? 'the configured hub';
    }
  }

  private async isComplete(stored: StoredModel): Promise<boolean> {
    for (const f of stored.files) {
      if ((await sizeOf(filePathFor(this.store.root, stored.repo, stored.revision, f.path))) !== f.size) return false;
    }
    return true;
  }

  private trimFinished(): void {
    const finished = [...this.downloads.values()].filter((d) => d.finishedAtMs !== null).sort((a, b) => (a.finishedAtMs as number) - (b.finishedAtMs as number));
    for (const d of finished.slice(0, Math.max(0, finished.length - FINISHED_DOWNLOADS_KEPT))) this.downloads.delete(d.id);
  }

  private view(d: DownloadRecord): DownloadView {
    const p = d.progress;
    const finished = d.finishedAtMs !== null;
    // A snapshot older than the rate window means nothing arrived since: the rate is not known.
    const stale = !finished && Date.now() - d.progressAtMs > RATE_WINDOW_MS;
    const done = d.state === 'done';
    return {
      id: d.id,
      modelId: d.modelId,
      repo: d.repo,
      revision: p?.revision ?? d.revision,
      state: d.state,
      files: p?.files.map((f) => ({ ...f })) ?? [],
      doneBytes: p?.doneBytes ?? 0,
      totalBytes: p?.totalBytes ?? 0,
      fetchedBytes: p?.fetchedBytes ?? 0,
      bytesPerSecond: finished || stale ? 0 : (p?.bytesPerSecond ?? 0),
      etaSeconds: done ? 0 : finished || stale ? null : (p?.etaSeconds ?? null),
      done,
      startedAt: new Date(d.startedAtMs).toISOString(),
      finishedAt: finished ? new Date(d.finishedAtMs as number).toISOString() : null,
      path: d.path,
      error: d.error ? { code: d.error.code, reason: d.error instanceof ModelsError ? d.error.reason : null, message: d.error.message } : null,
      source: d.source ? { ...d.source } : null,
      peerFailures: d.peerFailures.map((f) => ({ ...f })),
    };
  }

  listDownloads(): { downloads: DownloadView[] } {
    return { downloads: [...this.downloads.values()].sort((a, b) => a.startedAtMs - b.startedAtMs).map((d) => this.view(d)) };
  }

  getDownload(id: string): DownloadView {
    const d = this.downloads.get(id);
    if (!d) throw new ShoalError('NOT_FOUND', `no download '${id}': see GET /models/downloads`);
    return this.view(d);
  }

  /** Cancels a running download (its part files stay for a later resume); a finished one is returned as it is. */
  async cancel(id: string): Promise<DownloadView> {
    const d = this.downloads.get(id);
    if (!d) throw new ShoalError('NOT_FOUND', `no download '${id}': see GET /models/downloads`);
    if (d.finishedAtMs === null) {
      d.controller.abort(new ShoalError('CANCELLED', `the download of ${d.modelId} was cancelled`));
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([d.settled, new Promise<void>((r) => (timer = setTimeout(r, CANCEL_WAIT_MS)))]);
      clearTimeout(timer);
    }
    return this.view(d);
  }

  // ---- listing ---------------------------------------------------------------------------------

  async list(): Promise<ModelListView> {
    const catalog = await loadCatalog(this.opts.dataDir);
    const inUse = this.inUse();
    const models: ModelView[] = [];
    for (const entry of catalog.entries.values()) models.push(await this.modelView(entry, inUse));
    const carded = new Set(catalog.entries.keys());
    for (const stored of this.store.list()) if (!carded.has(stored.modelId)) models.push(await this.storeOnlyView(stored, inUse));
    return { models, errors: catalog.errors.map((e) => ({ file: e.file, message: e.message })) };
  }

  async get(id: string): Promise<ModelView> {
    const catalog = await loadCatalog(this.opts.dataDir);
    const entry = catalog.entries.get(id);
    if (entry) return this.modelView(entry, this.inUse());
    const stored = this.store.get(id);
    if (stored) return this.storeOnlyView(stored, this.inUse());
    throw new ShoalError('NOT_FOUND', `no model '${id}' on this node: see 'shoal models ls'`);
  }

  private async storeOnlyView(stored: StoredModel, inUse: Set<string>): Promise<ModelView> {
    const download = this.activeFor(stored.modelId);
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
      download: download ? this.view(download) : null,
      facts: (await this.facts(stored.path))?.facts ?? null,
    };
  }

  private async modelView(entry: CatalogEntry, inUse: Set<string>): Promise<ModelView> {
    const { card } = entry;
    const origin: ModelView['origin'] = entry.origin === 'builtin' ? 'builtin' : (await this.isGenerated(entry.origin)) ? 'added' : 'user';
    const download = this.activeFor(card.id) ?? null;
    const base = {
      id: card.id,
      name: card.name,
      origin,
      cardFile: entry.origin === 'builtin' ? null : entry.origin,
      source: card.source,
      tasks: card.tasks,
      capabilities: card.capabilities,
      inUse: inUse.has(card.id),
      download: download ? this.view(download) : null,
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
        facts: size === null ? null : ((await this.facts(source.path))?.facts ?? null),
      };
    }
    const stored = this.store.get(card.id);
    let partialBytes: number;
    try {
      partialBytes = (await sizeOf(partPathFor(filePathFor(this.store.root, source.repo, source.revision, source.file)))) ?? 0;
    } catch {
      partialBytes = 0; // a card path the store would refuse has no part file
    }
    let state: DiskState;
    if (download) state = 'downloading';
    else if (stored && stored.revision === source.revision && (await sizeOf(stored.path)) !== null) state = 'on-disk';
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
      facts: stored ? ((await this.facts(stored.path))?.facts ?? null) : null,
    };
  }

  private async isGenerated(file: string): Promise<boolean> {
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

  // ---- removal ---------------------------------------------------------------------------------

  /** Deletes a model's files (complete copy and part files) and its card; refuses one in use or downloading. */
  async remove(id: string): Promise<RemoveResult> {
    const catalog = await loadCatalog(this.opts.dataDir);
    const entry = catalog.entries.get(id);
    if (entry?.origin === 'builtin') {
      throw new ShoalError('BAD_REQUEST', `${id} is a built-in model: it has no card file and its generated file is recreated on use; nothing to remove`);
    }
    const running = this.activeFor(id);
    if (running) {
      throw new ModelsError('MODEL_IN_USE', `${id} is downloading (${running.id}): cancel the download first (Ctrl-C in 'shoal models pull', or DELETE /models/downloads/${running.id}), then remove it`);
    }
    if (this.inUse().has(id)) {
      throw new ModelsError('MODEL_IN_USE', `${id} is loaded on this node and serving: unload it (place another model) before removing it`);
    }
    const before = await this.store.usage();
    const removedFiles = await this.store.remove(id);
    const after = removedFiles ? await this.store.usage() : before;
    let cardFile: string | null = null;
    if (entry) {
      const dir = resolve(cardsDir(this.opts.dataDir));
      const file = resolve(entry.origin);
      if (file.startsWith(dir + sep)) {
        await unlink(file).catch((error: unknown) => {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        });
        cardFile = file;
      }
    }
    if (!removedFiles && cardFile === null) {
      if (entry) throw new ShoalError('BAD_REQUEST', `${id} comes from ${entry.origin}, outside ${cardsDir(this.opts.dataDir)}, and has no files in the store: nothing to remove`);
      throw new ShoalError('NOT_FOUND', `no model '${id}' on this node: see 'shoal models ls'`);
    }
    // What the disk got back: a file hard-linked from another model frees nothing.
    const freedBytes = Math.max(0, before.modelBytes + before.partialBytes - (after.modelBytes + after.partialBytes));
    this.opts.log.info({ modelId: id, freedBytes, cardFile }, 'model removed');
    return { id, freedBytes, removedFiles, cardFile };
  }

  /**
   * Removes a model on this node and on every other member (DELETE /models/:id). Each member decides
   * for itself as remove() does here: one that is using or downloading it refuses, the others remove
   * it. Alone (no peers, no other members) this is remove(), errors and all. Throws ClusterRemoveError
   * when no member removed anything; its `error` is this node's own when it had one to give.
   */
  async removeEverywhere(id: string): Promise<ClusterRemoveResult> {
    const peers = this.opts.peers;
    const self = peers?.self() ?? { nodeId: '', name: 'this node' };
    const [local, others] = await Promise.all([
      this.remove(id).then(
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
          error: local.error ? { code: local.error.code, reason: local.error instanceof ModelsError ? local.error.reason : null, message: local.error.message } : null,
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
    this.opts.log.info({ modelId: id, removedOn: removed.map((n) => n.nodeId), refusedBy: nodes.filter((n) => n.outcome === 'refused').map((n) => n.nodeId) }, 'model removed across the cluster');
    return {
      id,
      freedBytes: local.result?.freedBytes ?? 0,
      removedFiles: local.result?.removedFiles ?? false,
      cardFile: local.result?.cardFile ?? null,
      nodes,
      totalFreedBytes: removed.reduce((s, n) => s + n.freedBytes, 0),
    };
  }

  // ---- storage ---------------------------------------------------------------------------------

  async storage(): Promise<StorageView> {
    const usage = await this.store.usage();
    const builtinDir = join(modelsDir(this.opts.dataDir), 'builtin');
    return {
      ...usage,
      root: this.store.root,
      availableBytes: Math.max(0, usage.disk.freeBytes - usage.disk.reserveBytes),
      downloads: [...this.downloads.values()]
        .filter((d) => d.finishedAtMs === null)
        .map((d) => ({ id: d.id, modelId: d.modelId, doneBytes: d.progress?.doneBytes ?? 0, totalBytes: d.progress?.totalBytes ?? 0 })),
      builtin: { dir: builtinDir, bytes: await dirBytes(builtinDir) },
    };
  }

  /** Cancels running downloads (their part files stay for the next start) and waits for them to stop. */
  async close(): Promise<void> {
    this.closed = true;
    const running = [...this.downloads.values()].filter((d) => d.finishedAtMs === null);
    for (const d of running) d.controller.abort(new ShoalError('CANCELLED', 'the node is stopping'));
    await Promise.race([Promise.all(running.map((d) => d.settled)), new Promise((r) => setTimeout(r, 2000).unref())]);
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
