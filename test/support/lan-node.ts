// Real `shoal run` nodes inside the namespaces of a test LAN (tier 4), and the CLI run next to them.

import type { ChildProcess } from 'node:child_process';
import type { StatusView } from '../../src/api/control/control.js';
import { CLI_PATH } from './node-process.js';
import { captureOutput, type Captured, type Lan, type LanHost } from './netns.js';

export interface LanNode {
  host: LanHost;
  dataDir: string;
  /** Options added to `shoal run` (beyond name, data dir, one thread and the default ports). */
  args?: string[];
  env?: NodeJS.ProcessEnv;
  process: ChildProcess | null;
  output: Captured | null;
}

/** Starts (or restarts) the node in its host's namespace on the default ports. */
export function startLanNode(lan: Lan, node: LanNode): void {
  const child = lan.exec(
    node.host,
    process.execPath,
    [CLI_PATH, 'run', '--name', node.host.name, '--data-dir', node.dataDir, '--threads', '1', '--api-port', '52600', '--p2p-port', '52601', ...(node.args ?? [])],
    { env: { ...process.env, SHOAL_LOG_LEVEL: 'info', SHOAL_PROVISION: process.env.SHOAL_PROVISION ?? '0', ...node.env } },
  );
  node.process = child;
  node.output = captureOutput(child, 256 * 1024);
}

/** Runs a `shoal` command in the node's namespace against its data dir. */
export async function lanCli(lan: Lan, node: LanNode, ...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return lan.run(node.host, process.execPath, [CLI_PATH, ...args, '--data-dir', node.dataDir], { timeoutMs: 90_000 });
}

export async function lanStatus(lan: Lan, node: LanNode): Promise<StatusView> {
  const res = await lanCli(lan, node, 'status', '--json');
  if (res.code !== 0) throw new Error(`status on ${node.host.name} failed: ${res.stderr}`);
  return JSON.parse(res.stdout) as StatusView;
}
