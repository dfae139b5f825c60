// The hub as the models service uses it: the configured endpoint, and hub requests with a deadline
// whose failures say what to do.

import type { ShoalError } from '../../common/errors.js';
import { resolveHubOptions, type HubOptions } from '../hub/endpoint.js';
import { friendlyHubError, hubUnreachable } from './failures.js';

/** Hub requests of one search or add must finish within this, or the hub counts as unreachable. */
export const HUB_REQUEST_TIMEOUT_MS = 20_000;

export class HubAccess {
  /** `configured`: the hub base URL as configured (SHOAL_HF_ENDPOINT / HF_ENDPOINT); checked when first used. */
  constructor(readonly configured: string | undefined) {}

  /** The hub endpoint this node uses (throws INVALID_NAME when the configured one is not a URL). */
  endpoint(): string {
    return resolveHubOptions(this.options()).endpoint;
  }

  /** The hub endpoint for display, even when the configured one does not parse (the download then fails saying so). */
  endpointOrConfigured(): string {
    try {
      return this.endpoint();
    } catch {
      return this.configured ?? 'the configured hub';
    }
  }

  /** The configured endpoint as hub options (empty for the default). */
  options(): HubOptions {
    return this.configured === undefined ? {} : { endpoint: this.configured };
  }

  /** Runs hub requests with a deadline; a deadline passed or a network failure says the hub cannot be reached. */
  async withHub<T>(fn: (hub: HubOptions) => Promise<T>): Promise<T> {
    const endpoint = this.endpoint();
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new Error('timeout'));
    }, HUB_REQUEST_TIMEOUT_MS);
    try {
      return await fn({ endpoint, signal: controller.signal });
    } catch (error) {
      if (timedOut) throw hubUnreachable(endpoint, `no answer within ${HUB_REQUEST_TIMEOUT_MS / 1000} s`, error);
      throw this.friendly(error);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Rewords a hub failure for an operator: an unreachable hub names the endpoint and what to do. */
  friendly(error: unknown): ShoalError {
    return friendlyHubError(error, this.configured);
  }
}
