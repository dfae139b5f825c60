import { HubApiError, InvalidApiResponseFormatError } from '@huggingface/hub';
import { ModelsError, cancelledError } from './errors.js';
import type { ShoalError } from '../../common/errors.js';

export const DEFAULT_HF_ENDPOINT = 'https://huggingface.co';

/** How to reach a Hugging Face hub (or a server that speaks its API). */
export interface HubOptions {
  /** Base URL; default from hubEndpoint(). */
  endpoint?: string;
  /** A token (`hf_...`) for gated or private repos; default $SHOAL_HF_TOKEN, then $HF_TOKEN. */
  accessToken?: string;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  signal?: AbortSignal;
}

/** HubOptions with defaults applied. */
export interface ResolvedHubOptions {
  endpoint: string;
  accessToken: string | undefined;
  /** Fetch with `signal` attached to every request. */
  fetch: typeof fetch;
  signal: AbortSignal | undefined;
}

/** The hub base URL: $SHOAL_HF_ENDPOINT, then $HF_ENDPOINT, then https://huggingface.co; no trailing slash. */
export function hubEndpoint(env: NodeJS.ProcessEnv = process.env): string {
  const raw = [env.SHOAL_HF_ENDPOINT, env.HF_ENDPOINT].find((v) => v !== undefined && v.trim() !== '') ?? DEFAULT_HF_ENDPOINT;
  return normalizeEndpoint(raw);
}

export function normalizeEndpoint(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ModelsError('INVALID_NAME', `hub endpoint "${raw}" is not a URL: set SHOAL_HF_ENDPOINT to e.g. https://huggingface.co`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ModelsError('INVALID_NAME', `hub endpoint "${raw}" must be http or https`);
  }
  return url.href.replace(/\/+$/, '');
}

export function resolveHubOptions(opts: HubOptions = {}, env: NodeJS.ProcessEnv = process.env): ResolvedHubOptions {
  const endpoint = opts.endpoint !== undefined ? normalizeEndpoint(opts.endpoint) : hubEndpoint(env);
  const token = opts.accessToken ?? ([env.SHOAL_HF_TOKEN, env.HF_TOKEN].find((v) => v !== undefined && v !== '') || undefined);
  if (token !== undefined && !token.startsWith('hf_')) {
    throw new ModelsError('HUB_AUTH_REQUIRED', 'the Hugging Face token must start with "hf_": check SHOAL_HF_TOKEN / HF_TOKEN');
  }
  const base = opts.fetch ?? globalThis.fetch;
  const signal = opts.signal;
  const wrapped: typeof fetch = signal ? (input, init) => base(input, { ...init, signal: mergeSignals(signal, init?.signal ?? undefined) }) : base;
  return { endpoint, accessToken: token, fetch: wrapped, signal };
}

export function mergeSignals(a: AbortSignal, b: AbortSignal | undefined): AbortSignal {
  return b ? AbortSignal.any([a, b]) : a;
}

const REPO_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;

/** Checks a repo id (`owner/name`), as the hub allows them; throws INVALID_NAME otherwise. */
export function checkRepoId(repo: string): string {
  if (!REPO_RE.test(repo) || repo.includes('..') || repo.endsWith('.git')) {
    throw new ModelsError('INVALID_NAME', `"${repo}" is not a Hugging Face repo id: write it as owner/name`);
  }
  return repo;
}

function causeText(error: unknown): string {
  const parts: string[] = [];
  let e: unknown = error;
  for (let depth = 0; e && depth < 4; depth += 1) {
    if (e instanceof Error) {
      const code = (e as { code?: unknown }).code;
      parts.push(typeof code === 'string' ? `${e.message} (${code})` : e.message);
      e = e.cause;
    } else {
      parts.push(String(e));
      break;
    }
  }
  return parts.join(': ');
}

/** Is this a network-level failure (worth a retry) rather than an answer from the hub? */
export function isNetworkError(error: unknown): boolean {
  if (error instanceof HubApiError) return error.statusCode >= 500 || error.statusCode === 429 || error.statusCode === 408;
  // WebBlob.stream() aborts its stream with the error's message only: an HTTP 4xx there is an answer.
  if (typeof error === 'string') return !/status 4(?!08|29)\d\d/.test(error);
  if (error instanceof TypeError) return true; // undici: "fetch failed", "terminated"
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^(ECONNRESET|ECONNREFUSED|EPIPE|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|UND_ERR_\w+)$/.test(code);
}

/**
 * Turns what the @huggingface/hub client throws into a ModelsError that says what to do; `what`
 * names the thing asked for (`repo owner/name`, `file x.gguf of owner/name@rev`).
 */
export function hubError(error: unknown, hub: ResolvedHubOptions, what: string, notFound: 'REPO_NOT_FOUND' | 'REVISION_NOT_FOUND' | 'FILE_NOT_FOUND' = 'REPO_NOT_FOUND'): ShoalError {
  if (error instanceof ModelsError) return error;
  if (hub.signal?.aborted) return cancelledError(what, error);
  if (error instanceof HubApiError) {
    const details = { status: error.statusCode, url: error.url, endpoint: hub.endpoint };
    if (error.statusCode === 404) {
      return new ModelsError(notFound, `${what} not found on ${hub.endpoint}`, { cause: error, details });
    }
    if (error.statusCode === 401 || error.statusCode === 403) {
      return new ModelsError('HUB_AUTH_REQUIRED', `${what} needs access on ${hub.endpoint} (HTTP ${error.statusCode}): accept its terms on the hub and set HF_TOKEN to a token that can read it`, { cause: error, details });
    }
    return new ModelsError('HUB_BAD_RESPONSE', `${hub.endpoint} answered HTTP ${error.statusCode} for ${what}: ${error.message}`, { cause: error, details });
  }
  if (error instanceof InvalidApiResponseFormatError) {
    return new ModelsError('HUB_BAD_RESPONSE', `${hub.endpoint} sent an unusable answer for ${what}: ${error.message}`, { cause: error });
  }
  if (isNetworkError(error)) {
    return new ModelsError('HUB_UNREACHABLE', `cannot reach the hub at ${hub.endpoint} for ${what}: ${causeText(error)}; check the network, or set SHOAL_HF_ENDPOINT to a mirror`, { cause: error, details: { endpoint: hub.endpoint } });
  }
  if (error instanceof SyntaxError) {
    return new ModelsError('HUB_BAD_RESPONSE', `${hub.endpoint} sent invalid JSON for ${what}: ${error.message}`, { cause: error });
  }
  return new ModelsError('HUB_BAD_RESPONSE', `unexpected failure asking ${hub.endpoint} for ${what}: ${causeText(error)}`, { cause: error });
}
