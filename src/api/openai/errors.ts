import { assertNever, type ShoalError } from '../../common/errors.js';

/** The one place that maps Shoal's error codes to OpenAI's status codes and error object. */

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null };
}

export interface MappedError {
  status: number;
  body: OpenAIErrorBody;
  headers: Record<string, string>;
}

export function toOpenAIError(error: ShoalError): MappedError {
  const body = (type: string, code: string | null): OpenAIErrorBody => ({
    error: { message: error.message, type, param: error.param, code },
  });
  switch (error.code) {
    case 'BAD_REQUEST':
      return { status: 400, body: body('invalid_request_error', null), headers: {} };
    case 'PLACEMENT_FAILED':
      return { status: 409, body: body('invalid_request_error', 'placement_failed'), headers: {} };
    case 'UNSUPPORTED_PARAMETER':
      return { status: 400, body: body('invalid_request_error', 'unsupported_parameter'), headers: {} };
    case 'CONTEXT_OVERFLOW':
      return { status: 400, body: body('invalid_request_error', 'context_length_exceeded'), headers: {} };
    case 'UNAUTHORIZED':
      return { status: 401, body: body('invalid_request_error', 'invalid_api_key'), headers: {} };
    case 'FORBIDDEN':
      return { status: 403, body: body('invalid_request_error', 'forbidden'), headers: {} };
    case 'NOT_FOUND':
      return { status: 404, body: body('invalid_request_error', 'not_found'), headers: {} };
    case 'CAPABILITY_MISSING':
      return { status: 400, body: body('invalid_request_error', 'model_not_supported'), headers: {} };
    case 'MODEL_NOT_FOUND':
      return { status: 404, body: body('invalid_request_error', 'model_not_found'), headers: {} };
    case 'PAYLOAD_TOO_LARGE':
      return { status: 413, body: body('invalid_request_error', 'request_too_large'), headers: {} };
    case 'QUEUE_FULL':
      return { status: 429, body: body('rate_limit_error', 'queue_full'), headers: { 'retry-after': '1' } };
    case 'MODEL_LOADING':
      return { status: 503, body: body('server_error', 'model_loading'), headers: { 'retry-after': '2' } };
    case 'MODEL_FAILED':
      return { status: 503, body: body('server_error', 'model_failed'), headers: {} };
    case 'RUNNER_CRASHED':
      return { status: 503, body: body('server_error', 'runner_crashed'), headers: { 'retry-after': '1' } };
    case 'RUNNER_STALLED':
      // Gateway Timeout in every family: the engine behind this node stopped answering in time.
      return { status: 504, body: body('server_error', 'runner_stalled'), headers: { 'retry-after': '1' } };
    case 'RUNNER_STOPPED':
      return { status: 503, body: body('server_error', 'instance_stopped'), headers: { 'retry-after': '1' } };
    case 'INSTANCE_LOST':
      return { status: 503, body: body('server_error', 'instance_lost'), headers: { 'retry-after': '1' } };
    case 'CANCELLED':
      // Nobody reads this: the client went away. 499 keeps logs honest.
      return { status: 499, body: body('invalid_request_error', 'cancelled'), headers: {} };
    case 'INTERNAL':
    case 'LOG_CORRUPT':
    case 'DISK_FULL':
      return { status: 500, body: body('server_error', null), headers: {} };
    default:
      return assertNever(error.code, 'error code');
  }
}
