// A shaped link for the transfer benchmarks (`--link <rate>`): on loopback every transfer is bound by
// the CPU (the memory copy, hashing, TLS), which is not what a user on a LAN sees; there the link bounds
// both Shoal and curl. This puts the server side and the client side of a benchmark in two network
// namespaces of the test LAN (test/support/netns.ts) and shapes the wire between them.
//
// Topology: createLan's two hosts, `server` (h1) and `client` (h2), each with eth0 on the LAN's bridge,
// and `tc qdisc … root tbf rate <rate> burst 256kb latency 50ms` on both hosts' eth0: each direction
// (data one way, ACKs the other) crosses exactly one token bucket, at `rate`. The host namespace is
// never touched; nothing broadcast or mDNS runs outside the namespaces.

import { execFile, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createLan, killGroup, netnsAvailable, type Lan, type LanHost } from '../test/support/netns.js';

const COMMAND_TIMEOUT_MS = 10_000;
/** How long tearing the namespaces down may take before the benchmark stops waiting (the exit hook of netns.ts still removes them). */
const DESTROY_TIMEOUT_MS = 30_000;

/** What a result records about the link it was measured over. */
export interface LinkSummary {
  /** As given to tc: `1gbit`, `100mbit`. */
  rate: string;
  /** The qdisc on each host's eth0, as tc was given it. */
  qdisc: string;
}

const RATE_RE = /^(\d+(?:\.\d+)?)(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps|tbps)$/;
const RATE_UNIT_BYTES_PER_S: Record<string, number> = {
  bit: 1 / 8,
  kbit: 1e3 / 8,
  mbit: 1e6 / 8,
  gbit: 1e9 / 8,
  tbit: 1e12 / 8,
  // tc's "bps" is bytes per second.
  bps: 1,
  kbps: 1e3,
  mbps: 1e6,
  gbps: 1e9,
  tbps: 1e12,
};

/** A tc rate (`1gbit`, `100mbit`, `125mbps`), lowercased; anything else stops the benchmark. */
export function parseLinkRate(text: string): string {
  const rate = text.trim().toLowerCase();
  const match = RATE_RE.exec(rate);
  if (!match || Number(match[1]) <= 0) throw new Error(`--link takes a tc rate like 1gbit, 100mbit or 125mbps, got "${text}"`);
  return rate;
}

/** The rate in bytes per second (tc's units: k = 1000, "bit" per bit, "bps" per byte). */
export function linkRateBytesPerS(rate: string): number {
  const match = RATE_RE.exec(parseLinkRate(rate))!;
  return Number(match[1]) * RATE_UNIT_BYTES_PER_S[match[2]!]!;
}

export function linkQdisc(rate: string): string {
  return `tbf rate ${parseLinkRate(rate)} burst 256kb latency 50ms`;
}

function command(cmd: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout: COMMAND_TIMEOUT_MS, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${cmd} ${args.join(' ')} failed: ${(stderr || error.message).trim()}`, { cause: error }));
      else resolve(stdout);
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

const inNs = (ns: string, cmd: string, args: string[], input?: string): Promise<string> => command('ip', ['netns', 'exec', ns, cmd, ...args], input);

function onPath(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore', timeout: COMMAND_TIMEOUT_MS }).status === 0;
}

/**
 * Whether `--link` can run here: root, `ip`, `tc` and `nft`, network namespaces, and inside one a tbf
 * qdisc and a NAT table (the server's loopback port is reached through a DNAT). The reason when not.
 */
export async function linkAvailable(): Promise<{ ok: true } | { ok: false; reason: string }> {
  if (process.getuid?.() !== 0) return { ok: false, reason: '--link needs root (network namespaces, tc)' };
  const missing = ['ip', 'tc', 'nft'].filter((cmd) => !onPath(cmd));
  if (missing.length) return { ok: false, reason: `--link needs ${missing.join(', ')} on PATH (iproute2, nftables)` };
  const netns = await netnsAvailable();
  if (!netns.ok) return netns;
  // A name netns.ts's sweep recognises (shl<5 hex>-<pid>-…), so a leftover of a killed probe is swept.
  const probe = `shl${randomBytes(3).toString('hex').slice(0, 5)}-${process.pid}-linkprobe`;
  try {
    await command('ip', ['netns', 'add', probe]);
    await inNs(probe, 'tc', ['qdisc', 'add', 'dev', 'lo', 'root', ...linkQdisc('1gbit').split(' ')]);
    await inNs(probe, 'nft', ['-f', '-'], natTable('127.0.0.2', 1));
    return { ok: true };
  } catch (error) {
    return { ok: false, reason: (error as Error).message.split('\n')[0]! };
  } finally {
    await command('ip', ['netns', 'delete', probe]).catch(() => undefined);
  }
}

function natTable(ip: string, port: number): string {
  return [
    'table ip shoalbench {',
    '  chain prerouting {',
    '    type nat hook prerouting priority -100;',
    `    ip daddr ${ip} tcp dport ${port} dnat to 127.0.0.1:${port}`,
    '  }',
    '}',
    '',
  ].join('\n');
}

export interface Link extends AsyncDisposable {
  readonly summary: LinkSummary;
  readonly lan: Lan;
  /** Where the servers run: the local hub, and for a peer copy the node that holds the model. */
  readonly server: LanHost;
  /** Where the clients run: curl, Shoal's pull, the node that copies. */
  readonly client: LanHost;
  /**
   * Makes a TCP port that listens on the server namespace's 127.0.0.1 (the local hub does, and only
   * there) reachable from the client at the server's LAN address, in the kernel (a DNAT, no process in
   * the path); returns that address as `http://<ip>:<port>`.
   */
  exposeServerLoopback(port: number): Promise<string>;
  /** Spawns a command in a host's namespace, in its own process group; ended by destroy() at the latest. */
  spawn(host: LanHost, cmd: string, args: string[], stdio: SpawnOptions['stdio'], env?: NodeJS.ProcessEnv): ChildProcess;
  /**
   * Runs `node <script> <args>` in the client's namespace, its stderr passed through, and resolves
   * with its stdout once it exits 0; rejects when it fails or outlives timeoutMs (then killed).
   */
  runClient(script: string, args: string[], timeoutMs: number): Promise<string>;
  /** Ends every process in the namespaces and deletes them; bounded in time. Idempotent. */
  destroy(): Promise<void>;
}

/** Two namespaces on one bridge, both eth0 shaped at `rate`. Needs what linkAvailable() checks. */
export async function createLink(rate: string): Promise<Link> {
  const summary: LinkSummary = { rate: parseLinkRate(rate), qdisc: linkQdisc(rate) };
  const lan = await createLan({ hosts: 2 });
  let destroyed: Promise<void> | undefined;
  const destroy = (): Promise<void> => {
    destroyed ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, DESTROY_TIMEOUT_MS)));
      await Promise.race([lan.destroy(), late]);
      clearTimeout(timer);
    })();
    return destroyed;
  };
  const [server, client] = lan.hosts as [LanHost, LanHost];
  try {
    for (const host of [server, client]) await inNs(host.ns, 'tc', ['qdisc', 'add', 'dev', 'eth0', 'root', ...summary.qdisc.split(' ')]);
  } catch (error) {
    await destroy();
    throw error;
  }

  let natDone = false;
  const exposeServerLoopback = async (port: number): Promise<string> => {
    if (natDone) throw new Error('createLink exposes one port of the server');
    natDone = true;
    // Packets the DNAT turns towards 127.0.0.1 arrive on eth0, which the kernel drops as martians
    // unless eth0 may route to loopback addresses.
    await inNs(server.ns, 'sh', ['-c', 'echo 1 > /proc/sys/net/ipv4/conf/eth0/route_localnet']);
    await inNs(server.ns, 'nft', ['-f', '-'], natTable(server.ip, port));
    return `http://${server.ip}:${port}`;
  };

  const spawn = (host: LanHost, cmd: string, args: string[], stdio: SpawnOptions['stdio'], env: NodeJS.ProcessEnv = process.env): ChildProcess => lan.exec(host, cmd, args, { stdio, env });

  const runClient = async (script: string, args: string[], timeoutMs: number): Promise<string> => {
    // No proxy is reachable from the client's namespace, and none is wanted for the LAN.
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(https?|all|no)_proxy$/i.test(name)));
    const child = spawn(client, process.execPath, [script, ...args], ['ignore', 'pipe', 'inherit'], env);
    let stdout = '';
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child, 'SIGKILL');
    }, timeoutMs);
    try {
      // 'close', not 'exit': the whole of stdout has arrived by then.
      const [code, signal] = (await once(child, 'close')) as [number | null, NodeJS.Signals | null];
      if (code !== 0) throw new Error(`the client side (${script} in ${client.ns}) ${timedOut ? `ran past ${timeoutMs} ms and was killed` : `exited with ${code ?? signal}`}`);
      return stdout;
    } finally {
      clearTimeout(timer);
    }
  };

  return { summary, lan, server, client, exposeServerLoopback, spawn, runClient, destroy, [Symbol.asyncDispose]: destroy };
}
