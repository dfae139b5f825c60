import { assertNever, type ShoalError } from '../../common/errors.js';

/** Shoal's own control API answers errors as `{error: {code, message}}`; this is the one status mapping. */
export function controlStatus(error: ShoalError): number {
  switch (error.code) {
    case 'BAD_REQUEST':
    case 'UNSUPPORTED_PARAMETER':
    case 'CONTEXT_OVERFLOW':
    case 'CAPABILITY_MISSING':
      return 400;
    case 'UNAUTHORIZED':
      return 401;
    case 'FORBIDDEN':
      return 403;
    case 'NOT_FOUND':
    case 'MODEL_NOT_FOUND':
      return 404;
    case 'PAYLOAD_TOO_LARGE':
      return 413;
    case 'QUEUE_FULL':
      return 429;
    case 'CANCELLED':
      return 499;
    case 'INTERNAL':
    case 'RUNNER_CRASHED':
    case 'LOG_CORRUPT':
      return 500;
    case 'RUNNER_STALLED':
      // Gateway Timeout in every family: the engine behind this node stopped answering in time.
      return 504;
    case 'DISK_FULL':
      // Insufficient Storage: the node cannot persist the decision it was asked for.
      return 507;
    case 'MODEL_LOADING':
    case 'MODEL_FAILED':
    case 'RUNNER_STOPPED':
    case 'INSTANCE_LOST':
      return 503;
    case 'PLACEMENT_FAILED':
      return 409;
    default:
      return assertNever(error.code, 'error code');
  }
}

export function controlErrorBody(error: ShoalError): { error: { code: string; message: string } } {
  return { error: { code: error.code, message: error.message } };
}
