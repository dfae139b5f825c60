import { assertNever, type ShoalError } from '../../common/errors.js';

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
  switch (error.code) {
    case 'BAD_REQUEST':
    case 'PLACEMENT_FAILED':
    case 'UNSUPPORTED_PARAMETER':
    case 'CONTEXT_OVERFLOW':
    case 'CAPABILITY_MISSING':
      return mapped(400);
    case 'UNAUTHORIZED':
      return mapped(401);
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
