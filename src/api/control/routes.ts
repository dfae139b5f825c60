import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ShoalError } from '../../common/errors.js';
import { fromFastifyError } from '../fastify-errors.js';
import { parseBody } from '../validation.js';
import type { NodeControl } from './control.js';
import { checkRequestOrigin } from './request-origin.js';
import { controlErrorBody, controlStatus } from './errors.js';

export interface ControlRoutesOptions {
  control: NodeControl;
  /** The node's admin token; callers not on loopback must present it. */
  adminToken: AdminToken;
}

/** The admin token, or how to read it now: a rotation (`shoal token --rotate`) applies to the next request. */
export type AdminToken = string | (() => string);

/** True for 127.0.0.0/8 and ::1, including IPv4-mapped IPv6. */
export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return v4.startsWith('127.') || address === '::1';
}

/**
 * The admin token passes from anywhere (a browser never sends it on its own, and a header like
 * Authorization makes the request one no page can send cross-origin unasked). Without it only
 * loopback callers pass, and only with what a web page could not forge (request-origin.ts): a page
 * the user visits runs on the same machine, so loopback alone proves nothing.
 */
export function checkAdmin(request: FastifyRequest, adminToken: AdminToken): void {
  const header = request.headers.authorization;
  const presented = typeof header === 'string' ? /^Bearer\s+(.+)$/i.exec(header.trim())?.[1] : undefined;
  const expected = Buffer.from(typeof adminToken === 'string' ? adminToken : adminToken());
  const given = Buffer.from(presented ?? '');
  if (given.length === expected.length && timingSafeEqual(given, expected)) return;
  if (!isLoopback(request.socket.remoteAddress)) {
    throw new ShoalError('UNAUTHORIZED', "control and model routes need this node's admin token from other machines: run 'shoal token' on the node and send it as 'Authorization: Bearer <token>'");
  }
  checkRequestOrigin(request);
}

export function sendControlError(reply: FastifyReply, error: ShoalError, status?: number): FastifyReply {
  const code = status ?? controlStatus(error);
  if (code >= 500) reply.log.error({ err: error.cause ?? error }, error.message);
  return reply.code(code).send(controlErrorBody(error));
}

const Target = z.strictObject({ node: z.string().min(1).max(200) });
const Selector = z.strictObject({ invitation: z.string().min(1).max(200).optional() });
const JoinBody = z.strictObject({ code: z.string().min(1).max(4096) });
const NicknameBody = z.strictObject({ node: z.string().min(1).max(200), nickname: z.string().min(1).max(64).nullable() });

/** Shoal's control API: cluster state and membership. Every CLI command has a route here. */
export async function controlRoutes(app: FastifyInstance, options: ControlRoutesOptions): Promise<void> {
  const { control } = options;
  app.setErrorHandler((error, _request, reply) => sendControlError(reply, fromFastifyError(error)));
  app.addHook('onRequest', async (request) => checkAdmin(request, options.adminToken));

  app.get('/state', async () => control.status());
  app.post('/cluster/invite', async (request) => control.invite(parseBody(Target, request.body).node));
  app.post('/cluster/invite-code', async () => control.inviteCode());
  app.post('/cluster/join', async (request) => control.join(parseBody(JoinBody, request.body).code));
  app.post('/cluster/approve', async (request) => control.approve(parseBody(Selector, request.body ?? {}).invitation ?? null));
  app.post('/cluster/decline', async (request) => {
    await control.decline(parseBody(Selector, request.body ?? {}).invitation ?? null);
    return { ok: true };
  });
  app.post('/cluster/remove', async (request) => {
    await control.remove(parseBody(Target, request.body).node);
    return { ok: true };
  });
  app.post('/cluster/leave', async () => {
    await control.leave();
    return { ok: true };
  });
  app.post('/cluster/dissolve', async () => {
    await control.dissolve();
    return { ok: true };
  });
  app.post('/cluster/nickname', async (request) => {
    const body = parseBody(NicknameBody, request.body);
    await control.nickname(body.node, body.nickname);
    return { ok: true };
  });
  app.post('/cluster/make-host', async (request) => {
    await control.makeHost(parseBody(Target, request.body).node);
    return { ok: true };
  });
}
