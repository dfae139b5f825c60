import type { FastifyInstance } from 'fastify';
import { fromFastifyError } from '../fastify-errors.js';
import type { PerformanceControl } from './performance-port.js';
import { checkAdmin, sendControlError, type AdminToken } from './routes.js';

/** A file name a Content-Disposition header can carry unquoted-safe (the node's name is free text). */
const safeFileName = (name: string): string => name.replace(/[^A-Za-z0-9._-]/g, '_');

/** `GET /diagnostics/performance` and `GET /diagnostics/bundle`, behind the admin token like every control route. */
export async function performanceRoutes(app: FastifyInstance, options: { diagnostics: PerformanceControl; adminToken: AdminToken }): Promise<void> {
  const { diagnostics } = options;
  app.setErrorHandler((error, _request, reply) => sendControlError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => checkAdmin(request, options.adminToken));

  app.get('/diagnostics/performance', async () => diagnostics.performance());

  app.get('/diagnostics/bundle', async (_request, reply) => {
    const { name, bytes } = await diagnostics.bundle();
    return reply
      .header('content-type', 'application/gzip')
      .header('content-disposition', `attachment; filename="${safeFileName(name)}"`)
      .header('cache-control', 'no-store')
      .send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  });
}
