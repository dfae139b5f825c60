import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply } from 'fastify';
import { ShoalError } from '../common/errors.js';
import type { Logger } from '../common/log.js';
import { ApiKeys } from './auth.js';
import { clientErrorHandler } from './client-errors.js';
import { toAnthropicError } from './anthropic/errors.js';
import { controlErrorBody } from './control/errors.js';
import { toOllamaError } from './ollama/errors.js';
import { toOpenAIError } from './openai/errors.js';
import { limitConnections } from './http-limits.js';
import { installJsonParser } from './json-body.js';
import type { Dispatcher } from './dispatch.js';
import type { FamilyOptions } from './family.js';
import { anthropicRoutes, sendAnthropicError } from './anthropic/routes.js';
import { ollamaRoutes, sendOllamaError } from './ollama/routes.js';
import { openAIRoutes, sendOpenAIError } from './openai/routes.js';
import type { NodeControl } from './control/control.js';
import { controlRoutes, sendControlError, type AdminToken } from './control/routes.js';
import { registerCors } from './cors.js';
import websocket from '@fastify/websocket';
import { REALTIME_WEBSOCKET_OPTIONS } from './openai/realtime/routes.js';
import { settingsRoutes, type SettingsControl } from './control/settings-routes.js';
import { modelsRoutes } from './control/models-routes.js';
import type { ModelsControl } from './control/models-port.js';
import type { PlacementControl } from './control/placement-port.js';
import { placementRoutes } from './control/placement-routes.js';
import type { DiagnosticsControl } from './control/diagnostics-port.js';
import { diagnosticsRoutes } from './control/diagnostics-routes.js';
import type { PerformanceControl } from './control/performance-port.js';
import { performanceRoutes } from './control/performance-routes.js';
import { responsesRoutes } from './openai/responses/routes.js';
import type { HttpTracing, TracesControl } from './control/traces-port.js';
import { tracesRoutes } from './control/traces-routes.js';
import { traceHttp } from './http-tracing.js';
import type { SpeechControl } from './speech-port.js';
import type { AudioDecoder } from './audio-port.js';

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
  /** Largest accepted request body; larger ones get 413. Default 4 MiB; the routes that take images allow IMAGE_ROUTE_MAX_BODY_BYTES (src/api/images.ts). */
  maxBodyBytes?: number;
  /** Keys inference routes require; empty (the default) means open. */
  apiKeys?: readonly string[];
  /** The node's control surface (cluster state and membership), behind the admin token. */
  control: NodeControl;
  adminToken: AdminToken;
  /** This node's browser origins allowed on inference routes (`--cors-origin`), besides loopback ones and the cluster's. */
  corsOrigins?: readonly string[];
  /** Cluster-wide settings (GET/PUT /settings; their API keys and origins apply here), and the admin token's rotation. */
  settings?: SettingsControl & { rotateAdminToken: () => Promise<string> };
  /** Models on disk (hub search, cards, downloads, storage), behind the same admin token. */
  models?: ModelsControl;
  /** Placing and ending model instances, behind the same admin token. */
  placement?: PlacementControl;
  /** Per-request tracing (src/tracing/): which requests are traced, and `GET /traces`, behind the same admin token. */
  traces?: TracesControl & HttpTracing;
  /** This node's and the cluster's diagnostics (`/diagnostics/node`, `/diagnostics/cluster`, the timeline), behind the same admin token. */
  diagnostics?: DiagnosticsControl;
  /** Performance envelopes and the capture bundle (`/diagnostics/performance`, `/diagnostics/bundle`), behind the same admin token. */
  performance?: PerformanceControl;
  /** Text to speech (`POST /v1/audio/speech`, the voice listed in `/v1/models`); without it the route is unknown. */
  speech?: SpeechControl;
  /** Decodes uploads for speech to text (`POST /v1/audio/transcriptions`, `/translations`); without it those routes are unknown. */
  audio?: AudioDecoder;
}

export const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;
/** URL prefixes of Shoal's own control API, answered in its error shape. */
const CONTROL_PREFIXES = ['/state', '/settings', '/token/', '/cluster/', '/models', '/store/', '/place_instance', '/instance/', '/metrics/', '/logs', '/events', '/traces', '/diagnostics/'];
/** Oversized bodies up to this size are read and discarded so the client gets its 413. */
export const MAX_DRAINED_BODY_BYTES = 64 * 1024 * 1024;
/** How long an oversized upload may take to drain before the 413 goes out anyway. */
const DRAIN_TIMEOUT_MS = 10_000;

/** An API family's way to answer an error in its own shape, used for routes no plugin owns. */
export type ErrorSender = (reply: FastifyReply, error: ShoalError, status?: number) => FastifyReply;

interface Family {
  /** Does an unknown URL belong to this family? The first match answers. */
  owns: (url: string) => boolean;
  sendError: ErrorSender;
  /** The same error's body, for answers written straight to the socket (clientErrorHandler). */
  errorBody: (error: ShoalError) => unknown;
}

export function buildServer(options: ServerOptions): FastifyInstance {
  const families: Family[] = [];
  const familyFor = (url: string): Family => families.find((f) => f.owns(url))!;
  const app = Fastify({
    loggerInstance: options.log.child({ part: 'api' }) as FastifyBaseLogger,
    bodyLimit: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES,
    // Per-request lines would drown the log at token rates; failures are logged where they happen.
    logController: new LogController({ disableRequestLogging: true }),
    clientErrorHandler: clientErrorHandler((url, error) => familyFor(url).errorBody(error)),
    // A route parameter over fastify's maxParamLength (100 characters) or a malformed one.
    frameworkErrors: (error, request, reply) => {
      const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH';
      const message = tooLong ? 'a part of the URL is longer than 100 characters: shorten it' : `the URL is not valid: ${error.message}`;
      return familyFor(request.url).sendError(reply as unknown as FastifyReply, new ShoalError('BAD_REQUEST', message), tooLong ? 414 : 400);
    },
  });
  limitConnections(app.server);
  installJsonParser(app);
  if (options.traces) traceHttp(app, options.traces);
  const settings = options.settings;
  const familyOptions: FamilyOptions = { dispatcher: options.dispatcher, apiKeys: new ApiKeys(options.apiKeys ?? [], () => settings?.get().apiKeyDigests ?? []) };
  registerCors(app, {
    origins: options.corsOrigins ?? [],
    clusterOrigins: () => settings?.get().corsOrigins ?? [],
    refuse: (request, reply, error) => familyFor(request.url).sendError(reply, error),
  });

  // A client still uploading an oversized body would see its connection reset (EPIPE) instead of the
  // 413, so a moderately large body is read to its end (and discarded) before the answer goes out.
  app.addHook('onError', async (request, _reply, error) => {
    if ((error as { code?: string }).code !== 'FST_ERR_CTP_BODY_TOO_LARGE') return;
    const declared = Number(request.headers['content-length'] ?? NaN);
    if (!Number.isFinite(declared) || declared > MAX_DRAINED_BODY_BYTES || request.raw.readableEnded) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, DRAIN_TIMEOUT_MS);
      const done = (): void => {
        clearTimeout(timer);
        resolve();
      };
      request.raw.once('end', done).once('close', done).resume();
    });
  });

  // Before every route, so an upgrade to any route but /v1/realtime is closed rather than left open.
  void app.register(websocket, REALTIME_WEBSOCKET_OPTIONS);

  app.get('/healthz', async (_request, reply) => {
    const health = options.health();
    return reply.code(health.ok ? 200 : 503).send(health);
  });

  void app.register(controlRoutes, { control: options.control, adminToken: options.adminToken });
  if (options.models) void app.register(modelsRoutes, { models: options.models, adminToken: options.adminToken });
  if (settings) void app.register(settingsRoutes, { settings, rotateAdminToken: settings.rotateAdminToken, adminToken: options.adminToken });
  if (options.placement) void app.register(placementRoutes, { placement: options.placement, adminToken: options.adminToken });
  if (options.traces) void app.register(tracesRoutes, { traces: options.traces, adminToken: options.adminToken });
  if (options.diagnostics) void app.register(diagnosticsRoutes, { diagnostics: options.diagnostics, adminToken: options.adminToken });
  if (options.performance) void app.register(performanceRoutes, { diagnostics: options.performance, adminToken: options.adminToken });
  families.push({ owns: (url) => CONTROL_PREFIXES.some((prefix) => url.startsWith(prefix)), sendError: sendControlError, errorBody: controlErrorBody });
  void app.register(anthropicRoutes, familyOptions);
  families.push({ owns: (url) => url.startsWith('/v1/messages'), sendError: sendAnthropicError, errorBody: (error) => toAnthropicError(error).body });
  // Ollama's /api/pull and /api/delete manage models on disk, with the access the /models routes have.
  void app.register(ollamaRoutes, { ...familyOptions, adminToken: options.adminToken, ...(options.models ? { models: options.models } : {}) });
  families.push({ owns: (url) => url.startsWith('/api/'), sendError: sendOllamaError, errorBody: (error) => toOllamaError(error).body });
  void app.register(openAIRoutes, { ...familyOptions, ...(options.speech ? { speech: options.speech } : {}), ...(options.audio ? { audio: options.audio } : {}) });
  void app.register(responsesRoutes, familyOptions);
  families.push({ owns: () => true, sendError: sendOpenAIError, errorBody: (error) => toOpenAIError(error).body });

  app.setNotFoundHandler((request, reply) => {
    return familyFor(request.url).sendError(reply, new ShoalError('NOT_FOUND', `unknown endpoint ${request.method} ${request.url}: see docs/API.md`));
  });
  return app;
}
