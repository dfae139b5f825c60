import type { Server } from 'node:http';
import type { Socket } from 'node:net';

/** Time a client has to send its request headers. */
export const HEADERS_TIMEOUT_MS = 30_000;
/**
 * Time a client has to send its whole request, headers and body (Node's `requestTimeout`): it
 * bounds receiving only, so an answer may stream for as long as its generation runs. 4 MiB (the
 * body limit) in 60 s needs about 70 KB/s; 20 MiB (the limit of the routes that take images) about 350 KB/s.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
/** Overrides DEFAULT_REQUEST_TIMEOUT_MS (milliseconds). */
export const REQUEST_TIMEOUT_ENV = 'SHOAL_HTTP_REQUEST_TIMEOUT_MS';
/** How long a kept-alive connection may sit idle between requests before the node closes it. */
export const KEEP_ALIVE_IDLE_TIMEOUT_MS = 30_000;
/** Open connections from one IP address; more are closed as they arrive. */
export const MAX_CONNECTIONS_PER_IP = 256;
/** Overrides MAX_CONNECTIONS_PER_IP (a count). */
export const MAX_CONNECTIONS_PER_IP_ENV = 'SHOAL_HTTP_MAX_CONNECTIONS_PER_IP';
/** Open connections in all; more are closed as they arrive. */
export const MAX_CONNECTIONS = 1024;
/** Overrides MAX_CONNECTIONS (a count). */
export const MAX_CONNECTIONS_ENV = 'SHOAL_HTTP_MAX_CONNECTIONS';
/** How often Node checks connections against the headers and request timeouts (its default is 30 s). */
const TIMEOUT_CHECK_INTERVAL_MS = 1000;

/** A positive integer from the environment variable `name`, else `fallback`. */
function positiveIntEnv(name: string, fallback: number): number {
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value > 0 ? value : fallback;
}

export function requestTimeoutMs(): number {
  return positiveIntEnv(REQUEST_TIMEOUT_ENV, DEFAULT_REQUEST_TIMEOUT_MS);
}

/**
 * Bounds what slow or half-open clients can hold: headers, body and idle time, and connections per
 * IP and in all. Call before the server listens (Node starts its timeout checks on `listening`).
 */
export function limitConnections(server: Server): void {
  const requestMs = requestTimeoutMs();
  server.requestTimeout = requestMs;
  server.headersTimeout = Math.min(HEADERS_TIMEOUT_MS, requestMs);
  server.keepAliveTimeout = KEEP_ALIVE_IDLE_TIMEOUT_MS;
  (server as Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = Math.min(TIMEOUT_CHECK_INTERVAL_MS, requestMs);
  server.maxConnections = positiveIntEnv(MAX_CONNECTIONS_ENV, MAX_CONNECTIONS);
  const maxPerIp = positiveIntEnv(MAX_CONNECTIONS_PER_IP_ENV, MAX_CONNECTIONS_PER_IP);
  const perIp = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const ip = socket.remoteAddress ?? '';
    const open = (perIp.get(ip) ?? 0) + 1;
    if (open > maxPerIp) {
      socket.destroy();
      return;
    }
    perIp.set(ip, open);
    // Node's headers timeout starts at a request's first byte: a client that connects and sends
    // nothing would hold its place for good. bytesRead, not a 'data' listener: the HTTP parser
    // reads the socket's handle directly.
    const silent = setTimeout(() => {
      if (socket.bytesRead === 0) socket.destroy();
    }, server.headersTimeout).unref();
    socket.once('close', () => {
      clearTimeout(silent);
      const left = (perIp.get(ip) ?? 1) - 1;
      if (left === 0) perIp.delete(ip);
      else perIp.set(ip, left);
    });
  });
}
