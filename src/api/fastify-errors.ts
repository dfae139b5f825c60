import { ShoalError, toShoalError } from '../common/errors.js';

interface FastifyLikeError {
  code?: string;
  statusCode?: number;
  message: string;
}

/** Fastify's own failures (body too large, bad JSON, wrong content type) in Shoal's terms. */
export function fromFastifyError(error: unknown): ShoalError {
  if (error instanceof ShoalError) return error;
  const e = error as FastifyLikeError;
  if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new ShoalError('PAYLOAD_TOO_LARGE', `request body is larger than this node's limit: ${e.message}`, { cause: error });
  }
  if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new ShoalError('BAD_REQUEST', 'send the request body as JSON with content-type: application/json', { cause: error });
  }
  if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    return new ShoalError('BAD_REQUEST', `request body is not valid JSON: ${e.message}`, { cause: error });
  }
  return toShoalError(error);
}
