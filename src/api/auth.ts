import { timingSafeEqual, createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { ShoalError } from '../common/errors.js';

/** The WebSocket subprotocol OpenAI's browser realtime client carries its key in: `openai-insecure-api-key.<key>`. */
export const WEBSOCKET_KEY_PROTOCOL_PREFIX = 'openai-insecure-api-key.';

/**
 * Optional API keys for inference routes. Accepts `Authorization: Bearer <key>` (OpenAI, Ollama),
 * `x-api-key: <key>` (Anthropic) and, on a WebSocket upgrade, the subprotocol
 * `openai-insecure-api-key.<key>`. With no keys configured every caller is let in.
 *
 * Two sources: the node's own keys (`--api-key`, SHOAL_API_KEYS, shoal.toml) and the cluster's,
 * which cluster state holds as SHA-256 digests (read per request, so a change applies at once).
 */
export class ApiKeys {
  private readonly digests: Buffer[];
  private clusterCache: { hex: readonly string[]; digests: Buffer[] } = { hex: [], digests: [] };

  constructor(
    keys: readonly string[],
    private readonly clusterDigests: () => readonly string[] = () => [],
  ) {
    // Comparing fixed-length digests keeps the check constant-time whatever the key lengths.
    this.digests = keys.filter((k) => k !== '').map(digest);
  }

  get enabled(): boolean {
    return this.digests.length > 0 || this.clusterDigests().length > 0;
  }

  /** The node's own keys and the cluster's, as digests; the cluster's are decoded once per change. */
  private all(): Buffer[] {
    const hex = this.clusterDigests();
    if (hex !== this.clusterCache.hex) this.clusterCache = { hex, digests: hex.map((h) => Buffer.from(h, 'hex')) };
    return [...this.digests, ...this.clusterCache.digests];
  }

  /** Throws UNAUTHORIZED unless the request carries a configured key. */
  check(headers: IncomingHttpHeaders): void {
    const known = this.all();
    if (known.length === 0) return;
    const presented = presentedKey(headers);
    if (presented === null) {
      throw new ShoalError('UNAUTHORIZED', 'this node requires an API key: send it as "Authorization: Bearer <key>" or "x-api-key: <key>"');
    }
    const candidate = digest(presented);
    let ok = false;
    for (const digest of known) ok = timingSafeEqual(digest, candidate) || ok;
    if (!ok) throw new ShoalError('UNAUTHORIZED', 'the API key is not valid for this node');
  }
}

/** SHA-256 of a key in hex: how cluster state holds an API key (src/master/state/settings.ts). */
export function apiKeyDigest(key: string): string {
  return digest(key).toString('hex');
}

function digest(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

function presentedKey(headers: IncomingHttpHeaders): string | null {
  const authorization = headers.authorization;
  if (typeof authorization === 'string') {
    const match = /^Bearer\s+(.+)$/i.exec(authorization.trim());
    if (match) return match[1]!;
  }
  const apiKey = headers['x-api-key'];
  if (typeof apiKey === 'string' && apiKey !== '') return apiKey;
  // Browsers cannot set headers on a WebSocket: OpenAI's realtime client offers the key as a subprotocol.
  const protocols = headers['sec-websocket-protocol'];
  if (typeof protocols === 'string') {
    const offered = protocols.split(',').map((p) => p.trim()).find((p) => p.startsWith(WEBSOCKET_KEY_PROTOCOL_PREFIX));
    if (offered !== undefined && offered.length > WEBSOCKET_KEY_PROTOCOL_PREFIX.length) return offered.slice(WEBSOCKET_KEY_PROTOCOL_PREFIX.length);
  }
  return null;
}
