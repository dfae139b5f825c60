export {
  ModelStore,
  DEFAULT_DISK_RESERVE_BYTES,
  DEFAULT_MAX_CONCURRENT_FILES,
  DEFAULT_TRANSFER_RETRIES,
  DEFAULT_RETRY_DELAY_MS,
  type ModelStoreOptions,
  type DownloadOptions,
  type PullRequest,
  type StoredModel,
} from './store.js';
export { planDownload, type DownloadPlan } from './plan.js';
export type { StoreUsage, ModelUsage, EvictionReport } from './usage.js';
export { renderProgressLine, progressBarWriter, RateMeter, RATE_WINDOW_MS, DEFAULT_PROGRESS_INTERVAL_MS, type DownloadProgress, type FileProgress, type FileState } from './progress.js';
export { hubStoreRoot, filePathFor, partPathFor, revisionDir, PART_SUFFIX, INDEX_FILE } from './layout.js';
export { hubSource, RetryableError, type ByteSource, type PartWriter } from './transfer.js';
