import '../src/polyfill.js';
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { cpus, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { StatusView } from '../src/api/control/control.js';
import { shoal } from '../test/support/cli.js';
import { captureOutput, createLan, killGroup, netnsAvailable, waitForExit, type Captured, type Lan, type LanHost } from '../test/support/netns.js';
import { CLI_PATH, startTestNode, type TestNode } from '../test/support/node-process.js';
import { measureAppendRate } from './append-rate.js';
import { summarize } from './stats.js';
import { processAlive } from '../test/support/wait.js';

/**
 * Control-plane benchmarks against real nodes. Prints one JSON object on stdout (progress on stderr):
 *
 * 1. startToListed: 2-host network-namespace LAN, mDNS on (inside the namespaces only). h1 runs; h2 is
 *    spawned; time until h1's `GET /state` (what `shoal status --json` prints) lists h2 in `discovered`,
 *    and separately until h2's API answers. A second pass polls with the real CLI inside h1's namespace.
 * 2. failover: 3 loopback nodes (--no-mdns) joined with join codes through the CLI; kill -9 of the master;
 *    time until a survivor names a new master and until a command (nickname) succeeds on a survivor.
 * 3. eventAppend: the LogStore itself, fsynced appends from 64 concurrent appenders (as bench/log-append.ts).
 * 4. catchUp: 2 loopback nodes; SIGSTOP the follower, 10,000 nickname commands on the master through the
 *    HTTP control API, SIGCONT; time until the follower's lastIdx reaches the master's.
 * 5. idleRss: one loopback node with the default model, idle 10 s after healthy: VmRSS of the node process
 *    and of its runner child.
 *
 * Every process, namespace and temp dir it makes is removed at the end, also on failure or Ctrl-C.
 */

// Not strict: bench/run.ts passes the same arguments to every benchmark; unknown ones are ignored.
const { values } = parseArgs({
  strict: false,
  options: {
    quick: { type: 'boolean' },
    reps: { type: 'string' },
    'catchup-events': { type: 'string' },
    'catchup-concurrency': { type: 'string' },
    'append-duration-ms': { type: 'string' },
    'idle-ms': { type: 'string' },
    only: { type: 'string' },
  },
});
/** --quick (bench/run.ts --quick): one repetition of each part, shorter append and idle windows. */
const quick = values.quick === true;

function numberOption(name: keyof typeof values, fallback: number, min: number, max: number): number {
  const raw = values[name];
  const n = typeof raw === 'string' ? Number(raw) : NaN;
  return Number.isFinite(n) ? Math.min(max, Math.max(min, Math.round(n))) : fallback;
}
const reps = numberOption('reps', quick ? 1 : 3, 1, 20);
const catchupEvents = numberOption('catchup-events', quick ? 3000 : 10_000, 1, 100_000);
const catchupConcurrency = numberOption('catchup-concurrency', 64, 1, 512);
const appendDurationMs = numberOption('append-duration-ms', quick ? 500 : 1000, 100, 60_000);
const idleMs = numberOption('idle-ms', quick ? 5000 : 10_000, 0, 600_000);
const only = typeof values.only === 'string' ? new Set(values.only.split(',')) : null;
const enabled = (part: string): boolean => only === null || only.has(part);

const TARGETS = {
  startToListedMs: 500,
  failoverMs: 3000,
  eventsPerS: 20_000,
  catchUpMs: 2000,
  nodeRssMb: 200,
};

// ---------------------------------------------------------------------------------------------------
// Bookkeeping for cleanup

const liveNodes = new Set<TestNode>();
let cleaning: Promise<void> | null = null;
const liveLans = new Set<Lan>();
const tempDirs = new Set<string>();
const strayPids = new Set<number>();

function log(message: string): void {
  process.stderr.write(`[control-plane] ${message}\n`);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** Wall-clock milliseconds, comparable across processes (sub-millisecond). */
const wallNow = (): number => performance.timeOrigin + performance.now();
const round = (x: number, digits = 1): number => Math.round(x * 10 ** digits) / 10 ** digits;


async function stopNode(node: TestNode): Promise<void> {
  if (!liveNodes.has(node)) return;
  liveNodes.delete(node);
  // A stopped process only sees SIGTERM once it runs again.
  try {
    node.process.kill('SIGCONT');
  } catch {
    // gone
  }
  const timer = setTimeout(() => node.process.kill('SIGKILL'), 8000);
  try {
    await node.stop('SIGTERM');
  } finally {
    clearTimeout(timer);
    // stop() removes the data dir; a runner child still writing into it can make that fail once.
    await rm(node.dataDir, { recursive: true, force: true, maxRetries: 3 }).catch(() => undefined);
  }
}

async function startNode(args: string[]): Promise<TestNode> {
  const node = await startTestNode({ args, readyTimeoutMs: 90_000 });
  liveNodes.add(node);
  // Started while the cleanup already ran (a slow start of a batch that failed): stop it at once.
  if (cleaning !== null) {
    await stopNode(node);
    throw new Error('stopping');
  }
  return node;
}

/** Starts nodes in parallel; if any fails, stops the others before throwing. */
async function startNodes(argsList: string[][]): Promise<TestNode[]> {
  const settled = await Promise.allSettled(argsList.map((args) => startNode(args)));
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    await Promise.all(settled.map((s) => (s.status === 'fulfilled' ? stopNode(s.value).catch(() => undefined) : undefined)));
    throw failed.reason;
  }
  return settled.map((s) => (s as PromiseFulfilledResult<TestNode>).value);
}

async function makeTempDir(prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await Promise.all([...liveNodes].map((n) => stopNode(n).catch(() => undefined)));
    for (const lan of liveLans) await lan.destroy().catch(() => undefined);
    liveLans.clear();
    for (const pid of strayPids) if (processAlive(pid)) process.kill(pid, 'SIGKILL');
    for (const dir of tempDirs) await rm(dir, { recursive: true, force: true }).catch(() => undefined);
    tempDirs.clear();
  })();
  return cleaning;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------------
// Small HTTP helpers for loopback nodes (the same routes the CLI calls)

async function adminToken(node: TestNode): Promise<string> {
  return (await readFile(join(node.dataDir, 'run', 'admin.token'), 'utf8')).trim();
}

async function state(node: TestNode, timeoutMs = 2000): Promise<StatusView> {
  const res = await fetch(`${node.url}/state`, { signal: AbortSignal.timeout(Math.max(1, Math.round(timeoutMs))) });
  if (!res.ok) throw new Error(`GET /state answered ${res.status}`);
  return (await res.json()) as StatusView;
}

async function nickname(node: TestNode, token: string, target: string, name: string, timeoutMs = 20_000): Promise<{ ok: boolean; status: number; text: string }> {
  const res = await fetch(`${node.url}/cluster/nickname`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ node: target, nickname: name }),
    signal: AbortSignal.timeout(Math.max(1, Math.round(timeoutMs))),
  });
  const text = await res.text();
  return { ok: res.ok, status: res.status, text };
}

async function until<T>(what: string, timeoutMs: number, intervalMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  let last: unknown = null;
  while (performance.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

function joinCodeOf(stdout: string): string {
  const code = /shoal1-\S+/.exec(stdout)?.[0];
  if (!code) throw new Error(`no join code in: ${stdout}`);
  return code;
}

/** Founds a cluster on nodes[0] and joins the others with join codes through the CLI; waits for agreement. */
async function formCluster(nodes: TestNode[]): Promise<void> {
  const [first, ...rest] = nodes;
  for (const node of rest) {
    const invite = await shoal(first!, 'invite', '--code');
    if (invite.code !== 0) throw new Error(`shoal invite --code failed: ${invite.stderr}`);
    const joined = await shoal(node, 'join', joinCodeOf(invite.stdout));
    if (joined.code !== 0) throw new Error(`shoal join failed: ${joined.stderr}`);
  }
  await converged(nodes, 20_000);
}

async function converged(nodes: TestNode[], timeoutMs: number): Promise<StatusView[]> {
  return until(`${nodes.length} nodes to agree`, timeoutMs, 100, async () => {
    const all = await Promise.all(nodes.map((n) => state(n)));
    const masters = new Set(all.map((s) => s.masterId));
    const hashes = new Set(all.map((s) => s.stateHash));
    const ok = all.every((s) => s.role === 'member' && s.members.length === nodes.length) && masters.size === 1 && !masters.has(null) && hashes.size === 1;
    return ok ? all : undefined;
  });
}

function vmKb(pid: number, field: 'VmRSS' | 'VmHWM'): number | null {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) : null;
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------------
// 1. Start to listed (network namespaces, mDNS inside them only)

/**
 * Runs inside a namespace: polls `url` every `intervalMs` until it answers (mode any) or its JSON lists
 * `name` in `discovered` (mode discovered), then prints `hit {at, polledAt}` (wall-clock ms) and exits.
 */
const WATCHER_SOURCE = String.raw`
const [url, intervalMs, mode, name, deadlineMs] = process.argv.slice(1);
const now = () => performance.timeOrigin + performance.now();
const end = now() + Number(deadlineMs);
(async () => {
  // Load fetch (undici) before saying ready, so the first real poll costs what every later one does.
  await fetch(url, { signal: AbortSignal.timeout(1000) }).then((r) => r.text(), () => undefined);
  if (mode === 'discovered') {
    const first = await fetch(url, { signal: AbortSignal.timeout(2000) }).then((r) => r.json(), () => null);
    if (first && first.discovered.some((d) => d.name === name)) { console.log('already-listed'); process.exit(3); }
  }
  console.log('ready');
  while (now() < end) {
    const polledAt = now();
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      const text = await res.text();
      if (mode === 'any' || JSON.parse(text).discovered.some((d) => d.name === name)) {
        console.log('hit ' + JSON.stringify({ at: now(), polledAt }));
        process.exit(0);
      }
    } catch {}
    await new Promise((r) => setTimeout(r, Number(intervalMs)));
  }
  console.log('timeout');
  process.exit(2);
})();
`;

interface Watcher {
  child: ChildProcess;
  out: Captured;
  hit: Promise<{ at: number; polledAt: number } | null>;
}

async function startWatcher(lan: Lan, host: LanHost, url: string, intervalMs: number, mode: 'any' | 'discovered', name: string, deadlineMs: number): Promise<Watcher> {
  const child = lan.execNode(host, WATCHER_SOURCE, [url, String(intervalMs), mode, name, String(deadlineMs)]);
  const out = captureOutput(child, 16 * 1024);
  const first = await out.stdout.waitFor(/ready|already-listed/, 15_000, out.exited);
  if (first === 'already-listed') throw new Error(`${host.name} still lists ${name} before the start`);
  const hit = out.stdout
    .waitFor(/hit (\{.*\})|timeout/, deadlineMs + 10_000, out.exited)
    .then((line) => (line.startsWith('hit ') ? (JSON.parse(line.slice(4)) as { at: number; polledAt: number }) : null))
    .catch(() => null);
  return { child, out, hit };
}

async function startToListed(): Promise<Record<string, unknown>> {
  const available = await netnsAvailable();
  if (!available.ok) return { skipped: available.reason };
  const lan = await createLan({ hosts: 2 });
  liveLans.add(lan);
  const root = await makeTempDir('shoal-bench-cp-lan-');
  const [h1, h2] = lan.hosts as [LanHost, LanHost];
  const port = 52600;
  const runArgs = (host: LanHost, dataDir: string): string[] => [
    CLI_PATH, 'run', '--name', host.name, '--data-dir', dataDir, '--threads', '1', '--api-port', String(port), '--p2p-port', '52601',
  ];
  const env = { ...process.env, SHOAL_LOG_LEVEL: 'warn', SHOAL_PROVISION: '0' };
  const groups: ChildProcess[] = [];
  const spawnNode = (host: LanHost, dataDir: string): { child: ChildProcess; out: Captured } => {
    const child = lan.exec(host, process.execPath, runArgs(host, dataDir), { env });
    groups.push(child);
    return { child, out: captureOutput(child, 64 * 1024) };
  };
  const stopGroup = async (child: ChildProcess): Promise<void> => {
    killGroup(child, 'SIGTERM');
    await waitForExit(child, 6000).catch(async () => {
      killGroup(child, 'SIGKILL');
      await waitForExit(child, 3000).catch(() => undefined);
    });
  };
  const h1Dir = join(root, 'h1');
  const cliStatus = async (): Promise<{ view: StatusView | null; ms: number }> => {
    const started = performance.now();
    const res = await lan.run(h1, process.execPath, [CLI_PATH, 'status', '--json', '--data-dir', h1Dir], { timeoutMs: 15_000 });
    const ms = performance.now() - started;
    return { view: res.code === 0 ? (JSON.parse(res.stdout) as StatusView) : null, ms };
  };
  const listsH2 = (view: StatusView | null): boolean => view?.discovered.some((d) => d.name === h2.name) ?? false;

  try {
    const first = spawnNode(h1, h1Dir);
    await until('h1 to answer shoal status', 60_000, 200, async () => ((await cliStatus()).view ? true : undefined)).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n--- h1 output ---\n${first.out.all.toString().slice(-4000)}`);
    });

    // Warm-up start of h2 (unmeasured): generates the built-in model once, warms the page cache.
    const warmDir = join(root, 'h2-warm');
    const warm = spawnNode(h2, warmDir);
    await until('h1 to list h2 (warm-up)', 30_000, 200, async () => (listsH2((await cliStatus()).view) ? true : undefined)).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n--- h2 output ---\n${warm.out.all.toString().slice(-4000)}`);
    });
    await stopGroup(warm.child);
    const waitUnlisted = () => until('h1 to forget h2', 20_000, 250, async () => (listsH2((await cliStatus()).view) ? undefined : true));
    await waitUnlisted();

    const samples = {
      http: { listed: [] as number[], listedPolledAt: [] as number[], apiUp: [] as number[] },
      cli: { listed: [] as number[], listedRunStart: [] as number[], apiUp: [] as number[], runMs: [] as number[] },
    };
    const failures: string[] = [];
    for (const pass of ['http', 'cli'] as const) {
      for (let rep = 0; rep < reps; rep++) {
        // A fresh identity each time (a new machine appearing), with the model already in place.
        const dir = join(root, `h2-${pass}-${rep}`);
        await mkdir(dir, { recursive: true });
        await cp(join(warmDir, 'models'), join(dir, 'models'), { recursive: true });
        const apiWatch = await startWatcher(lan, h2, `http://127.0.0.1:${port}/healthz`, 20, 'any', '', 30_000);
        const listWatch = pass === 'http' ? await startWatcher(lan, h1, `http://127.0.0.1:${port}/state`, 50, 'discovered', h2.name, 30_000) : null;
        const spawnedAt = wallNow();
        const second = spawnNode(h2, dir);
        let listedAt: number | null = null;
        let lowerBound: number | null = null;
        if (listWatch) {
          const hit = await listWatch.hit;
          listedAt = hit?.at ?? null;
          lowerBound = hit?.polledAt ?? null;
        } else {
          // The CLI itself, back to back (each run is a whole Node process start), 50 ms apart.
          const deadline = performance.now() + 30_000;
          while (performance.now() < deadline) {
            const runStart = wallNow();
            const { view, ms } = await cliStatus();
            samples.cli.runMs.push(ms);
            if (listsH2(view)) {
              listedAt = wallNow();
              lowerBound = runStart;
              break;
            }
            await sleep(50);
          }
        }
        const api = await apiWatch.hit;
        const label = `${pass} rep ${rep + 1}`;
        if (listedAt === null || api === null) {
          failures.push(`${label}: ${listedAt === null ? 'h2 never listed' : 'h2 API never answered'}; h2 output: ${second.out.all.toString().slice(-1000)}`);
        } else {
          const s = samples[pass];
          s.listed.push(listedAt - spawnedAt);
          s.apiUp.push(api.at - spawnedAt);
          if (pass === 'http') samples.http.listedPolledAt.push(lowerBound! - spawnedAt);
          else samples.cli.listedRunStart.push(lowerBound! - spawnedAt);
          log(`startToListed ${label}: API up ${round(api.at - spawnedAt)} ms, listed ${round(listedAt - spawnedAt)} ms`);
        }
        for (const w of [apiWatch, listWatch]) if (w) killGroup(w.child, 'SIGKILL');
        await stopGroup(second.child);
        await waitUnlisted();
      }
    }
    await stopGroup(first.child);
    const listed = summarize(samples.http.listed);
    const apiUp = summarize(samples.http.apiUp);
    return {
      method:
        'h1 and h2 in their own network namespaces on one bridge, mDNS on; h1 runs; h2 spawned (fresh identity, model already on disk). ' +
        "listedMs: until a poller inside h1's namespace sees h2 in GET /state .discovered (the route behind `shoal status --json`), polled every 50 ms; " +
        "apiUpMs: until h2's /healthz answers at all (poller inside h2's namespace, every 20 ms). The cli pass polls with `shoal status --json` run inside h1's namespace instead.",
      listedMs: listed,
      listedMsLowerBound: summarize(samples.http.listedPolledAt),
      apiUpMs: apiUp,
      listedAfterApiUpMs: summarize(samples.http.listed.map((l, i) => l - samples.http.apiUp[i]!)),
      cliPass: {
        listedMs: summarize(samples.cli.listed),
        listedMsLowerBound: summarize(samples.cli.listedRunStart),
        apiUpMs: summarize(samples.cli.apiUp),
        statusRunMs: summarize(samples.cli.runMs),
        note: 'each `shoal status --json` is a whole Node process start, so this pass resolves only to about one CLI run (statusRunMs) and its CPU use competes with the starting node',
      },
      failures,
      targetMs: TARGETS.startToListedMs,
      meetsTarget: listed.n > 0 && listed.median <= TARGETS.startToListedMs,
    };
  } finally {
    for (const child of groups) killGroup(child, 'SIGKILL');
    await lan.destroy();
    liveLans.delete(lan);
  }
}

// ---------------------------------------------------------------------------------------------------
// 2. Failover

async function failover(): Promise<Record<string, unknown>> {
  const newMaster: number[] = [];
  const agreed: number[] = [];
  const accepted: number[] = [];
  const cliCommand: number[] = [];
  const termJumps: number[] = [];
  const failures: string[] = [];
  const orphanRunners: number[] = [];
  for (let rep = 0; rep < reps; rep++) {
    const names = ['alpha', 'beta', 'gamma'];
    const nodes = await startNodes(names.map((name) => ['--name', name]));
    try {
      await formCluster(nodes);
      await sleep(500);
      const [before] = await converged(nodes, 10_000);
      const masterIndex = nodes.findIndex((_, i) => before!.members.find((m) => m.isMaster)?.name === names[i]);
      const master = nodes[masterIndex]!;
      const survivors = nodes.filter((n) => n !== master);
      const survivorNames = names.filter((_, i) => i !== masterIndex);
      const token = await adminToken(survivors[0]!);
      const health = (await (await fetch(`${master.url}/healthz`)).json()) as { models: { pid: number | null }[] };
      const runnerPid = health.models[0]?.pid ?? null;

      const killedAt = performance.now();
      master.process.kill('SIGKILL');
      let newMasterMs: number | null = null;
      let agreedMs: number | null = null;
      let acceptedMs: number | null = null;
      let lastError = '';
      const deadline = killedAt + 20_000;
      const watch = (async () => {
        while (performance.now() < deadline && (newMasterMs === null || agreedMs === null)) {
          const views = await Promise.all(survivors.map((n) => state(n, 1000).catch(() => null)));
          const at = performance.now() - killedAt;
          const masters = views.map((v) => v?.masterId ?? null);
          if (newMasterMs === null && masters.some((m) => m !== null && m !== before!.masterId)) newMasterMs = at;
          if (agreedMs === null && masters[0] !== null && masters[0] !== before!.masterId && masters.every((m) => m === masters[0])) {
            agreedMs = at;
            termJumps.push(views[0]!.term - before!.term);
          }
          await sleep(25);
        }
      })();
      const command = (async () => {
        for (let attempt = 0; performance.now() < deadline; attempt++) {
          try {
            const res = await nickname(survivors[0]!, token, survivorNames[1]!, `fo${rep}-${attempt}`, Math.max(1, Math.round(deadline - performance.now())));
            if (res.ok) {
              acceptedMs = performance.now() - killedAt;
              return;
            }
            lastError = `${res.status} ${res.text}`;
          } catch (error) {
            lastError = (error as Error).message;
          }
          await sleep(50);
        }
      })();
      await Promise.all([watch, command]);
      if (acceptedMs === null || newMasterMs === null) {
        failures.push(`rep ${rep + 1}: ${acceptedMs === null ? `no command accepted within 20 s (${lastError})` : 'no new master within 20 s'}`);
      } else {
        newMaster.push(newMasterMs);
        accepted.push(acceptedMs);
        if (agreedMs !== null) agreed.push(agreedMs);
        log(`failover rep ${rep + 1}: new master ${round(newMasterMs)} ms, agreed ${agreedMs === null ? '-' : round(agreedMs)} ms, command accepted ${round(acceptedMs)} ms`);
      }
      // The CLI as an operator would type it, once the cluster has a master again.
      const cliStarted = performance.now();
      const cli = await shoal(survivors[1]!, 'nickname', survivorNames[0]!, `cli${rep}`);
      if (cli.code === 0) cliCommand.push(performance.now() - cliStarted);
      else failures.push(`rep ${rep + 1}: shoal nickname after failover failed: ${cli.stderr.trim()}`);
      if (runnerPid !== null) {
        await sleep(1000);
        if (processAlive(runnerPid)) {
          orphanRunners.push(runnerPid);
          strayPids.add(runnerPid);
          process.kill(runnerPid, 'SIGKILL');
        }
      }
    } catch (error) {
      failures.push(`rep ${rep + 1}: ${(error as Error).message}`);
    } finally {
      await Promise.all(nodes.map((n) => stopNode(n).catch(() => undefined)));
    }
  }
  const acceptedSummary = summarize(accepted);
  return {
    method:
      '3 nodes on loopback (--no-mdns), fresh data dirs, cluster formed with `shoal invite --code` / `shoal join`; kill -9 of the master. ' +
      'newMasterMs: until a survivor’s GET /state names another master (polled every 25 ms); agreedMs: both survivors name the same new master; ' +
      'acceptedMs: until POST /cluster/nickname (the route `shoal nickname` calls) on a survivor succeeds, sent right after the kill and retried; ' +
      'cliNicknameMs: one `shoal nickname` afterwards (includes the CLI’s process start).',
    newMasterMs: summarize(newMaster),
    agreedMs: summarize(agreed),
    acceptedMs: acceptedSummary,
    cliNicknameMs: summarize(cliCommand),
    termIncrease: summarize(termJumps),
    orphanRunnerPids: orphanRunners,
    failures,
    targetMs: TARGETS.failoverMs,
    meetsTarget: acceptedSummary.n > 0 && acceptedSummary.median <= TARGETS.failoverMs,
  };
}

// ---------------------------------------------------------------------------------------------------
// 3. Event append rate (the LogStore itself, as bench/log-append.ts)

async function eventAppend(): Promise<Record<string, unknown>> {
  const appenders = 64;
  const runOnce = async (): Promise<{ eventsPerS: number; fsyncsPerS: number }> => {
    const parent = await makeTempDir('shoal-bench-cp-log-');
    try {
      return await measureAppendRate(parent, appenders, appendDurationMs);
    } finally {
      await rm(parent, { recursive: true, force: true });
      tempDirs.delete(parent);
    }
  };
  await runOnce(); // warm-up
  const events: number[] = [];
  const fsyncs: number[] = [];
  for (let i = 0; i < reps; i++) {
    const r = await runOnce();
    events.push(r.eventsPerS);
    fsyncs.push(r.fsyncsPerS);
    log(`eventAppend run ${i + 1}: ${Math.round(r.eventsPerS)} events/s, ${Math.round(r.fsyncsPerS)} fsyncs/s`);
  }
  const eventsPerS = summarize(events);
  const fsyncsPerS = summarize(fsyncs);
  return {
    method: `LogStore.append of one ~200 B record per call, ${appenders} concurrent appenders (group commit), ${appendDurationMs} ms per run, fresh dir in ${tmpdir()} each run`,
    appenders,
    eventsPerS,
    fsyncsPerS,
    recordsPerFsync: round(eventsPerS.median / fsyncsPerS.median),
    target: TARGETS.eventsPerS,
    meetsTarget: eventsPerS.median >= TARGETS.eventsPerS,
  };
}

// ---------------------------------------------------------------------------------------------------
// 4. Catch-up of a 10k-event tail (real processes)

async function catchUp(): Promise<Record<string, unknown>> {
  const caught: number[] = [];
  const stable: number[] = [];
  const masterless: number[] = [];
  const produceRate: number[] = [];
  const details: Record<string, unknown>[] = [];
  const failures: string[] = [];
  const names = ['alpha', 'beta'];
  const nodes = await startNodes(names.map((name) => ['--name', name]));
  try {
    await formCluster(nodes);
    for (let rep = 0; rep < reps; rep++) {
      const views = await converged(nodes, 30_000);
      const masterName = views[0]!.members.find((m) => m.isMaster)!.name;
      const master = nodes[names.indexOf(masterName)]!;
      const follower = nodes.find((n) => n !== master)!;
      const followerName = names[nodes.indexOf(follower)]!;
      const token = await adminToken(master);
      const termBefore = views[0]!.term;

      follower.process.kill('SIGSTOP');
      const stoppedAt = performance.now();
      let issued = 0;
      let ok = 0;
      let failed = 0;
      let firstFailure = '';
      // Bounded: a master that takes commands very slowly ends the tail early (reported as commandsAcknowledged).
      const produceDeadline = stoppedAt + 90_000;
      const producer = async (): Promise<void> => {
        while (issued < catchupEvents && failed < 100 && performance.now() < produceDeadline) {
          const i = issued++;
          try {
            const res = await nickname(master, token, followerName, `c${rep}-${i}`);
            if (res.ok) ok++;
            else {
              failed++;
              firstFailure ||= `${res.status} ${res.text}`;
            }
          } catch (error) {
            failed++;
            firstFailure ||= (error as Error).message;
          }
        }
      };
      await Promise.all(Array.from({ length: catchupConcurrency }, producer));
      const producedMs = performance.now() - stoppedAt;
      const masterBefore = await state(master);
      const target = masterBefore.lastIdx;
      const followerHealthAtResume = masterBefore.members.find((m) => m.name === followerName)?.health.level ?? null;

      follower.process.kill('SIGCONT');
      const resumedAt = performance.now();
      let caughtMs: number | null = null;
      let stableMs: number | null = null;
      let minMasterIdx = target;
      let masterlessFromMs: number | null = null;
      let last: StatusView[] = [];
      const timeline: string[] = [];
      let previous = '';
      const deadline = resumedAt + 30_000;
      while (performance.now() < deadline) {
        const pair = await Promise.all([state(master, 2000).catch(() => null), state(follower, 2000).catch(() => null)]);
        const at = performance.now() - resumedAt;
        if (pair[0] && pair[1]) {
          const [m, f] = pair as [StatusView, StatusView];
          last = [m, f];
          minMasterIdx = Math.min(minMasterIdx, m.lastIdx);
          if (masterlessFromMs === null && m.masterId !== m.nodeId) masterlessFromMs = at;
          const who = (id: string | null): string => (id === null ? '-' : id === m.nodeId ? masterName : id === f.nodeId ? followerName : '?');
          const line = `${masterName} idx ${m.lastIdx} term ${m.term} master ${who(m.masterId)} | ${followerName} idx ${f.lastIdx} term ${f.term} master ${who(f.masterId)}`;
          if (line !== previous && timeline.length < 40) timeline.push(`${Math.round(at)} ms: ${line}`);
          previous = line;
          if (caughtMs === null && f.lastIdx >= target && f.lastIdx === m.lastIdx) caughtMs = at;
          if (f.lastIdx === m.lastIdx && f.stateHash === m.stateHash && m.masterId !== null && m.masterId === f.masterId) {
            if (f.lastIdx >= target) {
              stableMs = at;
              break;
            }
          }
        }
        await sleep(20);
      }
      const finalIdx = last[0]?.lastIdx ?? null;
      const lost = finalIdx === null ? null : Math.max(0, target - Math.min(finalIdx, minMasterIdx));
      produceRate.push((ok * 1000) / producedMs);
      if (caughtMs !== null) caught.push(caughtMs);
      if (stableMs !== null) stable.push(stableMs);
      if (stableMs !== null && masterlessFromMs !== null) masterless.push(stableMs - masterlessFromMs);
      const masterChanged = last[0] !== undefined && last[0].masterId !== masterBefore.nodeId;
      details.push({
        rep: rep + 1,
        commandsAcknowledged: ok,
        commandsFailed: failed,
        ...(firstFailure ? { firstFailure } : {}),
        produceMs: round(producedMs),
        followerHealthOnMasterAtResume: followerHealthAtResume,
        masterLastIdxAtResume: target,
        caughtUpMs: caughtMs === null ? null : round(caughtMs),
        stableMs: stableMs === null ? null : round(stableMs),
        // The resumed follower's election deposes the master: from then until the stable poll nobody leads.
        masterLostLeadAtMs: masterlessFromMs === null ? null : round(masterlessFromMs),
        termBefore,
        termAfter: last[0]?.term ?? null,
        masterChanged,
        oldMasterLowestLastIdxSeen: minMasterIdx,
        finalLastIdx: finalIdx,
        ...(lost ? { acknowledgedRecordsLost: lost } : {}),
        timeline,
      });
      log(`catchUp rep ${rep + 1}: ${ok} commands in ${round(producedMs)} ms; caught up ${caughtMs === null ? 'never' : `${round(caughtMs)} ms`}, stable ${stableMs === null ? 'never' : `${round(stableMs)} ms`}${masterChanged ? ', master changed' : ''}${lost ? `, ${lost} records LOST` : ''}`);
      if (caughtMs === null) failures.push(`rep ${rep + 1}: the follower did not reach idx ${target} within 30 s (final ${last.map((s) => s.lastIdx).join('/')})`);
      if (failed > 0) failures.push(`rep ${rep + 1}: ${failed} commands failed: ${firstFailure}`);
      if (ok + failed < catchupEvents) failures.push(`rep ${rep + 1}: only ${ok + failed} of ${catchupEvents} commands issued within 90 s`);
      if (lost) failures.push(`rep ${rep + 1}: the old master's log went back from ${target} to ${minMasterIdx}: ${lost} acknowledged records lost`);
    }
  } catch (error) {
    failures.push((error as Error).message);
  } finally {
    await Promise.all(nodes.map((n) => stopNode(n).catch(() => undefined)));
  }
  const caughtSummary = summarize(caught);
  return {
    method:
      `real processes: 2 loopback nodes (--no-mdns) in a cluster; SIGSTOP the follower; ${catchupEvents} nickname commands on the master through ` +
      `POST /cluster/nickname with the admin token, ${catchupConcurrency} in flight; SIGCONT. caughtUpMs: until the follower's lastIdx equals the ` +
      "master's and is at least the master's lastIdx at SIGCONT (GET /state on both every 20 ms); stableMs: also one agreed master and equal stateHash. " +
      'The same cluster is reused for every repetition.',
    events: catchupEvents,
    commandsPerS: summarize(produceRate),
    caughtUpMs: caughtSummary,
    stableMs: summarize(stable),
    masterlessWindowMs: summarize(masterless),
    reps: details,
    failures,
    targetMs: TARGETS.catchUpMs,
    meetsTarget: caughtSummary.n === reps && caughtSummary.median <= TARGETS.catchUpMs,
  };
}

// ---------------------------------------------------------------------------------------------------
// 5. Idle RSS

async function idleRss(): Promise<Record<string, unknown>> {
  const nodeRss: number[] = [];
  const nodeHwm: number[] = [];
  const runnerRss: number[] = [];
  const failures: string[] = [];
  // The repetitions are separate nodes started together (they share nothing; an idle node's RSS does not
  // depend on its neighbours), so the idle wait is paid once.
  const nodes = await startNodes(Array.from({ length: reps }, (_, i) => ['--name', `idle${i + 1}`]));
  try {
    await sleep(idleMs);
    for (const [rep, node] of nodes.entries()) {
      const health = (await (await fetch(`${node.url}/healthz`)).json()) as { ok: boolean; models: { pid: number | null }[] };
      const runnerPid = health.models[0]?.pid ?? null;
      const rss = vmKb(node.process.pid!, 'VmRSS');
      const hwm = vmKb(node.process.pid!, 'VmHWM');
      const runner = runnerPid === null ? null : vmKb(runnerPid, 'VmRSS');
      if (rss !== null) nodeRss.push(rss / 1024);
      if (hwm !== null) nodeHwm.push(hwm / 1024);
      if (runner !== null) runnerRss.push(runner / 1024);
      else failures.push(`rep ${rep + 1}: no runner pid in /healthz (${JSON.stringify(health.models)})`);
      if (!health.ok) failures.push(`rep ${rep + 1}: /healthz not ok after the idle wait`);
      log(`idleRss rep ${rep + 1}: node ${rss === null ? '?' : round(rss / 1024)} MiB, runner ${runner === null ? '?' : round(runner / 1024)} MiB`);
    }
  } finally {
    await Promise.all(nodes.map((n) => stopNode(n).catch(() => undefined)));
  }
  const node = summarize(nodeRss);
  return {
    method: `${reps} loopback nodes started together, each measured once (--no-mdns, default model shoal/tiny, --threads 1), idle ${idleMs} ms after /healthz is 200; VmRSS from /proc/<pid>/status (MiB); runner pid from /healthz models[0].pid`,
    nodeRssMiB: node,
    nodePeakRssMiB: summarize(nodeHwm),
    runnerRssMiB: summarize(runnerRss),
    failures,
    targetNodeRssMiB: TARGETS.nodeRssMb,
    meetsTarget: node.n > 0 && node.median <= TARGETS.nodeRssMb,
  };
}

// ---------------------------------------------------------------------------------------------------

function machine(): Record<string, unknown> {
  const list = cpus();
  let memAvailableMiB: number | null = null;
  try {
    const kb = /^MemAvailable:\s+(\d+) kB/m.exec(readFileSync('/proc/meminfo', 'utf8'))?.[1];
    if (kb) memAvailableMiB = Math.round(Number(kb) / 1024);
  } catch {
    // not Linux
  }
  return {
    cpuModel: list[0]?.model ?? 'unknown',
    logicalCores: list.length,
    memoryMiB: Math.round(totalmem() / 1024 / 1024),
    memAvailableMiB,
    kernel: release(),
    node: process.version,
    tmpdir: tmpdir(),
  };
}

async function main(): Promise<void> {
  const started = performance.now();
  if (!existsSync(CLI_PATH)) throw new Error(`${CLI_PATH} is missing: build first (npx tsc -p tsconfig.json)`);
  const result: Record<string, unknown> = { benchmark: 'control-plane', quick, reps, machine: machine() };
  const parts: [string, () => Promise<Record<string, unknown>>][] = [
    ['eventAppend', eventAppend],
    ['startToListed', startToListed],
    ['failover', failover],
    ['catchUp', catchUp],
    ['idleRss', idleRss],
  ];
  let failed = false;
  try {
    for (const [name, run] of parts) {
      if (!enabled(name)) continue;
      const partStarted = performance.now();
      log(`== ${name}`);
      try {
        result[name] = { ...(await run()), partSeconds: round((performance.now() - partStarted) / 1000) };
      } catch (error) {
        failed = true;
        result[name] = { error: (error as Error).message, partSeconds: round((performance.now() - partStarted) / 1000) };
        log(`${name} failed: ${(error as Error).message}`);
      }
    }
  } finally {
    await cleanup();
  }
  result.targets = {
    startToListedMs: `<= ${TARGETS.startToListedMs}`,
    failoverMs: `<= ${TARGETS.failoverMs}`,
    eventsPerS: `>= ${TARGETS.eventsPerS}`,
    catchUpMs: `<= ${TARGETS.catchUpMs}`,
    nodeRssMiB: `<= ${TARGETS.nodeRssMb}`,
  };
  result.totalSeconds = round((performance.now() - started) / 1000);
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  if (failed) process.exitCode = 1;
}

await main();
// Everything it started is stopped by now; do not wait on anything left (a pipe, a timer).
process.stdout.write('', () => process.exit(process.exitCode ?? 0));
