export {
  ModelStore,
  planDownload,
  DEFAULT_DISK_RESERVE_BYTES,
  DEFAULT_MAX_CONCURRENT_FILES,
  DEFAULT_TRANSFER_RETRIES,
  DEFAULT_RETRY_DELAY_MS,
  type ModelStoreOptions,
  type DownloadPlan,
  type DownloadOptions,
  type PullRequest,
  type StoredModel,
  type StoreUsage,
  type ModelUsage,
  type EvictionReport,
} from './store.js';
export { renderProgressLine, progressBarWriter, formatBytes, RateMeter, RATE_WINDOW_MS, DEFAULT_PROGRESS_INTERVAL_MS, type DownloadProgress, type FileProgress, type FileState } from './progress.js';
export { hubStoreRoot, filePathFor, partPathFor, revisionDir, PART_SUFFIX, INDEX_FILE } from './layout.js';
export { hubSource, RetryableError, type ByteSource, type PartWriter } from './transfer.js';
