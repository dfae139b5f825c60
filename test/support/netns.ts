/**
 * Multi-host test harness (testing tier 4, docs/DESIGN.md section 10): a private LAN of network namespaces.
 *
 * Topology of one LAN (everything named `shl<id>-<pid>-…` / `shl<id>…`, id random per LAN):
 *
 *   namespace shl<id>-<pid>-sw   bridge shl<id>br, ports shl<id>p1 … shl<id>pN, nft table `bridge shlfault`
 *   namespace shl<id>-<pid>-h1   lo, eth0 = <subnet>.1, route 224.0.0.0/4 dev eth0   (peer of shl<id>p1)
 *   …
 *
 * The host namespace is never touched: every link is created from inside the switch namespace with its
 * peer placed straight into the host's namespace (`ip -n SW link add … peer name eth0 netns H`), and all
 * nftables state lives in the switch namespace, so deleting the namespaces removes everything. Nothing
 * is connected to the outside world: the namespaces have no default route, so traffic can only reach
 * the LAN's own addresses (or each namespace's loopback).
 *
 * Faults are applied in the switch, i.e. on the wire: a partition or a drop looks like real packet loss
 * to the hosts (no EPERM from a local output hook, TCP just retransmits).
 *
 * Needs root and `ip`/`nft`; see `netnsAvailable()`.
 */
import { execFile, spawn, spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';

// ---------------------------------------------------------------------------------------------------
// Types

export interface LanHost {
  /** Short name, `h1` … `hN`. */
  name: string;
  /** Network namespace name, for `ip netns exec`. */
  ns: string;
  /** IPv4 address on the LAN. */
  ip: string;
  /** 1-based index; the address is network + index. */
  index: number;
  /** The switch-side veth port (its name inside the switch namespace). */
  port: string;
}

/** A host, by object or by name (`'h2'`). */
export type HostRef = LanHost | string;

export interface LanOptions {
  hosts: number;
  /** IPv4 network in CIDR form, prefix /16 … /29; default `10.213.<random>.0/24`. */
  subnet?: string;
}

export interface ExecOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  stdio?: SpawnOptions['stdio'];
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

export interface DelayProxyOptions {
  /** The namespace (host) the proxy runs in. */
  listenNs: HostRef;
  listenPort: number;
  target: { ip: string; port: number };
  /** Added to every chunk, in each direction. */
  delayMs: number;
}

export interface DelayProxy extends AsyncDisposable {
  process: ChildProcess;
  /** Where to connect: the listen host's LAN address and the port. */
  ip: string;
  port: number;
  stop(): Promise<void>;
}

export interface Lan extends AsyncDisposable {
  /** Unique per LAN: `shl<id>-<pid>`; every namespace name starts with it. */
  readonly prefix: string;
  readonly subnet: string;
  readonly switchNs: string;
  readonly bridge: string;
  readonly hosts: LanHost[];
  host(ref: HostRef): LanHost;
  /**
   * Spawns `cmd args` inside the host's namespace through `ip netns exec` (which execs the command, so
   * the child's pid is the command's). The child leads its own process group: `killGroup(child, sig)`
   * reaches it and everything it spawned. Tracked, and killed with SIGKILL by `destroy()`.
   */
  exec(host: HostRef, cmd: string, args?: string[], opts?: ExecOptions): ChildProcess;
  /** `exec(host, process.execPath, ['-e', source, ...args])`; `process.argv.slice(1)` are the args. */
  execNode(host: HostRef, source: string, args?: string[], opts?: ExecOptions): ChildProcess;
  /** Runs a command to completion in the host's namespace, output captured (bounded), killed at timeout. */
  run(host: HostRef, cmd: string, args?: string[], opts?: ExecOptions & { timeoutMs?: number; maxBytes?: number }): Promise<RunResult>;
  /** Drops all traffic (every frame, ARP and multicast included) between the two groups, both ways. Cumulative until heal(). */
  partition(groupA: HostRef[], groupB: HostRef[]): Promise<void>;
  /** Removes every partition. */
  heal(): Promise<void>;
  /** Drops `percent`% of the frames sent by the host and `percent`% of those sent to it (0 removes it). */
  dropRandom(host: HostRef, percent: number): Promise<void>;
  /** Removes every random drop. */
  clearDrops(): Promise<void>;
  /** The current ruleset of the switch namespace, for failure messages. */
  rules(): Promise<string>;
  /** Userspace TCP proxy in a namespace that delays every chunk by delayMs each way. */
  delayProxy(options: DelayProxyOptions): Promise<DelayProxy>;
  /** Kills every process left in the LAN's namespaces, then deletes them. Idempotent. */
  destroy(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------------
// Small command helpers

const PREFIX = 'shl';
const NAME_RE = /^shl([0-9a-f]{5})-(\d+)-/;
const IP_TIMEOUT_MS = 10_000;
const MAX_HOSTS = 200;

interface CmdResult {
  stdout: string;
  stderr: string;
}

function sh(cmd: string, args: string[], input?: string, timeoutMs = IP_TIMEOUT_MS): Promise<CmdResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 4 * 1024 * 1024, killSignal: 'SIGKILL' }, (error, stdout, stderr) => {
      if (error) {
        const err = new Error(`${cmd} ${args.join(' ')} failed: ${error.message.trim()}${stderr ? `\n${stderr.trim()}` : ''}`, { cause: error });
        reject(err);
      } else resolve({ stdout, stderr });
    });
    if (input !== undefined) child.stdin?.end(input);
  });
}

const ip = (args: string[]) => sh('ip', args);
const nftIn = (ns: string, script: string) => sh('ip', ['netns', 'exec', ns, 'nft', '-f', '-'], script);

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Wall-clock start of a process from /proc, or undefined. Assumes CLK_TCK 100 (Linux default). */
function processStartMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]);
    const btime = Number(/^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'utf8'))?.[1]);
    if (!Number.isFinite(ticks) || !Number.isFinite(btime)) return undefined;
    return btime * 1000 + (ticks * 1000) / 100;
  } catch {
    return undefined;
  }
}

function nsCreatedMs(name: string): number | undefined {
  try {
    return statSync(`/run/netns/${name}`).mtimeMs;
  } catch {
    return undefined;
  }
}

function listNetns(): string[] {
  try {
    return readdirSync('/run/netns');
  } catch {
    return [];
  }
}

const runStartedMs = Date.now() - process.uptime() * 1000;

/** True when the namespace belongs to a LAN whose owning process is still running. */
function ownerAlive(name: string): boolean {
  const match = NAME_RE.exec(name);
  if (!match) return false;
  const pid = Number(match[2]);
  if (pid === process.pid) return liveLans.has(name.slice(0, name.lastIndexOf('-')));
  if (!pidAlive(pid)) return false;
  // A reused pid: the process started after the namespace was made, so it cannot own it.
  const started = processStartMs(pid);
  const created = nsCreatedMs(name);
  return started === undefined || created === undefined || started <= created + 2_000;
}

function killNsProcessesSync(ns: string): void {
  const out = spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8', timeout: IP_TIMEOUT_MS });
  for (const line of (out.stdout ?? '').split('\n')) {
    const pid = Number(line.trim());
    if (Number.isInteger(pid) && pid > 1 && pid !== process.pid) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

async function killNsProcesses(ns: string): Promise<void> {
  let pids: number[];
  try {
    pids = (await ip(['netns', 'pids', ns])).stdout
      .split('\n')
      .map((l) => Number(l.trim()))
      .filter((p) => Number.isInteger(p) && p > 1 && p !== process.pid);
  } catch {
    return;
  }
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/**
 * Deletes leftovers of earlier runs: `shl*` namespaces whose owning process is gone (name parse) or,
 * for names this harness did not make, that are older than this process; the processes left inside
 * them are killed first. Also deletes `shl*` links in the host namespace (the harness never makes any
 * there, so one can only come from an older version or a manual experiment) unless a live LAN owns the id.
 * Returns what it removed.
 */
export async function sweepStale(): Promise<string[]> {
  const removed: string[] = [];
  const liveIds = new Set<string>();
  for (const name of listNetns()) {
    if (!name.startsWith(PREFIX)) continue;
    const match = NAME_RE.exec(name);
    let stale: boolean;
    if (match) stale = !ownerAlive(name);
    else stale = (nsCreatedMs(name) ?? Infinity) < runStartedMs;
    if (!stale) {
      if (match?.[1]) liveIds.add(match[1]);
      continue;
    }
    await killNsProcesses(name);
    try {
      await ip(['netns', 'delete', name]);
      removed.push(`netns ${name}`);
    } catch {
      // raced with its owner or another sweeper
    }
  }
  let links = '';
  try {
    links = (await ip(['-o', 'link', 'show'])).stdout;
  } catch {
    // no links listing: nothing to sweep
  }
  for (const line of links.split('\n')) {
    const name = /^\d+:\s+([^:@\s]+)/.exec(line)?.[1];
    if (!name?.startsWith(PREFIX)) continue;
    const id = /^shl([0-9a-f]{5})/.exec(name)?.[1];
    if (id && liveIds.has(id)) continue;
    try {
      await ip(['link', 'delete', name]);
      removed.push(`link ${name}`);
    } catch {
      // its peer's deletion took it already
    }
  }
  return removed;
}

/** Whether this machine can run the multi-host tests: root, and `ip netns add` works. */
export async function netnsAvailable(): Promise<{ ok: true } | { ok: false; reason: string }> {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'multi-host tests need root (network namespaces)' };
  const probe = `${PREFIX}${randomBytes(3).toString('hex').slice(0, 5)}-${process.pid}-probe`;
  try {
    await ip(['netns', 'add', probe]);
  } catch (error) {
    return { ok: false, reason: `ip netns add failed: ${(error as Error).message.split('\n')[0]}` };
  }
  try {
    await sh('ip', ['netns', 'exec', probe, 'nft', 'list', 'tables']);
  } catch (error) {
    return { ok: false, reason: `nft does not work in a namespace: ${(error as Error).message.split('\n')[0]}` };
  } finally {
    await ip(['netns', 'delete', probe]).catch(() => undefined);
  }
  return { ok: true };
}

// ---------------------------------------------------------------------------------------------------
// Process helpers

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** Sends a signal to the child's whole process group (spawned by `exec`, so it leads one). False if gone. */
export function killGroup(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): boolean {
  if (child.pid === undefined) return false;
  try {
    process.kill(-child.pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Settles with how the child exited; rejects after timeoutMs. */
export function waitForExit(child: ChildProcess, timeoutMs: number): Promise<ExitInfo> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      resolve({ code, signal });
    };
    const timer = setTimeout(() => {
      child.off('exit', onExit);
      reject(new Error(`process ${child.pid} did not exit within ${timeoutMs} ms`));
    }, timeoutMs);
    child.once('exit', onExit);
  });
}

/** The tail of a stream's output, at most maxBytes characters, plus a way to wait for a pattern. */
export class OutputBuffer {
  private text = '';
  private seen = 0;
  private waiters = new Set<() => void>();
  constructor(readonly maxBytes = 64 * 1024) {}

  append(chunk: string): void {
    this.seen += chunk.length;
    this.text += chunk;
    if (this.text.length > this.maxBytes) this.text = this.text.slice(this.text.length - this.maxBytes);
    for (const wake of [...this.waiters]) wake();
  }

  /** The retained tail. */
  toString(): string {
    return this.text;
  }

  /** Characters appended in total (including those no longer retained). */
  get total(): number {
    return this.seen;
  }

  /** Resolves with the match once the retained text matches; rejects on timeout or on `until` settling first. */
  waitFor(pattern: RegExp | string, timeoutMs: number, until?: Promise<unknown>): Promise<string> {
    const test = (): string | undefined => {
      if (typeof pattern === 'string') return this.text.includes(pattern) ? pattern : undefined;
      return pattern.exec(this.text)?.[0];
    };
    const now = test();
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      const check = () => {
        const hit = test();
        if (hit !== undefined) {
          done();
          resolve(hit);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${String(pattern)}; output tail:\n${this.text.slice(-2000)}`));
      }, timeoutMs);
      this.waiters.add(check);
      until?.then(
        () => {
          check();
          if (this.waiters.has(check)) {
            done();
            reject(new Error(`process ended before ${String(pattern)} appeared; output tail:\n${this.text.slice(-2000)}`));
          }
        },
        () => undefined,
      );
    });
  }
}

export interface Captured {
  /** stdout and stderr interleaved. */
  all: OutputBuffer;
  stdout: OutputBuffer;
  stderr: OutputBuffer;
  exited: Promise<ExitInfo>;
}

/** Captures a piped child's output into bounded buffers. */
export function captureOutput(child: ChildProcess, maxBytes = 64 * 1024): Captured {
  const all = new OutputBuffer(maxBytes);
  const stdout = new OutputBuffer(maxBytes);
  const stderr = new OutputBuffer(maxBytes);
  child.stdout?.setEncoding('utf8').on('data', (c: string) => {
    stdout.append(c);
    all.append(c);
  });
  child.stderr?.setEncoding('utf8').on('data', (c: string) => {
    stderr.append(c);
    all.append(c);
  });
  const exited =
    child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve({ code: child.exitCode, signal: child.signalCode })
      : new Promise<ExitInfo>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return { all, stdout, stderr, exited };
}

// ---------------------------------------------------------------------------------------------------
// Addresses

function parseSubnet(subnet: string, hosts: number): { base: number; prefix: number } {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(subnet);
  if (!m) throw new Error(`subnet must look like 10.213.7.0/24, got ${subnet}`);
  const octets = m.slice(1, 5).map(Number);
  const prefix = Number(m[5]);
  if (octets.some((o) => o > 255)) throw new Error(`bad subnet ${subnet}`);
  if (prefix < 16 || prefix > 29) throw new Error(`subnet prefix must be /16 … /29, got /${prefix}`);
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  const addr = octets.reduce((a, o) => ((a << 8) | o) >>> 0, 0);
  const base = (addr & mask) >>> 0;
  if (hosts > 2 ** (32 - prefix) - 2) throw new Error(`${hosts} hosts do not fit in ${subnet}`);
  return { base, prefix };
}

const ipv4 = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');

// ---------------------------------------------------------------------------------------------------
// The LAN

/** Prefixes of LANs of this process not yet destroyed; the exit hook cleans them up synchronously. */
const liveLans = new Map<string, { namespaces: string[]; children: Set<ChildProcess> }>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const [, lan] of liveLans) {
      for (const child of lan.children) killGroup(child, 'SIGKILL');
      for (const ns of lan.namespaces) {
        killNsProcessesSync(ns);
        spawnSync('ip', ['netns', 'delete', ns], { timeout: IP_TIMEOUT_MS });
      }
    }
    liveLans.clear();
  });
}

const FAULT_TABLE = 'shlfault';

// Inline program for delayProxy (runs inside a namespace): argv = listenPort targetIp targetPort delayMs.
const DELAY_PROXY_SOURCE = String.raw`
const net = require('node:net');
const [listenPort, targetIp, targetPort, delayMs] = process.argv.slice(1).map((v, i) => (i === 1 ? v : Number(v)));
const delayed = (from, to) => {
  from.on('data', (chunk) => setTimeout(() => { if (!to.destroyed) to.write(chunk); }, delayMs));
  from.on('end', () => setTimeout(() => to.end(), delayMs));
  from.on('error', () => setTimeout(() => to.destroy(), delayMs));
  from.on('close', () => setTimeout(() => to.destroy(), delayMs + 1));
};
const server = net.createServer((client) => {
  const upstream = net.connect({ host: targetIp, port: targetPort });
  delayed(client, upstream);
  delayed(upstream, client);
});
server.on('error', (e) => { console.error('proxy error ' + e.message); process.exit(1); });
server.listen(listenPort, '0.0.0.0', () => console.log('delay-proxy listening ' + listenPort));
`;

export async function createLan(options: LanOptions): Promise<Lan> {
  const count = options.hosts;
  if (!Number.isInteger(count) || count < 1 || count > MAX_HOSTS) throw new Error(`hosts must be 1 … ${MAX_HOSTS}, got ${count}`);
  const subnet = options.subnet ?? `10.213.${1 + Math.floor(Math.random() * 254)}.0/24`;
  const { base, prefix: plen } = parseSubnet(subnet, count);

  installExitHook();
  await sweepStale();

  const id = randomBytes(3).toString('hex').slice(0, 5);
  const prefix = `${PREFIX}${id}-${process.pid}`;
  const switchNs = `${prefix}-sw`;
  const bridge = `${PREFIX}${id}br`;
  const hosts: LanHost[] = Array.from({ length: count }, (_, i) => ({
    name: `h${i + 1}`,
    ns: `${prefix}-h${i + 1}`,
    ip: ipv4(base + i + 1),
    index: i + 1,
    port: `${PREFIX}${id}p${i + 1}`,
  }));
  const namespaces = [switchNs, ...hosts.map((h) => h.ns)];
  const children = new Set<ChildProcess>();
  liveLans.set(prefix, { namespaces, children });

  let destroyed: Promise<void> | undefined;
  const destroy = (): Promise<void> => {
    destroyed ??= (async () => {
      for (const child of children) killGroup(child, 'SIGKILL');
      for (const child of children) await waitForExit(child, 5_000).catch(() => undefined);
      children.clear();
      for (const ns of namespaces) await killNsProcesses(ns);
      for (const ns of namespaces) await ip(['netns', 'delete', ns]).catch(() => undefined);
      liveLans.delete(prefix);
    })();
    return destroyed;
  };

  try {
    await ip(['netns', 'add', switchNs]);
    for (const h of hosts) await ip(['netns', 'add', h.ns]);
    await ip(['-n', switchNs, 'link', 'set', 'lo', 'up']);
    await ip(['-n', switchNs, 'link', 'add', 'name', bridge, 'type', 'bridge', 'stp_state', '0', 'mcast_snooping', '0']);
    await ip(['-n', switchNs, 'link', 'set', bridge, 'up']);
    await Promise.all(
      hosts.map(async (h) => {
        await ip(['-n', switchNs, 'link', 'add', 'name', h.port, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', h.ns]);
        await ip(['-n', switchNs, 'link', 'set', h.port, 'master', bridge]);
        await ip(['-n', switchNs, 'link', 'set', h.port, 'up']);
        await ip(['-n', h.ns, 'link', 'set', 'lo', 'up']);
        await ip(['-n', h.ns, 'addr', 'add', `${h.ip}/${plen}`, 'dev', 'eth0']);
        await ip(['-n', h.ns, 'link', 'set', 'eth0', 'up']);
        await ip(['-n', h.ns, 'route', 'add', '224.0.0.0/4', 'dev', 'eth0']);
      }),
    );
    await nftIn(
      switchNs,
      [
        `table bridge ${FAULT_TABLE} {`,
        `  chain partition { type filter hook forward priority -10; policy accept; }`,
        `  chain loss { type filter hook forward priority 0; policy accept; }`,
        `}`,
        '',
      ].join('\n'),
    );
  } catch (error) {
    await destroy();
    throw error;
  }

  const host = (ref: HostRef): LanHost => {
    if (typeof ref !== 'string') {
      if (!hosts.includes(ref)) throw new Error(`host ${ref.name} is not on LAN ${prefix}`);
      return ref;
    }
    const found = hosts.find((h) => h.name === ref || h.ns === ref || h.ip === ref);
    if (!found) throw new Error(`no host ${ref} on LAN ${prefix}`);
    return found;
  };

  const exec = (ref: HostRef, cmd: string, args: string[] = [], opts: ExecOptions = {}): ChildProcess => {
    if (destroyed) throw new Error(`LAN ${prefix} is destroyed`);
    const h = host(ref);
    const child = spawn('ip', ['netns', 'exec', h.ns, cmd, ...args], {
      detached: true,
      stdio: opts.stdio ?? ['ignore', 'pipe', 'pipe'],
      env: opts.env ?? process.env,
      ...(opts.cwd ? { cwd: opts.cwd } : {}),
    });
    children.add(child);
    child.once('exit', () => children.delete(child));
    child.once('error', () => children.delete(child));
    return child;
  };

  const execNode = (ref: HostRef, source: string, args: string[] = [], opts: ExecOptions = {}) =>
    exec(ref, process.execPath, ['-e', source, ...args], opts);

  const run = async (
    ref: HostRef,
    cmd: string,
    args: string[] = [],
    opts: ExecOptions & { timeoutMs?: number; maxBytes?: number } = {},
  ): Promise<RunResult> => {
    const child = exec(ref, cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    const out = captureOutput(child, opts.maxBytes);
    const spawnError = new Promise<never>((_, reject) => child.once('error', reject));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child, 'SIGKILL');
    }, opts.timeoutMs ?? 30_000);
    try {
      const exit = await Promise.race([out.exited, spawnError]);
      // let the pipes drain
      await new Promise((r) => setImmediate(r));
      return { ...exit, stdout: out.stdout.toString(), stderr: out.stderr.toString(), timedOut };
    } finally {
      clearTimeout(timer);
    }
  };

  // Fault state, re-rendered atomically into the switch's chains on every change.
  const partitions: Array<[string[], string[]]> = [];
  const drops = new Map<string, number>();
  const quote = (ports: string[]) => (ports.length === 1 ? `"${ports[0]}"` : `{ ${ports.map((p) => `"${p}"`).join(', ')} }`);
  const partitionRules = () =>
    partitions.flatMap(([a, b]) => [
      `add rule bridge ${FAULT_TABLE} partition iifname ${quote(a)} oifname ${quote(b)} drop`,
      `add rule bridge ${FAULT_TABLE} partition iifname ${quote(b)} oifname ${quote(a)} drop`,
    ]);
  const lossRules = () =>
    [...drops].flatMap(([port, p]) => {
      // nft rejects `< 100` against `mod 100` (range 0-99): 100% is a plain drop.
      const match = p >= 100 ? '' : ` numgen random mod 100 < ${p}`;
      return [
        `add rule bridge ${FAULT_TABLE} loss iifname "${port}"${match} drop`,
        `add rule bridge ${FAULT_TABLE} loss oifname "${port}"${match} drop`,
      ];
    });
  const applyPartitions = () => nftIn(switchNs, [`flush chain bridge ${FAULT_TABLE} partition`, ...partitionRules(), ''].join('\n'));
  const applyDrops = () => nftIn(switchNs, [`flush chain bridge ${FAULT_TABLE} loss`, ...lossRules(), ''].join('\n'));

  const partition = async (groupA: HostRef[], groupB: HostRef[]) => {
    const a = groupA.map((r) => host(r).port);
    const b = groupB.map((r) => host(r).port);
    if (a.length === 0 || b.length === 0) throw new Error('partition needs two non-empty groups');
    if (a.some((p) => b.includes(p))) throw new Error('partition groups overlap');
    partitions.push([a, b]);
    await applyPartitions();
  };
  const heal = async () => {
    partitions.length = 0;
    await applyPartitions();
  };
  const dropRandom = async (ref: HostRef, percent: number) => {
    if (!Number.isInteger(percent) || percent < 0 || percent > 100) throw new Error(`percent must be an integer 0 … 100, got ${percent}`);
    const port = host(ref).port;
    if (percent === 0) drops.delete(port);
    else drops.set(port, percent);
    await applyDrops();
  };
  const clearDrops = async () => {
    drops.clear();
    await applyDrops();
  };
  const rules = async () => (await sh('ip', ['netns', 'exec', switchNs, 'nft', 'list', 'ruleset'])).stdout;

  const delayProxy = async (opts: DelayProxyOptions): Promise<DelayProxy> => {
    const h = host(opts.listenNs);
    const child = execNode(h, DELAY_PROXY_SOURCE, [String(opts.listenPort), opts.target.ip, String(opts.target.port), String(opts.delayMs)]);
    const out = captureOutput(child, 16 * 1024);
    try {
      await out.all.waitFor('delay-proxy listening', 10_000, out.exited);
    } catch (error) {
      killGroup(child, 'SIGKILL');
      throw error;
    }
    const stop = async () => {
      killGroup(child, 'SIGKILL');
      await waitForExit(child, 5_000).catch(() => undefined);
    };
    return { process: child, ip: h.ip, port: opts.listenPort, stop, [Symbol.asyncDispose]: stop };
  };

  return {
    prefix,
    subnet,
    switchNs,
    bridge,
    hosts,
    host,
    exec,
    execNode,
    run,
    partition,
    heal,
    dropRandom,
    clearDrops,
    rules,
    delayProxy,
    destroy,
    [Symbol.asyncDispose]: destroy,
  };
}

/** Names of `shl*` namespaces and host-namespace `shl*` links that exist now (for cleanup assertions). */
export async function listShoalNetResources(): Promise<{ namespaces: string[]; links: string[] }> {
  const namespaces = listNetns().filter((n) => n.startsWith(PREFIX));
  const out = (await ip(['-o', 'link', 'show'])).stdout;
  const links = out
    .split('\n')
    .map((l) => /^\d+:\s+([^:@\s]+)/.exec(l)?.[1])
    .filter((n): n is string => n !== undefined && n.startsWith(PREFIX));
  return { namespaces, links };
}
