import { assertNever, ERROR_CODES, ShoalError, type ErrorCode } from '../../common/errors.js';
import { ClusterRemoveError } from '../../models/cluster-remove-error.js';
import { MODELS_ERROR_CODE, ModelsError, type ModelsErrorReason } from '../../models/hub/errors.js';
import type { FailureView } from '../../models/views.js';
import { modelsStatus } from '../control/models-routes.js';

/** The one place that maps Shoal's error codes to Ollama's status codes and `{error}` body. */

export interface OllamaErrorBody {
  error: string;
}

export interface MappedOllamaError {
  status: number;
  body: OllamaErrorBody;
  headers: Record<string, string>;
}

export function toOllamaError(error: ShoalError): MappedOllamaError {
  const mapped = (status: number, headers: Record<string, string> = {}): MappedOllamaError => ({ status, body: { error: error.message }, headers });
  // Pull and delete failures keep the statuses of the /models routes: the hub's 502, a full disk's 507, a model in use 409.
  if (error instanceof ModelsError || (error instanceof ClusterRemoveError && error.reason !== null)) return mapped(modelsStatus(error));
  switch (error.code) {
    case 'BAD_REQUEST':
    case 'PLACEMENT_FAILED':
    case 'UNSUPPORTED_PARAMETER':
    case 'CONTEXT_OVERFLOW':
    case 'CAPABILITY_MISSING':
      return mapped(400);
    case 'UNAUTHORIZED':
      return mapped(401);
    case 'FORBIDDEN':
      return mapped(403);
    case 'NOT_FOUND':
    case 'MODEL_NOT_FOUND':
      return mapped(404);
    case 'PAYLOAD_TOO_LARGE':
      return mapped(413);
    case 'QUEUE_FULL':
      return mapped(429, { 'retry-after': '1' });
    case 'MODEL_LOADING':
      return mapped(503, { 'retry-after': '2' });
    case 'MODEL_FAILED':
      return mapped(503);
    case 'RUNNER_CRASHED':
    case 'RUNNER_STOPPED':
    case 'INSTANCE_LOST':
      return mapped(503, { 'retry-after': '1' });
    case 'RUNNER_STALLED':
      // Gateway Timeout in every family: the engine behind this node stopped answering in time.
      return mapped(504, { 'retry-after': '1' });
    case 'CANCELLED':
      // Nobody reads this: the client went away. 499 keeps logs honest.
      return mapped(499);
    case 'INTERNAL':
    case 'LOG_CORRUPT':
    case 'DISK_FULL':
      return mapped(500);
    default:
      return assertNever(error.code, 'error code');
  }
}

/** A failed download's error as the models service reported it, typed again so it maps like a thrown one. */
export function downloadFailure(failure: FailureView | null, what: string): ShoalError {
  if (failure === null) return new ShoalError('INTERNAL', `${what} failed without a reason`);
  if (failure.reason !== null && Object.hasOwn(MODELS_ERROR_CODE, failure.reason)) return new ModelsError(failure.reason as ModelsErrorReason, failure.message);
  const code = (ERROR_CODES as readonly string[]).includes(failure.code) ? (failure.code as ErrorCode) : 'INTERNAL';
  return new ShoalError(code, failure.message);
}
