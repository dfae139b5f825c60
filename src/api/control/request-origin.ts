import { isIP } from 'node:net';
import { hostname } from 'node:os';
import type { FastifyRequest } from 'fastify';
import { ShoalError } from '../../common/errors.js';

/**
 * Extra names (comma-separated) tokenless loopback callers may use besides localhost, this machine's
 * host name (and its `.local` mDNS form) and IP literals: a reverse proxy's or a DNS name's.
 */
export const ALLOWED_HOSTS_ENV = 'SHOAL_ALLOWED_HOSTS';
/**
 * A header browsers will not send cross-origin without a CORS preflight (which the node never
 * grants): state-changing control routes need it or a JSON body, so a form post cannot reach them.
 */
export const CONTROL_REQUEST_HEADER = 'x-shoal-client';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The host name of a `Host` header value (no port, no IPv6 brackets, no trailing dot), or null. */
function hostnameOf(host: string): string | null {
  try {
    const url = new URL(`http://${host}`);
    if (url.username || url.password || url.pathname !== '/' || url.search || url.hash) return null;
    return url.hostname.replace(/^\[|\]$/g, '').replace(/\.$/, '').toLowerCase();
  } catch {
    return null;
  }
}

/** The names this node answers to; read per call so the environment is the only configuration. */
function ownNames(): Set<string> {
  const own = hostname().toLowerCase();
  const names = new Set(['localhost', own, `${own}.local`]);
  for (const name of (process.env[ALLOWED_HOSTS_ENV] ?? '').split(',')) {
    const trimmed = name.trim().replace(/\.$/, '').toLowerCase();
    if (trimmed) names.add(trimmed);
  }
  return names;
}

/**
 * Refuses a `Host` that is not this node (DNS rebinding: an IP literal cannot be rebound, a foreign
 * name can); `what` names the routes in the message.
 */
export function checkRequestHost(request: FastifyRequest, what: string): void {
  const host = request.headers.host;
  const name = typeof host === 'string' ? hostnameOf(host) : null;
  if (name === null || (isIP(name) === 0 && !ownNames().has(name))) {
    throw new ShoalError('FORBIDDEN', `${what} answer only to this node's own name or address, not Host '${host ?? ''}': to reach it by that name, add it to ${ALLOWED_HOSTS_ENV}`);
  }
}

/**
 * Refuses what a web page could send: a `Host` that is not this node (DNS rebinding: an IP literal
 * cannot be rebound, a foreign name can), an `Origin` other than the node itself, and a
 * state-changing request a cross-origin form or `fetch` could make without a preflight.
 */
export function checkRequestOrigin(request: FastifyRequest): void {
  checkRequestHost(request, 'control routes');
  const host = request.headers.host;
  const origin = request.headers.origin;
  if (origin !== undefined && !sameOrigin(origin, host!)) {
    throw new ShoalError('FORBIDDEN', `control routes refuse requests from other web origins (Origin '${origin}'): use the node's own dashboard or the CLI`);
  }
  if (!SAFE_METHODS.has(request.method) && request.headers[CONTROL_REQUEST_HEADER] === undefined && !isJson(request.headers['content-type'])) {
    throw new ShoalError('BAD_REQUEST', `state-changing control routes need a JSON body or the '${CONTROL_REQUEST_HEADER}: 1' header (docs/API.md)`);
  }
}

function sameOrigin(origin: string, host: string): boolean {
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.host === new URL(`http://${host}`).host;
  } catch {
    return false;
  }
}

function isJson(contentType: string | undefined): boolean {
  return contentType?.split(';')[0]?.trim().toLowerCase() === 'application/json';
}
