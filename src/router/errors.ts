import { ERROR_CODES, ShoalError, type ErrorCode } from '../common/errors.js';

/**
 * Why a router operation failed. Callers branch on `reason`; `code` is the nearest existing
 * ShoalError code (the router has no codes of its own yet).
 *
 * - `timeout`: the deadline passed before an answer came.
 * - `unreachable`: no connection to the peer could be made.
 * - `refused`: the admission rules said no (the peer is not a member, or we are not one to it).
 * - `reset`: the remote reset the stream (its admission refused us, or its handler died).
 * - `frame_too_large`: a frame over the byte limit, in either direction.
 * - `protocol_error`: bytes that are not a valid frame, or a frame that fails its schema.
 * - `remote_error`: the remote handler answered with an error (its code is kept).
 * - `closed`: the stream or router closed before the exchange finished.
 * - `aborted`: the caller's signal aborted.
 * - `no_handler`: nothing handles this protocol (self short-circuit) or the remote does not speak it.
 */
export type RouterFailure =
  | 'timeout'
  | 'unreachable'
  | 'refused'
  | 'reset'
  | 'frame_too_large'
  | 'protocol_error'
  | 'remote_error'
  | 'closed'
  | 'aborted'
  | 'no_handler';

const CODE_FOR: Record<RouterFailure, ErrorCode> = {
  timeout: 'INTERNAL',
  unreachable: 'INTERNAL',
  refused: 'UNAUTHORIZED',
  reset: 'INTERNAL',
  frame_too_large: 'PAYLOAD_TOO_LARGE',
  protocol_error: 'BAD_REQUEST',
  remote_error: 'INTERNAL',
  closed: 'INTERNAL',
  aborted: 'CANCELLED',
  no_handler: 'NOT_FOUND',
};

export class RouterError extends ShoalError {
  readonly reason: RouterFailure;

  constructor(reason: RouterFailure, message: string, options: { cause?: unknown; code?: ErrorCode } = {}) {
    super(options.code ?? CODE_FOR[reason], message, options.cause === undefined ? {} : { cause: options.cause });
    this.name = 'RouterError';
    this.reason = reason;
  }
}

export function isRouterError(error: unknown): error is RouterError {
  return error instanceof RouterError;
}

/** A remote error code is only trusted when it is one we know. */
export function knownErrorCode(code: unknown): ErrorCode {
  return typeof code === 'string' && (ERROR_CODES as readonly string[]).includes(code) ? (code as ErrorCode) : 'INTERNAL';
}

export function errorOf(error: unknown): Error {
  return error instanceof Error ? error : new Error(String(error));
}
