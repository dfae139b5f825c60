// The plain data the /models and /store routes answer with (and the CLI and dashboard read): what the
// models service reports about search results, cards, downloads, removal and storage. Types only.

import type { CardCapabilities, CardSource, CardTask, ModelCard } from './cards/card.js';
import type { DownloadProgress } from './store/progress.js';
import type { StoreUsage } from './store/usage.js';

/** A failure as a view carries it: the ShoalError code, the models reason when it is a models failure. */
export interface FailureView {
  code: string;
  reason: string | null;
  message: string;
}

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
  error: FailureView | null;
  /** Where the bytes come from now (null while resolving). */
  source: DownloadSource | null;
  /** Members a copy was tried from and why each did not give it (then the next one, then the hub). */
  peerFailures: { nodeId: string; name: string; message: string }[];
}

/** POST /models/pull: the download started, or the one already running (`joined`). */
export interface PullView {
  download: DownloadView;
  joined: boolean;
  /** The download of the speculative draft its card names, started with it (absent: none to fetch, or a join). */
  draft?: DownloadView;
}

/** GET /models/downloads: the running downloads and the last finished ones, oldest first. */
export interface DownloadListView {
  downloads: DownloadView[];
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
  /**
   * The multimodal projector of a vision repo to fetch and serve with the model: a file or precision
   * (`mmproj-F16.gguf`, `F16`); false for a text-only card. Default: the repo's projector, if it has
   * one (F16, then BF16, Q8_0, F32, else the smallest), making the card a vision card.
   */
  projector?: string | false;
}

export interface AddResult {
  card: ModelCard;
  cardFile: string;
  /** False when an earlier card of `shoal models add` for the same model was replaced. */
  created: boolean;
  /** `files` and `bytes` include the projector's, which `projector` names (null: a text-only card). */
  hub: { endpoint: string; repo: string; requestedRevision: string; revision: string; file: string; files: { path: string; size: number; sha256: string | null }[]; bytes: number; chosen: 'named' | 'default'; projector: { path: string; size: number } | null };
  model: ModelView;
  download: DownloadView | null;
}

/** `POST /models/add-file`: a GGUF on the node's disk made a model of the store, with its card. */
export interface AddFileRequest {
  /** Absolute path on the node's machine (the CLI resolves a relative one against its own directory). */
  path: string;
  /** A vision model's multimodal projector (`mmproj` GGUF), absolute as `path`: imported with it, making the card a vision card. */
  projector?: string;
}

export interface AddFileResult {
  card: ModelCard;
  cardFile: string;
  /** False when the card of an earlier import of the same file was replaced. */
  created: boolean;
  file: {
    /** The file as given. */
    path: string;
    /** Its name in the store. */
    storedPath: string;
    bytes: number;
    sha256: string;
    /** `linked`: a hard link (same filesystem, no extra disk); `copied`: another filesystem; `present`: already in the store. */
    stored: 'linked' | 'copied' | 'present';
  };
  /** The projector imported with it (its path as given, its name in the store), null without one. */
  projector: { path: string; storedPath: string; bytes: number; sha256: string } | null;
  model: ModelView;
}

export interface RemoveResult {
  id: string;
  freedBytes: number;
  /** The store had files (or part files) of it. */
  removedFiles: boolean;
  /** The card file deleted, if there was one. */
  cardFile: string | null;
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
  error: FailureView | null;
}

/** DELETE /models/:id in a cluster: this node's result (as RemoveResult) and what every member did. */
export interface ClusterRemoveResult extends RemoveResult {
  /** This node first, then the other members. */
  nodes: NodeRemoval[];
  /** Bytes freed on all members together. */
  totalFreedBytes: number;
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
