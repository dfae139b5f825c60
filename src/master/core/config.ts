/** Timings and sizes of one node's control plane. Times are of the injected monotonic clock. */
export interface CoreConfig {
  /** Every node publishes a heartbeat this often. */
  heartbeatIntervalMs: number;
  /** A follower that has not heard its master for this long (or lost its connection) starts an election. */
  masterTimeoutMs: number;
  /**
   * A gap this long between two ticks means this process itself was stopped (SIGSTOP, a sleeping
   * laptop, a long pause): the silence was ours, so peers are not judged by it and no election starts
   * until the master had a fair chance to be heard again.
   */
  stallThresholdMs: number;
  /** A member not heard from for this long is suspect (health only). */
  suspectAfterMs: number;
  /** A member not heard from for this long is pruned by the master (NodeTimedOut). */
  pruneAfterMs: number;
  /** A candidate that sent `election` claims the term if no higher-ranked node answers `alive` within this. */
  electionAnswerTimeoutMs: number;
  /** After an `alive`, a candidate waits this long for a coordinator before starting over. */
  coordinatorTimeoutMs: number;
  /** A new master waits at most this long for status replies before reconciling. */
  reconcileWindowMs: number;
  /** A new master starts its term after this long even if reconciliation has not finished. */
  reconcileTimeoutMs: number;
  /** A sync request with no page back by then is sent again. */
  syncRequestTimeoutMs: number;
  /** A command (or re-proposal) without an ack is sent again this often. */
  commandRetryMs: number;
  /** A local command without a decision is answered TIMEOUT after this (its fate is then unknown). */
  commandTimeoutMs: number;
  /** The master pushes a just-admitted node its first snapshot this often... */
  joinPushIntervalMs: number;
  /** ...until it hears the node's heartbeat or this long has passed. */
  joinPushTimeoutMs: number;
  /** A master that removed itself (or dissolved the cluster) serves this long at most before it leaves. */
  departGraceMs: number;
  /** A follower that outranks its master takes over at most this often. */
  takeoverBackoffMs: number;
  /** Records per sync page. */
  syncPageRecords: number;
  /** A requester further behind than this many records gets a snapshot instead of pages. */
  syncSnapshotLagRecords: number;
  /** A checkpoint is written when this many records beyond retainRecords pile up after the last one. */
  snapshotEveryRecords: number;
  /** Records kept after a checkpoint, so slightly-behind nodes catch up with records. */
  retainRecords: number;
}

export const DEFAULT_CORE_CONFIG: Readonly<CoreConfig> = Object.freeze({
  heartbeatIntervalMs: 2_000,
  masterTimeoutMs: 3_000,
  stallThresholdMs: 2_000,
  suspectAfterMs: 10_000,
  pruneAfterMs: 30_000,
  electionAnswerTimeoutMs: 1_000,
  coordinatorTimeoutMs: 5_000,
  reconcileWindowMs: 500,
  reconcileTimeoutMs: 2_000,
  syncRequestTimeoutMs: 2_000,
  commandRetryMs: 2_000,
  commandTimeoutMs: 30_000,
  joinPushIntervalMs: 2_000,
  joinPushTimeoutMs: 60_000,
  departGraceMs: 5_000,
  takeoverBackoffMs: 5_000,
  syncPageRecords: 512,
  syncSnapshotLagRecords: 4_096,
  snapshotEveryRecords: 1_000,
  retainRecords: 1_000,
});
