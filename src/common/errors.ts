/**
 * Expected failures carry a stable `code` that callers branch on and API adapters map to HTTP; the
 * message says what to do about it. Broken invariants use `assert` and crash instead.
 */
export const ERROR_CODES = [
  'BAD_REQUEST',
  'UNAUTHORIZED',
  /** Who asked is known (or needs no key) but may not do this from where it asked, e.g. a web page on another origin. */
  'FORBIDDEN',
  'NOT_FOUND',
  'UNSUPPORTED_PARAMETER',
  'CONTEXT_OVERFLOW',
  'MODEL_NOT_FOUND',
  'CAPABILITY_MISSING',
  'MODEL_LOADING',
  'MODEL_FAILED',
  'QUEUE_FULL',
  'RUNNER_CRASHED',
  /**
   * The hang watchdog ended a request whose engine went silent (no event for the node's stall timeout,
   * plus a prefill allowance before the first token); the engine is killed and restarted like a crash.
   */
  'RUNNER_STALLED',
  'RUNNER_STOPPED',
  /** The node or instance serving a request went away mid-request (node died, instance deleted, link lost). */
  'INSTANCE_LOST',
  /** A model could not be placed (or re-placed); the message carries the planner's typed reason. */
  'PLACEMENT_FAILED',
  'CANCELLED',
  'PAYLOAD_TOO_LARGE',
  /** The event log on disk is damaged in the middle; the message names the file, offset and what to do. */
  'LOG_CORRUPT',
  /** The disk is full (ENOSPC/EDQUOT): the node cannot persist and refuses what would need persisting. */
  'DISK_FULL',
  'INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export class ShoalError extends Error {
  readonly code: ErrorCode;
  /** The request field that caused the failure, when there is one (OpenAI's `param`). */
  readonly param: string | null;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; param?: string | null } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ShoalError';
    this.code = code;
    this.param = options.param ?? null;
  }
}

export function isShoalError(error: unknown): error is ShoalError {
  return error instanceof ShoalError;
}

/**
 * The message of anything thrown, for a log line or a reply: JavaScript can throw any value, and
 * `String()` of an Error would prefix its name.
 */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Turns anything thrown into a ShoalError, keeping the original as `cause`. */
export function toShoalError(error: unknown): ShoalError {
  if (error instanceof ShoalError) return error;
  return new ShoalError('INTERNAL', `internal error: ${errorMessage(error)}`, { cause: error });
}

/** An ENOSPC/EDQUOT from the filesystem as DISK_FULL with what to do; null for any other error. */
export function diskFullError(error: unknown): ShoalError | null {
  const code = (error as { code?: unknown } | null)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return null;
  const path = (error as { path?: unknown }).path;
  const where = typeof path === 'string' ? ` writing ${path}` : '';
  return new ShoalError('DISK_FULL', `the disk is full (${code}${where}): free space on the filesystem holding the data dir, then start the node again`, { cause: error });
}

export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
