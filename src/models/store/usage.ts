// What the store reports about its disk use: plain data for `GET /store/usage`, eviction and the dashboard.

export interface ModelUsage {
  modelId: string;
  repo: string;
  revision: string;
  bytes: number;
  lastUsedMs: number;
  inUse: boolean;
}

export interface StoreUsage {
  models: ModelUsage[];
  /** Bytes of complete models (a file shared by hard links counts once). */
  modelBytes: number;
  /** Bytes in `.part` files (downloads under way or interrupted). */
  partialBytes: number;
  /** Files under the store that the index does not know (e.g. after a damaged index was set aside). */
  untrackedBytes: number;
  totalBytes: number;
  disk: { freeBytes: number; reserveBytes: number };
}

export interface EvictionReport {
  evicted: string[];
  freedBytes: number;
  /** Bytes of complete models left. */
  keptBytes: number;
  /** How far the kept models are still over the budget (models in use are never evicted). */
  overBudgetBytes: number;
}
