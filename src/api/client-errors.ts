import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { ShoalError } from '../common/errors.js';

/** An API family's error body for a URL it owns, for answers written before fastify has a reply. */
export type ErrorBodyFor = (url: string, error: ShoalError) => unknown;

/** The URL of a request line (`GET /v1/models HTTP/1.1`) at the start of what a client sent. */
function urlOf(raw: unknown): string {
  const line = Buffer.isBuffer(raw) ? raw.subarray(0, 8192).toString('latin1') : '';
  return /^[A-Z]+ (\S+)/.exec(line)?.[1] ?? '/';
}

/**
 * Node's `clientError` (headers too large, a request timed out, unparsable HTTP) answered in the
 * family's error shape, as fastify's own handler would in its shape: the URL decides the family.
 */
export function clientErrorHandler(bodyFor: ErrorBodyFor): (error: Error & { code?: string; rawPacket?: unknown }, socket: Socket) => void {
  return (error, socket) => {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const [status, shoalError] =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, new ShoalError('PAYLOAD_TOO_LARGE', "the request's headers (or its URL) are larger than this node accepts: send fewer or shorter ones")]
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, new ShoalError('BAD_REQUEST', 'the request did not arrive within the time this node allows: send it faster (see docs/LIMITS.md)')]
          : [400, new ShoalError('BAD_REQUEST', 'the request is not valid HTTP')];
    if (socket.writable) {
      const body = JSON.stringify(bodyFor(urlOf(error.rawPacket), shoalError));
      socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`);
    }
    socket.destroy(error);
  };
}
