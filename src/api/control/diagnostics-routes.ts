import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../../common/errors.js';
import { TIMELINE_DEFAULT_LIMIT, TIMELINE_MAX_LIMIT } from '../../diagnostics/timeline.js';
import { fromFastifyError } from '../fastify-errors.js';
import type { DiagnosticsControl } from './diagnostics-port.js';
import { checkAdmin, sendControlError, type AdminToken } from './routes.js';

const TimelineParams = z.strictObject({
  sinceMs: z.coerce.number().finite().optional(),
  limit: z.coerce.number().int().min(1).max(TIMELINE_MAX_LIMIT).optional(),
});

/**
 * `GET /diagnostics/node`, `GET /diagnostics/cluster` and `GET /diagnostics/cluster/timeline`, behind
 * the admin token like the other control routes: they show runner stderr and the cluster's shape.
 */
export async function diagnosticsRoutes(app: FastifyInstance, options: { diagnostics: DiagnosticsControl; adminToken: AdminToken }): Promise<void> {
  const { diagnostics } = options;
  app.setErrorHandler((error, _request, reply) => sendControlError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => checkAdmin(request, options.adminToken));

  app.get('/diagnostics/node', async () => diagnostics.node());
  app.get('/diagnostics/cluster', async () => diagnostics.cluster());
  app.get('/diagnostics/cluster/timeline', async (request) => {
    const parsed = TimelineParams.safeParse(request.query ?? {});
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const param = issue?.path.join('.') || (issue?.code === 'unrecognized_keys' ? issue.keys.join(', ') : 'query');
      throw new ShoalError('BAD_REQUEST', `invalid '${param}': sinceMs is Unix milliseconds, limit a whole number from 1 to ${TIMELINE_MAX_LIMIT}`, { param });
    }
    return diagnostics.timeline({ sinceMs: parsed.data.sinceMs ?? null, limit: parsed.data.limit ?? TIMELINE_DEFAULT_LIMIT });
  });
}
