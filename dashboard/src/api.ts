// Every request the page makes goes through here: relative URLs (the node the page came from, nothing
// else), the admin token when one is stored, and errors turned into ApiError with the node's message.

import { errorMessage } from '../../src/common/errors.js';
import { responseErrorMessage } from './lib/chat.js';
import { SseParser, type SseEvent } from './lib/sse.js';
import type { PlacementErrorView } from './lib/types.js';

const TOKEN_KEY = 'shoal.adminToken';
const API_KEY_KEY = 'shoal.apiKey';

function readStorage(key: string): string | null {
  try {
    return localStorage.getItem(key);
  } catch {
    return null;
  }
}

function writeStorage(key: string, value: string | null): void {
  try {
    if (value === null) localStorage.removeItem(key);
    else localStorage.setItem(key, value);
  } catch {
    // Storage may be disabled (private windows); the value then lasts for this page only.
  }
}

let adminToken: string | null = readStorage(TOKEN_KEY);
let apiKey: string | null = readStorage(API_KEY_KEY);
const authListeners = new Set<(required: boolean) => void>();
let authRequired = false;

export function getAdminToken(): string | null {
  return adminToken;
}

export function setAdminToken(token: string | null): void {
  adminToken = token === null || token.trim() === '' ? null : token.trim();
  writeStorage(TOKEN_KEY, adminToken);
  setAuthRequired(false);
}

/** The key for inference routes (/v1), when the node was started with --api-key. */
export function getApiKey(): string | null {
  return apiKey;
}

export function setApiKey(key: string | null): void {
  apiKey = key === null || key.trim() === '' ? null : key.trim();
  writeStorage(API_KEY_KEY, apiKey);
}

function setAuthRequired(required: boolean): void {
  if (authRequired === required) return;
  authRequired = required;
  for (const listener of authListeners) listener(required);
}

/** Called with true when a control route answered 401 (the page is not on the node's loopback). */
export function onAuthRequired(listener: (required: boolean) => void): () => void {
  authListeners.add(listener);
  listener(authRequired);
  return () => authListeners.delete(listener);
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null,
    /** A models failure's reason (HUB_UNREACHABLE, ...). */
    readonly reason: string | null,
    /** A placement failure's typed cause. */
    readonly placement: PlacementErrorView | null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** Turns a failed fetch (no answer at all) into words. */
function networkError(error: unknown): ApiError {
  const detail = errorMessage(error);
  return new ApiError(0, `the node did not answer (${detail}): is it still running?`, null, null, null);
}

function controlHeaders(json: boolean): Record<string, string> {
  // The node refuses a state-changing control call without it (or a JSON body) so that no other
  // web page's form post can reach it (docs/API.md, "Who may call the control routes").
  const headers: Record<string, string> = { 'x-shoal-client': 'dashboard' };
  if (json) headers['content-type'] = 'application/json';
  if (adminToken) headers.authorization = `Bearer ${adminToken}`;
  return headers;
}

function inferenceHeaders(): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  return headers;
}

/** A relative URL: `state` and `/state` both mean the node's /state, wherever the page is mounted. */
export function url(path: string): string {
  return path.replace(/^\/+/, '');
}

async function toApiError(res: Response): Promise<ApiError> {
  let body: unknown = null;
  try {
    body = await res.json();
  } catch {
    // Not JSON: the status says enough.
  }
  const error = (body as { error?: { code?: unknown; reason?: unknown; placement?: unknown } } | null)?.error;
  return new ApiError(
    res.status,
    responseErrorMessage(res.status, body),
    typeof error?.code === 'string' ? error.code : null,
    typeof error?.reason === 'string' ? error.reason : null,
    typeof error?.placement === 'object' && error.placement !== null ? (error.placement as PlacementErrorView) : null,
  );
}

/** A control or models route (admin): JSON in, JSON out. */
export async function api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url(path), {
      method,
      headers: controlHeaders(body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw networkError(error);
  }
  if (res.status === 401) setAuthRequired(true);
  if (!res.ok) throw await toApiError(res);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

/** An inference route (/v1/...): the API key instead of the admin token. */
export async function inference(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url(path), { method: 'POST', headers: inferenceHeaders(), body: JSON.stringify(body), signal });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw networkError(error);
  }
  if (!res.ok) throw await toApiError(res);
  return res;
}

/** A multipart upload to an inference route (/v1/audio/transcriptions): the browser sets the boundary. */
export async function inferenceForm(path: string, form: FormData, signal?: AbortSignal): Promise<Response> {
  const headers = inferenceHeaders();
  delete headers['content-type'];
  let res: Response;
  try {
    res = await fetch(url(path), { method: 'POST', headers, body: form, signal });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw networkError(error);
  }
  if (!res.ok) throw await toApiError(res);
  return res;
}

export async function inferenceGet<T>(path: string, signal?: AbortSignal): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url(path), { headers: inferenceHeaders(), signal });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw networkError(error);
  }
  if (!res.ok) throw await toApiError(res);
  return (await res.json()) as T;
}

/** Reads a fetch body as server-sent events until it ends or `signal` aborts. */
export async function readEvents(res: Response, onEvent: (event: SseEvent) => void, signal?: AbortSignal): Promise<void> {
  if (!res.body) return;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  const cancel = (): void => void reader.cancel().catch(() => undefined);
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    while (true) {
      const { done, value } = await reader.read();
      if (done) break;
      for (const event of parser.push(decoder.decode(value, { stream: true }))) onEvent(event);
    }
    for (const event of parser.push(`${decoder.decode()}\n\n`)) onEvent(event);
  } finally {
    signal?.removeEventListener('abort', cancel);
  }
}

export type StreamStatus = 'connecting' | 'live' | 'retrying' | 'unauthorized';

export interface StreamHandle {
  close(): void;
}

/** Delay before reconnect attempt `n` (from 0): 1 s, 2 s, 4 s, then every 10 s. */
export function reconnectDelayMs(attempt: number): number {
  return Math.min(10_000, 1000 * 2 ** attempt);
}

/**
 * An event stream from a control route (/events, /logs/stream) that reconnects after a drop. It reads
 * with fetch rather than EventSource so the admin token travels in the Authorization header (an
 * EventSource cannot send headers, and a token in the URL would end up in logs).
 */
export function openStream(path: string | (() => string), handlers: { onEvent: (event: SseEvent) => void; onStatus?: (status: StreamStatus, detail: string | null) => void }): StreamHandle {
  const controller = new AbortController();
  let attempt = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let stopAuth: (() => void) | null = null;

  const status = (s: StreamStatus, detail: string | null = null): void => handlers.onStatus?.(s, detail);

  const connect = async (): Promise<void> => {
    if (controller.signal.aborted) return;
    status(attempt === 0 ? 'connecting' : 'retrying');
    let detail: string;
    try {
      const res = await fetch(url(typeof path === 'string' ? path : path()), { headers: { ...controlHeaders(false), accept: 'text/event-stream' }, signal: controller.signal, cache: 'no-store' });
      if (res.status === 401) {
        setAuthRequired(true);
        status('unauthorized', 'this node needs its admin token');
        // Try again once a token is entered.
        stopAuth = onAuthRequired((required) => {
          if (required) return;
          stopAuth?.();
          stopAuth = null;
          attempt = 0;
          void connect();
        });
        return;
      }
      if (!res.ok) throw await toApiError(res);
      attempt = 0;
      status('live');
      await readEvents(res, handlers.onEvent, controller.signal);
      detail = 'the node closed the stream';
    } catch (error) {
      if (controller.signal.aborted) return;
      detail = errorMessage(error);
    }
    if (controller.signal.aborted) return;
    status('retrying', detail);
    timer = setTimeout(() => void connect(), reconnectDelayMs(attempt));
    attempt += 1;
  };
  void connect();
  return {
    close() {
      controller.abort();
      if (timer !== null) clearTimeout(timer);
      stopAuth?.();
    },
  };
}
