import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ShoalError } from '../common/errors.js';
import { normalizeOrigin } from '../master/state/settings.js';

/** Extra origins (comma-separated) allowed to call the inference routes from a browser, as `--cors-origin`. */
export const CORS_ORIGINS_ENV = 'SHOAL_CORS_ORIGINS';
/** How long a browser may cache a granted preflight. */
export const CORS_PREFLIGHT_MAX_AGE_S = 600;
/** Longest `Access-Control-Request-Headers` echoed back; a longer one is refused rather than reflected. */
export const CORS_REQUEST_HEADERS_MAX_CHARS = 1024;

/**
 * The routes a web app on another origin may call: OpenAI and Anthropic under /v1, Ollama under
 * /api. Everything else (control, dashboard, metrics) never answers cross-origin: it sends no CORS
 * headers and its own checks (control/request-origin.ts) refuse a foreign `Origin`.
 */
const INFERENCE_PREFIXES = ['/v1/', '/api/'];
/**
 * Routes under those prefixes that change the node's disk (Ollama's pull and delete, behind the admin
 * token): like control routes, they never answer cross-origin, whatever origins are allowed.
 */
const NEVER_CROSS_ORIGIN = ['/api/pull', '/api/delete'];

export interface CorsOptions {
  /** This node's own allowed origins (`--cors-origin`, SHOAL_CORS_ORIGINS, shoal.toml), normalized; `*` allows any. */
  origins: readonly string[];
  /** The cluster's allowed origins (cluster settings), read per request. */
  clusterOrigins: () => readonly string[];
  /** Answers a refused request in the shape of the API family its URL belongs to. */
  refuse: (request: FastifyRequest, reply: FastifyReply, error: ShoalError) => FastifyReply;
}

/** Origins served from this machine (`localhost`, 127.0.0.0/8, `::1`, any port): a local web app is allowed by default. */
export function isLoopbackOrigin(origin: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || host.endsWith('.localhost') || /^127\.\d+\.\d+\.\d+$/.test(host) || host === '::1';
}

/**
 * Parses origins given by an operator (a flag, the environment, a config file): each must be `*` or
 * an http(s) origin; a trailing `/` or upper case is forgiven, a path is not.
 */
export function parseCorsOrigins(values: readonly string[], source: string): string[] {
  const origins: string[] = [];
  for (const raw of values.flatMap((v) => v.split(','))) {
    const value = raw.trim();
    if (value === '') continue;
    const origin = value === '*' ? '*' : normalizeOrigin(value);
    if (origin === null) throw new ShoalError('BAD_REQUEST', `${source}: '${value}' is not an origin: give scheme://host[:port] such as https://app.example.com (no path), or *`);
    origins.push(origin);
  }
  return [...new Set(origins)];
}

function pathOf(url: string): string {
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/** The node itself: an `Origin` naming the very host the request was sent to (the dashboard's chat). */
function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    return new URL(origin).host === new URL(`http://${host}`).host;
  } catch {
    return false;
  }
}

/**
 * CORS for the inference routes: a request with an `Origin` that is not allowed is refused (403, FORBIDDEN)
 * before it reaches a model, so a page cannot spend the cluster's compute even with a request a
 * browser sends without asking; an allowed one gets its origin echoed, and its preflight a 204.
 * Headers go on the raw response, so streamed answers (written with writeHead) carry them too.
 */
export function registerCors(app: FastifyInstance, options: CorsOptions): void {
  app.addHook('onRequest', async (request, reply) => {
    const origin = request.headers.origin;
    if (origin === undefined) return;
    const path = pathOf(request.url);
    if (!INFERENCE_PREFIXES.some((prefix) => path.startsWith(prefix))) return;
    if (sameOrigin(origin, request.headers.host)) return;
    if (NEVER_CROSS_ORIGIN.some((route) => path === route || path.startsWith(`${route}/`))) {
      return options.refuse(request, reply, new ShoalError('FORBIDDEN', `${path} changes this node's disk and refuses requests from web pages on other origins (Origin '${origin}'): use the CLI ('shoal pull', 'shoal rm') or the node's dashboard`));
    }
    const allowed = [...options.origins, ...options.clusterOrigins()];
    const normalized = normalizeOrigin(origin);
    const granted = isLoopbackOrigin(origin) || allowed.includes('*') || (normalized !== null && allowed.includes(normalized));
    if (!granted) {
      return options.refuse(
        request,
        reply,
        new ShoalError('FORBIDDEN', `web pages from ${origin} may not call this node's API: allow the origin with --cors-origin, ${CORS_ORIGINS_ENV} or 'shoal config set cors-origins ${origin}' (docs/API.md, CORS)`),
      );
    }
    reply.raw.setHeader('access-control-allow-origin', origin);
    reply.raw.setHeader('vary', 'Origin');
    if (request.method !== 'OPTIONS' || request.headers['access-control-request-method'] === undefined) return;
    const asked = request.headers['access-control-request-headers'];
    reply.raw.setHeader('access-control-allow-methods', 'GET, POST, DELETE, OPTIONS');
    if (typeof asked === 'string' && asked.length <= CORS_REQUEST_HEADERS_MAX_CHARS && /^[A-Za-z0-9\-_, ]*$/.test(asked)) {
      reply.raw.setHeader('access-control-allow-headers', asked);
    }
    // Chromium asks before a public page reaches a private address (Private Network Access): the operator allowed this origin.
    if (request.headers['access-control-request-private-network'] === 'true') reply.raw.setHeader('access-control-allow-private-network', 'true');
    reply.raw.setHeader('access-control-max-age', String(CORS_PREFLIGHT_MAX_AGE_S));
    return reply.code(204).send();
  });
}
