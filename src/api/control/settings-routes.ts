import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../../common/errors.js';
import { apiKeyDigest } from '../auth.js';
import { parseCorsOrigins } from '../cors.js';
import { fromFastifyError } from '../fastify-errors.js';
import { parseBody } from '../validation.js';
import { ClusterSettings, MAX_SETTINGS_API_KEYS, MAX_SETTINGS_CORS_ORIGINS, SETTINGS_MAX_CONTEXT_TOKENS, SETTINGS_MAX_PARALLEL, type SettingsPatch } from '../../master/state/settings.js';
import { checkAdmin, sendControlError, type AdminToken } from './routes.js';

/** Longest API key the settings take: longer is a paste gone wrong. */
export const SETTINGS_API_KEY_MAX_CHARS = 256;
/** Shortest: a key anyone could guess protects nothing. */
export const SETTINGS_API_KEY_MIN_CHARS = 8;

/** The cluster-wide settings (src/master/state/settings.ts), as the control routes reach them. */
export interface SettingsControl {
  get(): ClusterSettings;
  /** Submits the change through the master (founding a cluster of one first if there is none) and returns the settings after it. */
  set(patch: SettingsPatch): Promise<ClusterSettings>;
}

/**
 * `PUT /settings`: the fields given replace the current ones, the others stay. API keys are given in
 * the clear and replicated as SHA-256 digests: `apiKeys` replaces the cluster's keys, `addApiKeys`
 * and `removeApiKeys` change them one by one.
 */
const ApiKey = z.string().min(SETTINGS_API_KEY_MIN_CHARS).max(SETTINGS_API_KEY_MAX_CHARS).regex(/^\S+$/, 'an API key has no spaces');
export const SettingsBody = z.strictObject({
  apiKeys: z.array(ApiKey).max(MAX_SETTINGS_API_KEYS).optional(),
  addApiKeys: z.array(ApiKey).max(MAX_SETTINGS_API_KEYS).optional(),
  removeApiKeys: z.array(ApiKey).max(MAX_SETTINGS_API_KEYS).optional(),
  corsOrigins: z.array(z.string().max(512)).max(MAX_SETTINGS_CORS_ORIGINS).optional(),
  defaultContextTokens: z.number().int().min(1).max(SETTINGS_MAX_CONTEXT_TOKENS).nullable().optional(),
  defaultParallel: z.number().int().min(1).max(SETTINGS_MAX_PARALLEL).nullable().optional(),
  downloadApprovalBytes: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  /** The cluster-wide tracing switch (`shoal trace on|off`): requests arriving from then on are traced or not. */
  tracing: z.boolean().optional(),
});
export type SettingsBody = z.infer<typeof SettingsBody>;

/** The replicated patch a body asks for, against the settings now. */
export function patchFromBody(body: SettingsBody, current: ClusterSettings): SettingsPatch {
  const patch: SettingsPatch = {};
  if (body.apiKeys !== undefined || body.addApiKeys !== undefined || body.removeApiKeys !== undefined) {
    const keys = new Set(body.apiKeys !== undefined ? body.apiKeys.map(apiKeyDigest) : current.apiKeyDigests);
    for (const key of body.addApiKeys ?? []) keys.add(apiKeyDigest(key));
    for (const key of body.removeApiKeys ?? []) keys.delete(apiKeyDigest(key));
    if (keys.size > MAX_SETTINGS_API_KEYS) throw new ShoalError('BAD_REQUEST', `the cluster holds at most ${MAX_SETTINGS_API_KEYS} API keys: remove some first`, { param: 'addApiKeys' });
    patch.apiKeyDigests = [...keys];
  }
  if (body.corsOrigins !== undefined) patch.corsOrigins = parseCorsOrigins(body.corsOrigins, 'corsOrigins');
  if (body.defaultContextTokens !== undefined) patch.defaultContextTokens = body.defaultContextTokens;
  if (body.defaultParallel !== undefined) patch.defaultParallel = body.defaultParallel;
  if (body.downloadApprovalBytes !== undefined) patch.downloadApprovalBytes = body.downloadApprovalBytes;
  if (body.tracing !== undefined) patch.tracing = body.tracing;
  return patch;
}

/** `GET /settings`, `PUT /settings` and `POST /token/rotate`, behind the admin token and the origin checks like every control route. */
export async function settingsRoutes(app: FastifyInstance, options: { settings: SettingsControl; rotateAdminToken: () => Promise<string>; adminToken: AdminToken }): Promise<void> {
  const { settings } = options;
  app.setErrorHandler((error, _request, reply) => sendControlError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => checkAdmin(request, options.adminToken));
  app.get('/settings', async () => ({ settings: settings.get() }));
  app.put('/settings', async (request) => {
    const patch = patchFromBody(parseBody(SettingsBody, request.body), settings.get());
    return { settings: await settings.set(patch) };
  });
  // The new token answers; the one this request carried stops working with this answer.
  app.post('/token/rotate', async () => ({ token: await options.rotateAdminToken() }));
}
