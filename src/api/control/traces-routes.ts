import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../../common/errors.js';
import { fromFastifyError } from '../fastify-errors.js';
import { checkAdmin, sendControlError, type AdminToken } from './routes.js';
import type { TracesControl } from './traces-port.js';

/** Summaries `GET /traces` returns unless `?limit=` says otherwise. */
export const DEFAULT_TRACES_LIMIT = 100;
/** Most summaries one `GET /traces` returns. */
export const MAX_TRACES_LIMIT = 1000;

const ListQuery = z.strictObject({ limit: z.coerce.number().int().min(1).max(MAX_TRACES_LIMIT).optional() });

/** `GET /traces` (summaries, newest first) and `GET /traces/:id` (one whole trace), behind the admin token like every control route. */
export async function tracesRoutes(app: FastifyInstance, options: { traces: TracesControl; adminToken: AdminToken }): Promise<void> {
  const { traces } = options;
  app.setErrorHandler((error, _request, reply) => sendControlError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => checkAdmin(request, options.adminToken));
  app.get('/traces', async (request) => {
    const query = ListQuery.safeParse(request.query ?? {});
    if (!query.success) throw new ShoalError('BAD_REQUEST', `'limit' must be a whole number from 1 to ${MAX_TRACES_LIMIT}`, { param: 'limit' });
    return { traces: traces.list(query.data.limit ?? DEFAULT_TRACES_LIMIT) };
  });
  app.get<{ Params: { id: string } }>('/traces/:id', async (request) => {
    const trace = await traces.get(request.params.id);
    if (trace === null) throw new ShoalError('NOT_FOUND', `no trace ${request.params.id} on this node: it was never recorded here (a trace is kept by the node that took the request) or it aged out; see GET /traces`);
    return { trace };
  });
}
