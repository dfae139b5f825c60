import { isAbsolute } from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../../common/errors.js';
import { ClusterRemoveError } from '../../models/cluster-remove-error.js';
import { ModelsError, type ModelsErrorReason } from '../../models/hub/errors.js';
import { fromFastifyError } from '../fastify-errors.js';
import { parseBody } from '../validation.js';
import { controlStatus } from './errors.js';
import type { ModelsControl } from './models-port.js';
import { checkAdmin, type AdminToken } from './routes.js';

export interface ModelsRoutesOptions {
  models: ModelsControl;
  /** This start's admin token; callers not on loopback must present it (as for the control routes). */
  adminToken: AdminToken;
}

/** HTTP status per models failure: the hub's failures are a bad gateway, a full disk 507, a busy model 409. */
const REASON_STATUS: Record<ModelsErrorReason, number> = {
  HUB_UNREACHABLE: 502,
  HUB_BAD_RESPONSE: 502,
  HUB_AUTH_REQUIRED: 403,
  REPO_NOT_FOUND: 404,
  REVISION_NOT_FOUND: 404,
  FILE_NOT_FOUND: 404,
  NO_GGUF: 404,
  CHECKSUM_MISMATCH: 502,
  DOWNLOAD_FAILED: 502,
  PEER_COPY_FAILED: 502,
  INSUFFICIENT_DISK: 507,
  MODEL_IN_USE: 409,
  INVALID_NAME: 400,
};

/** The models reason of a failure: a ModelsError's own, or that of why a cluster-wide removal removed nothing. */
function reasonOf(error: ShoalError): ModelsErrorReason | null {
  if (error instanceof ModelsError) return error.reason;
  if (error instanceof ClusterRemoveError) return error.reason;
  return null;
}

export function modelsStatus(error: ShoalError): number {
  const reason = reasonOf(error);
  return reason !== null ? REASON_STATUS[reason] : controlStatus(error);
}

/**
 * `{error: {code, message}}` like every control route, plus `reason` for a models failure, `nodes`
 * (what each member did) for a cluster-wide removal, and any `extra` fields.
 */
export function sendModelsError(reply: FastifyReply, error: ShoalError, status?: number, extra: Record<string, unknown> = {}): FastifyReply {
  const code = status ?? modelsStatus(error);
  const reason = reasonOf(error);
  if (code >= 500 && reason === null) reply.log.error({ err: error.cause ?? error }, error.message);
  const nodes = error instanceof ClusterRemoveError ? { nodes: error.nodes } : {};
  return reply.code(code).send({ error: { code: error.code, message: error.message, ...(reason !== null ? { reason } : {}), ...nodes, ...extra } });
}

const SearchQuery = z.strictObject({
  q: z.string({ error: "give the search as ?q=<model name, owner/repo or GGUF file name>" }).min(1, 'the search query is empty').max(500),
  limit: z.coerce.number().int().min(1).max(100).optional(),
});
const AddBody = z.strictObject({
  repo: z.string().min(1).max(1000),
  file: z.string().min(1).max(1000).optional(),
  quant: z.string().min(1).max(200).optional(),
  revision: z.string().min(1).max(200).optional(),
  pull: z.boolean().optional(),
  projector: z.union([z.string().min(1).max(1000), z.literal(false)]).optional(),
});
const AddFileBody = z.strictObject({
  path: z
    .string()
    .min(1)
    .max(4096)
    .refine((p) => isAbsolute(p), 'give the absolute path of the .gguf file on the node\'s machine'),
  projector: z
    .string()
    .min(1)
    .max(4096)
    .refine((p) => isAbsolute(p), 'give the absolute path of the projector .gguf file on the node\'s machine')
    .optional(),
});
const PullBody = z.strictObject({ id: z.string().min(1).max(200) });
const DeleteQuery = z.strictObject({ local: z.enum(['0', '1', 'true', 'false']).optional() });

/** The model id of a `/models/<id>` URL (ids hold `/` and `:`; a client may also send them percent-encoded). */
function idParam(request: FastifyRequest): string {
  const raw = (request.params as Record<string, string | undefined>)['*'] ?? '';
  let id = raw;
  try {
    id = decodeURIComponent(raw);
  } catch {
    // Already decoded, with a literal '%'.
  }
  if (id === '') throw new ShoalError('BAD_REQUEST', 'name the model: /models/<id>');
  return id;
}

/** Models on disk: hub search, cards, downloads with progress, removal, and the storage report. */
export async function modelsRoutes(app: FastifyInstance, options: ModelsRoutesOptions): Promise<void> {
  const { models } = options;
  app.setErrorHandler((error, _request, reply) => sendModelsError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => checkAdmin(request, options.adminToken));

  app.get('/models', async () => models.list());
  app.get('/models/search', async (request) => {
    const query = parseBody(SearchQuery, request.query ?? {});
    return models.search(query.q, query.limit);
  });
  app.post('/models/add', async (request, reply) => {
    const result = await models.add(parseBody(AddBody, request.body));
    return reply.code(result.created ? 201 : 200).send(result);
  });
  app.post('/models/add-file', async (request, reply) => {
    const result = await models.addFile(parseBody(AddFileBody, request.body));
    return reply.code(result.created ? 201 : 200).send(result);
  });
  app.post('/models/pull', async (request, reply) => {
    const { download, joined, draft } = await models.pull(parseBody(PullBody, request.body).id);
    return reply.code(202).send({ download, joined, ...(draft !== undefined ? { draft } : {}) });
  });
  app.get('/models/downloads', async () => models.listDownloads());
  app.get('/models/downloads/:id', async (request) => ({ download: models.getDownload((request.params as { id: string }).id) }));
  app.delete('/models/downloads/:id', async (request) => ({ download: await models.cancel((request.params as { id: string }).id) }));
  app.get('/models/*', async (request) => models.get(idParam(request)));
  // Every member that holds the model removes it; `nodes` says what each did (also in the error body when
  // none did). `?local=1`: this node only, as a node outside any cluster does.
  app.delete('/models/*', async (request) => {
    const { local } = parseBody(DeleteQuery, request.query ?? {});
    if (local === '1' || local === 'true') return models.remove(idParam(request));
    return models.removeEverywhere(idParam(request));
  });
  app.get('/store/storage', async () => models.storage());
}
