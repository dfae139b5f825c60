import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../../common/errors.js';
import type { PlacementError } from '../../placement/errors.js';
import { fromFastifyError } from '../fastify-errors.js';
import { parseBody } from '../validation.js';
import { PlaceBody, type PlacementControl } from './placement-port.js';
import { checkAdmin, sendControlError, type AdminToken } from './routes.js';


const DryRunQuery = z.object({ dry_run: z.enum(['1', 'true', '0', 'false']).optional() });

function placementBody(error: PlacementError): { error: { code: string; message: string; placement: PlacementError } } {
  return { error: { code: 'PLACEMENT_FAILED', message: `cannot place: ${error.message}`, placement: error } };
}

/** `POST /place_instance` (with `dry_run`), `POST /instance/:id/approve` and `DELETE /instance/:id`, behind the admin token. */
export async function placementRoutes(app: FastifyInstance, options: { placement: PlacementControl; adminToken: AdminToken }): Promise<void> {
  const { placement } = options;
  app.setErrorHandler((error, _request, reply) => sendControlError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => checkAdmin(request, options.adminToken));

  app.post('/place_instance', async (request, reply) => {
    const body = parseBody(PlaceBody, request.body ?? {});
    const query = DryRunQuery.safeParse(request.query);
    const dryRun = body.dry_run === true || (query.success && (query.data.dry_run === '1' || query.data.dry_run === 'true'));
    if (dryRun) {
      const result = await placement.plan(body);
      if (!result.ok) return reply.code(409).send(placementBody(result.error));
      return { plan: result.plan, downloads: result.downloads };
    }
    try {
      const instance = await placement.place(body);
      return reply.code(201).send({ instance });
    } catch (error) {
      const failure = error as { placement?: PlacementError };
      if (error instanceof ShoalError && failure.placement !== undefined) return reply.code(409).send(placementBody(failure.placement));
      throw error;
    }
  });

  app.post('/instance/:id/approve', async (request) => {
    const { id } = request.params as { id: string };
    return { instance: await placement.approve(id) };
  });

  app.delete('/instance/:id', async (request) => {
    const { id } = request.params as { id: string };
    await placement.end(id);
    return { deleted: id };
  });
}
