// Cluster-wide settings as replicated state: every member applies the same SettingsChanged events, so
// every member enforces the same API keys and origins and places with the same defaults.

import { z } from 'zod';

/** Most API keys the cluster accepts at once (besides each node's own `--api-key`). */
export const MAX_SETTINGS_API_KEYS = 32;
/** Most browser origins the cluster lets call the inference API (besides loopback ones and `--cors-origin`). */
export const MAX_SETTINGS_CORS_ORIGINS = 32;
export const CORS_ORIGIN_MAX_CHARS = 256;
/** Downloads a placement starts on other members above this many bytes wait for approval, unless set. */
export const DEFAULT_DOWNLOAD_APPROVAL_BYTES = 4 * 2 ** 30;
/** Largest context per slot a cluster default may name (the runner's own cap, src/worker/runner/protocol.ts). */
export const SETTINGS_MAX_CONTEXT_TOKENS = 1_048_576;
/** Largest slot count a cluster default may name (the runner's own cap). */
export const SETTINGS_MAX_PARALLEL = 256;

/** A SHA-256 digest in hex: keys are replicated as digests, so the log, snapshots and `GET /state` never hold one. */
export const ApiKeyDigest = z.string().regex(/^[0-9a-f]{64}$/, 'an API key digest is 64 lowercase hex characters (SHA-256)');

/** `*`, or an http(s) origin: scheme, host and an optional port, nothing after it. */
export const CorsOrigin = z
  .string()
  .max(CORS_ORIGIN_MAX_CHARS)
  .refine((value) => value === '*' || normalizeOrigin(value) === value, 'an origin is * or scheme://host[:port] (http or https, lowercase, no path), such as https://app.example.com');

export const ClusterSettings = z.strictObject({
  /** SHA-256 (hex) of each API key inference routes accept on every member. */
  apiKeyDigests: z.array(ApiKeyDigest).max(MAX_SETTINGS_API_KEYS),
  /** Browser origins allowed to call inference routes on every member; `*` allows any. */
  corsOrigins: z.array(CorsOrigin).max(MAX_SETTINGS_CORS_ORIGINS),
  /** Context per slot for a placement whose request and card set none; null: the planner's default and fit. */
  defaultContextTokens: z.number().int().min(1).max(SETTINGS_MAX_CONTEXT_TOKENS).nullable(),
  /** Slots for a placement whose request and card set none; null: as many as fit (up to the planner's cap). */
  defaultParallel: z.number().int().min(1).max(SETTINGS_MAX_PARALLEL).nullable(),
  /** Downloads a placement would start on other members above this size wait for approval; 0: always ask. */
  downloadApprovalBytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  /** Record per-request traces (src/tracing/) for requests arriving from now on; off by default. Settings from before it existed read as off. */
  tracing: z.boolean().default(false),
});
export type ClusterSettings = z.infer<typeof ClusterSettings>;

/**
 * A change to some settings: the fields it names replace the current values, the others stay.
 * `tracing` is redeclared without its default, which zod would otherwise fill into every patch.
 */
export const SettingsPatch = ClusterSettings.extend({ tracing: z.boolean() }).partial();
export type SettingsPatch = z.infer<typeof SettingsPatch>;

export function defaultSettings(): ClusterSettings {
  return { apiKeyDigests: [], corsOrigins: [], defaultContextTokens: null, defaultParallel: null, downloadApprovalBytes: DEFAULT_DOWNLOAD_APPROVAL_BYTES, tracing: false };
}

/** The settings after `patch`; lists are kept sorted and without repeats, so equal settings hash equally. */
export function patchSettings(current: ClusterSettings, patch: SettingsPatch): ClusterSettings {
  const next = { ...current, ...patch };
  return { ...next, apiKeyDigests: [...new Set(next.apiKeyDigests)].sort(), corsOrigins: [...new Set(next.corsOrigins)].sort() };
}

export function isDefaultSettings(settings: ClusterSettings): boolean {
  const base = defaultSettings();
  return (
    settings.apiKeyDigests.length === 0 &&
    settings.corsOrigins.length === 0 &&
    settings.defaultContextTokens === base.defaultContextTokens &&
    settings.defaultParallel === base.defaultParallel &&
    settings.downloadApprovalBytes === base.downloadApprovalBytes &&
    settings.tracing === base.tracing
  );
}

/** `value` as a browser writes it in `Origin` (`https://a.example:8443`: lowercase, no default port, no `/`), or null when it is no http(s) origin. */
export function normalizeOrigin(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) return null;
  return url.origin;
}
