// Where a request starts and ends, for tracing (src/api/control/traces-port.ts): decided once when it
// arrives, carried through its handler, finished when the answer's last byte is out. No route knows.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { HttpTracing, TracedHttpRequest } from './control/traces-port.js';

export function traceHttp(app: FastifyInstance, tracing: HttpTracing): void {
  const traced = new WeakMap<FastifyRequest, TracedHttpRequest>();
  app.addHook('onRequest', (request, reply, done) => {
    const trace = tracing.begin({ method: request.method, route: request.routeOptions.url ?? request.url.split('?')[0]! });
    if (trace === null) {
      done();
      return;
    }
    traced.set(request, trace);
    // `finish` when the last byte went out; `close` alone when the client left first.
    const finish = (): void => trace.finish(reply.raw.statusCode);
    reply.raw.once('finish', finish).once('close', finish);
    trace.enter(done);
  });
  // Reading the body leaves the request's async context: the handler is entered again right before it runs.
  app.addHook('preHandler', (request, _reply, done) => {
    const trace = traced.get(request);
    if (trace === undefined) done();
    else trace.enter(done);
  });
}
