import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { StatusView } from '../../src/api/control/control.js';
import { CLI_PATH, startTestNode, type TestNode } from './node-process.js';

const run = promisify(execFile);

/** Runs `shoal <args> --data-dir <node's dir>` as a real process; never throws, reports the exit code. */
export async function shoal(node: Pick<TestNode, 'dataDir'>, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI_PATH, ...args, '--data-dir', node.dataDir], { encoding: 'utf8', timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

export async function status(node: Pick<TestNode, 'dataDir'>): Promise<StatusView> {
  const result = await shoal(node, 'status', '--json');
  if (result.code !== 0) throw new Error(`shoal status failed (${result.code}): ${result.stderr}`);
  return JSON.parse(result.stdout) as StatusView;
}

/** Polls until `probe` returns a value, or fails naming what it waited for. */
export async function eventually<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

/** `joiner` joins the cluster of `host` with an invitation code `host` issues, as a user would; throws when it does not. */
export async function joinCluster(host: Pick<TestNode, 'dataDir'>, joiner: Pick<TestNode, 'dataDir'>): Promise<void> {
  const invited = await shoal(host, 'invite', '--code');
  const code = /shoal1-\S+/.exec(invited.stdout)?.[0];
  if (code === undefined) throw new Error(`no join code from shoal invite (${invited.code}): ${invited.stdout}${invited.stderr}`);
  const joined = await shoal(joiner, 'join', code);
  if (joined.code !== 0) throw new Error(`shoal join failed (${joined.code}): ${joined.stderr}`);
}

/** Nodes that fetch models from the local hub at `hubUrl` and may fill the disk to 1 MiB of its end (test models are small). */
export function hubNodeEnv(hubUrl: string): Record<string, string> {
  return { SHOAL_HF_ENDPOINT: hubUrl, SHOAL_DISK_RESERVE_BYTES: String(1024 * 1024) };
}

/** alpha and beta started with `env`, beta joined to alpha's cluster: the two members most model tests run on. */
export async function startJoinedPair(env: Record<string, string>): Promise<[TestNode, TestNode]> {
  const [a, b] = await Promise.all([startTestNode({ args: ['--name', 'alpha'], env }), startTestNode({ args: ['--name', 'beta'], env })]);
  await joinCluster(a, b);
  return [a, b];
}
