import type { FastifyInstance } from 'fastify';
import { ShoalError } from '../common/errors.js';
import { MAX_JSON_DEPTH, jsonDepthExceeds } from '../wire/json-depth.js';

/** Refuses a JSON text nested deeper than MAX_JSON_DEPTH before anything parses or copies it. */
export function checkJsonDepth(text: string): void {
  if (jsonDepthExceeds(text, MAX_JSON_DEPTH)) {
    throw new ShoalError('BAD_REQUEST', `the request body is nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects: flatten it (see docs/LIMITS.md)`);
  }
}

/** Fastify's own JSON parser (prototype-poisoning checks included) behind the depth check. */
export function installJsonParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    try {
      checkJsonDepth(body as string);
    } catch (error) {
      done(error as Error, undefined);
      return;
    }
    parse(request, body as string, done);
  });
}
