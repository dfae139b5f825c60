import { ERROR_CODES, ShoalError, type ErrorCode } from '../common/errors.js';
import { resolveDataDir } from '../common/paths.js';
import { readRunFiles } from '../node/run-files.js';

/** Talks to the local node that runs from a data dir, on loopback, with this start's admin token. */
export interface NodeClient {
  baseUrl: string;
  call<T>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<T>;
}

/** How long a CLI command waits for its node before saying it does not answer. */
const REQUEST_TIMEOUT_MS = 30_000;

export async function connectToNode(dataDirFlag: string | undefined): Promise<NodeClient> {
  const dataDir = resolveDataDir(dataDirFlag);
  const { info, token } = await readRunFiles(dataDir);
  const baseUrl = `http://127.0.0.1:${info.apiPort}`;
  return {
    baseUrl,
    async call<T>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<T> {
      let res: Response;
      try {
        res = await fetch(`${baseUrl}${path}`, {
          method,
          headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
      } catch (error) {
        throw new ShoalError('NOT_FOUND', `the node from ${dataDir} (pid ${info.pid}, port ${info.apiPort}) does not answer: is it still running?`, { cause: error });
      }
      const text = await res.text();
      const parsed = text === '' ? null : (JSON.parse(text) as unknown);
      if (!res.ok) {
        const error = (parsed as { error?: { message?: string; code?: string } } | null)?.error;
        const message = error?.message ?? `${res.status} ${text}`;
        // The node's own code, so a command can tell "not found" from a refusal.
        const code = ERROR_CODES.includes(error?.code as ErrorCode) ? (error?.code as ErrorCode) : 'BAD_REQUEST';
        throw new ShoalError(code, message);
      }
      return parsed as T;
    },
  };
}
