import { timingSafeEqual, createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { ShoalError } from '../common/errors.js';

/**
 * Optional API keys for inference routes. Accepts `Authorization: Bearer <key>` (OpenAI, Ollama)
 * and `x-api-key: <key>` (Anthropic). With no keys configured every caller is let in.
 */
export class ApiKeys {
  private readonly digests: Buffer[];

  constructor(keys: readonly string[]) {
    // Comparing fixed-length digests keeps the check constant-time whatever the key lengths.
    this.digests = keys.filter((k) => k !== '').map(digest);
  }

  get enabled(): boolean {
    return this.digests.length > 0;
  }

  /** Throws UNAUTHORIZED unless the request carries a configured key. */
  check(headers: IncomingHttpHeaders): void {
    if (!this.enabled) return;
    const presented = presentedKey(headers);
    if (presented === null) {
      throw new ShoalError('UNAUTHORIZED', 'this node requires an API key: send it as "Authorization: Bearer <key>" or "x-api-key: <key>"');
    }
    const candidate = digest(presented);
    let ok = false;
    for (const known of this.digests) ok = timingSafeEqual(known, candidate) || ok;
    if (!ok) throw new ShoalError('UNAUTHORIZED', 'the API key is not valid for this node');
  }
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
  return null;
}
