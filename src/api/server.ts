import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from '../common/log.js';
import type { Dispatcher } from './dispatch.js';
import { openAIRoutes } from './openai/routes.js';

export interface Health {
  ok: boolean;
  /** Why the node is not ready to serve, when it is not. */
  reason: string | null;
  [key: string]: unknown;
}

export interface ServerOptions {
  log: Logger;
  dispatcher: Dispatcher;
  health: () => Health;
  /** Largest accepted request body; larger ones get 413. Default 4 MiB. */
  maxBodyBytes?: number;
}

export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;

export function buildServer(options: ServerOptions): FastifyInstance {
  const app = Fastify({
    loggerInstance: options.log.child({ part: 'api' }) as FastifyBaseLogger,
    bodyLimit: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    // Per-request lines would drown the log at token rates; failures are logged where they happen.
    logController: new LogController({ disableRequestLogging: true }),
    // Long generations stream for minutes; the server must not cut them off.
    requestTimeout: 0,
  });

  app.get('/healthz', async (_request, reply) => {
    const health = options.health();
    return reply.code(health.ok ? 200 : 503).send(health);
  });

  void app.register(openAIRoutes, { dispatcher: options.dispatcher });
  return app;
}
