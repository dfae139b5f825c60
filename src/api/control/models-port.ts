import type {
  AddFileRequest,
  AddFileResult,
  AddRequest,
  AddResult,
  ClusterRemoveResult,
  DownloadListView,
  DownloadView,
  ModelListView,
  ModelView,
  PullView,
  RemoveResult,
  SearchView,
  StorageView,
} from '../../models/views.js';

/**
 * What the /models and /store routes need of the node's models on disk; every method maps to one
 * route. The models service (src/models/service/) implements it.
 */
export interface ModelsControl {
  list(): Promise<ModelListView>;
  search(query: string, limit?: number): Promise<SearchView>;
  add(request: AddRequest): Promise<AddResult>;
  /** A GGUF on the node's machine (absolute path) taken into the store, with a `local/<stem>` card. */
  addFile(request: AddFileRequest): Promise<AddFileResult>;
  pull(id: string): Promise<PullView>;
  listDownloads(): DownloadListView;
  getDownload(id: string): DownloadView;
  cancel(id: string): Promise<DownloadView>;
  get(id: string): Promise<ModelView>;
  /** This node only (`?local=1`). */
  remove(id: string): Promise<RemoveResult>;
  /** Every member that holds the model; throws ClusterRemoveError (src/models/cluster-remove-error.ts) when none removed anything. */
  removeEverywhere(id: string): Promise<ClusterRemoveResult>;
  storage(): Promise<StorageView>;
}
