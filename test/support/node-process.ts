import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A real `shoal run` process on a loopback port with a fresh data dir, for integration tests. */
export interface TestNode extends AsyncDisposable {
  url: string;
  port: number;
  p2pPort: number;
  dataDir: string;
  process: ChildProcess;
  /** Settles when the process exits, however it exits. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything the node printed, for assertions and for failure messages. */
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

export const CLI_PATH = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface StartOptions {
  args?: string[];
  /** Wait for /healthz to answer 200 (default true). */
  waitReady?: boolean;
  readyTimeoutMs?: number;
  dataDir?: string;
  /** Extra environment for the node process (over process.env). */
  env?: NodeJS.ProcessEnv;
}

export async function startTestNode(options: StartOptions = {}): Promise<TestNode> {
  const port = await freePort();
  const p2pPort = await freePort();
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'shoal-test-')));
  const ownsDataDir = options.dataDir === undefined;
  const child = spawn(
    process.execPath,
    // Never mDNS in the host namespace: it would leak onto the real network. No background engine
    // provisioning unless a test asks (SHOAL_PROVISION=1): on a machine without cached engines it would build for many minutes.
    [CLI_PATH, 'run', '--api-port', String(port), '--p2p-port', String(p2pPort), '--no-mdns', '--host', '127.0.0.1', '--data-dir', dataDir, '--threads', '1', ...(options.args ?? [])],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, SHOAL_LOG_LEVEL: process.env.SHOAL_LOG_LEVEL ?? 'info', SHOAL_PROVISION: process.env.SHOAL_PROVISION ?? '0', ...options.env } },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const url = `http://127.0.0.1:${port}`;

  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    const started = Date.now();
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    const result = await exited;
    if (ownsDataDir) await rm(dataDir, { recursive: true, force: true });
    return { ...result, ms: Date.now() - started };
  };
  const node: TestNode = { url, port, p2pPort, dataDir, process: child, exited, output: () => output, stop, [Symbol.asyncDispose]: async () => void (await stop()) };

  if (options.waitReady ?? true) {
    try {
      await waitForHealthy(url, options.readyTimeoutMs ?? 60_000, exited);
    } catch (error) {
      await stop('SIGKILL');
      throw new Error(`${(error as Error).message}\n--- node output ---\n${output}`, { cause: error });
    }
  }
  return node;
}

export async function waitForHealthy(url: string, timeoutMs: number, exited?: Promise<unknown>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  let dead = false;
  void exited?.then(() => (dead = true));
  while (Date.now() < deadline) {
    if (dead) throw new Error('the node exited before it became healthy');
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.status === 200) return;
      last = `${res.status} ${await res.text()}`;
    } catch (error) {
      last = (error as Error).message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`node at ${url} not healthy after ${timeoutMs} ms: ${last}`);
}
