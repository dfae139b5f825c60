import { assertNever, type ShoalError } from '../../common/errors.js';

/** The one place that maps Shoal's error codes to Anthropic's status codes and error object. */

export type AnthropicErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'request_too_large'
  | 'api_error'
  | 'timeout_error'
  | 'overloaded_error';

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: AnthropicErrorType; message: string };
}

export interface MappedError {
  status: number;
  body: AnthropicErrorBody;
  headers: Record<string, string>;
}

/** Anthropic's own status for "temporarily overloaded"; its SDKs retry it like a 5xx. */
export const OVERLOADED_STATUS = 529;

export function toAnthropicError(error: ShoalError): MappedError {
  const mapped = (status: number, type: AnthropicErrorType, headers: Record<string, string> = {}): MappedError => ({
    status,
    body: { type: 'error', error: { type, message: error.message } },
    headers,
  });
  switch (error.code) {
    case 'BAD_REQUEST':
    case 'PLACEMENT_FAILED':
    case 'UNSUPPORTED_PARAMETER':
    case 'CONTEXT_OVERFLOW':
    case 'CAPABILITY_MISSING':
      return mapped(400, 'invalid_request_error');
    case 'UNAUTHORIZED':
      return mapped(401, 'authentication_error');
    case 'FORBIDDEN':
      return mapped(403, 'permission_error');
    case 'NOT_FOUND':
    case 'MODEL_NOT_FOUND':
      return mapped(404, 'not_found_error');
    case 'PAYLOAD_TOO_LARGE':
      return mapped(413, 'request_too_large');
    // A full queue and a loading model are the cluster being busy, not the caller exceeding a quota
    // (rate_limit_error, 429): Anthropic clients treat 529 overloaded_error as "retry shortly".
    case 'QUEUE_FULL':
      return mapped(OVERLOADED_STATUS, 'overloaded_error', { 'retry-after': '1' });
    case 'MODEL_LOADING':
      return mapped(OVERLOADED_STATUS, 'overloaded_error', { 'retry-after': '2' });
    // An instance being stopped is drained capacity; a retry lands on another instance.
    case 'RUNNER_STOPPED':
    case 'INSTANCE_LOST':
      return mapped(OVERLOADED_STATUS, 'overloaded_error', { 'retry-after': '1' });
    case 'RUNNER_CRASHED':
      return mapped(500, 'api_error', { 'retry-after': '1' });
    case 'RUNNER_STALLED':
      // Gateway Timeout in every family (Anthropic's own 504 is timeout_error): the engine stopped answering in time.
      return mapped(504, 'timeout_error', { 'retry-after': '1' });
    case 'MODEL_FAILED':
    case 'INTERNAL':
    case 'LOG_CORRUPT':
    case 'DISK_FULL':
      return mapped(500, 'api_error');
    case 'CANCELLED':
      // Nobody reads this: the client went away. 499 keeps logs honest.
      return mapped(499, 'invalid_request_error');
    default:
      return assertNever(error.code, 'error code');
  }
}
