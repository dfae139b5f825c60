// The event log's public types (re-exported by store.ts, where callers import them from).

/** What the store needs to know about a record; everything else is opaque, msgpack-serializable data. */
export interface LogRecordBase {
  idx: number;
  term: number;
}

export interface Snapshot<S = unknown> {
  idx: number;
  term: number;
  hash: string;
  state: S;
}

export type LogHealth = { level: 'ok' } | { level: 'degraded'; reason: string; remediation: string };

/** Structurally compatible with a pino Logger. */
export interface LogStoreLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface LogStoreOptions {
  /** Close the active segment once it holds at least this many bytes. Default 16 MiB. */
  maxSegmentBytes?: number;
  /** Gzip closed segments in the background. Default true. */
  compressClosedSegments?: boolean;
  log?: LogStoreLogger;
  /** Called after every fsync of appended log data (observation only: tests count group commits). */
  onFsync?: () => void;
  onHealthChange?: (health: LogHealth) => void;
}

/** What `open` found and repaired. */
export interface RecoveryReport {
  segments: number;
  records: number;
  /** The torn tail cut from the last segment, if any. */
  truncated: { file: string; offset: number; bytes: number; reason: string } | null;
  /** Leftover temporary files (interrupted compressions or snapshot writes) that were deleted. */
  removedFiles: string[];
}
