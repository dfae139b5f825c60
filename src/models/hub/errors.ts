import { ShoalError, type ErrorCode } from '../../common/errors.js';

/**
 * Why a hub or store operation failed, finer than the ShoalError `code`. Each reason maps onto an
 * existing code for now; the codes proposed for `ERROR_CODES` are the reasons themselves where the
 * mapping is not an identity (see MODELS_ERROR_CODE).
 */
export const MODELS_ERROR_CODE = {
  /** The hub endpoint could not be reached (DNS, refused, reset, TLS). */
  HUB_UNREACHABLE: 'INTERNAL',
  /** The hub answered 401/403: the repo is gated or private and needs HF_TOKEN. */
  HUB_AUTH_REQUIRED: 'BAD_REQUEST',
  /** The hub answered something this client cannot use (5xx, malformed, inconsistent). */
  HUB_BAD_RESPONSE: 'INTERNAL',
  /** The repo, revision or file does not exist on the hub. */
  REPO_NOT_FOUND: 'NOT_FOUND',
  REVISION_NOT_FOUND: 'NOT_FOUND',
  FILE_NOT_FOUND: 'NOT_FOUND',
  /** The repo has no GGUF file, or none matching the requested quantization. */
  NO_GGUF: 'NOT_FOUND',
  /** Downloaded bytes do not hash to what the hub lists; the part file was deleted. */
  CHECKSUM_MISMATCH: 'INTERNAL',
  /** The transfer failed after its retries (network cut, short body); the part file is kept. */
  DOWNLOAD_FAILED: 'INTERNAL',
  /** A member asked for its copy of a model refused, no longer had it, or sent what it should not. */
  PEER_COPY_FAILED: 'INTERNAL',
  /** Not enough free disk (after the reserve and eviction) for the bytes still needed. */
  INSUFFICIENT_DISK: 'DISK_FULL',
  /** The model is loaded or downloading and cannot be removed now. */
  MODEL_IN_USE: 'BAD_REQUEST',
  /** A repo, revision or file name that is not safe or not valid. */
  INVALID_NAME: 'BAD_REQUEST',
} as const satisfies Record<string, ErrorCode>;

export type ModelsErrorReason = keyof typeof MODELS_ERROR_CODE;

export class ModelsError extends ShoalError {
  readonly reason: ModelsErrorReason;
  /** Numbers and names behind the failure (bytes needed/free, expected/actual hashes...). */
  readonly details: Readonly<Record<string, unknown>>;

  constructor(reason: ModelsErrorReason, message: string, options: { cause?: unknown; details?: Record<string, unknown> } = {}) {
    super(MODELS_ERROR_CODE[reason], message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'ModelsError';
    this.reason = reason;
    this.details = options.details ?? {};
  }
}

export function isModelsError(error: unknown, reason?: ModelsErrorReason): error is ModelsError {
  return error instanceof ModelsError && (reason === undefined || error.reason === reason);
}

export function cancelledError(what: string, cause?: unknown): ShoalError {
  return new ShoalError('CANCELLED', `${what} was cancelled`, cause === undefined ? {} : { cause });
}
