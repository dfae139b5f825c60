// The chaos suite's parts (issue #16, item 9): a seeded fault schedule, clients that record a history of
// writes, the faults themselves on a namespace LAN, and a Jepsen-style checker of the history against
// every node's log. The schedule and the checker are pure; the rest drives real `shoal run` processes.
import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { LogStore } from '../../src/master/log/store.js';
import type { LogRecord } from '../../src/master/state/record.js';
import { reapOrphans } from '../../src/worker/engines/orphans.js';
import { eventually } from './cli.js';
import { lanCli, startLanNode, type LanNode } from './lan-node.js';
import { createLan, killGroup, waitForExit, type Lan } from './netns.js';

// ---------------------------------------------------------------------------------------------------
// Schedule

/** mulberry32: small, fast and the same on every machine, so a seed replays the same schedule. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type FaultKind = 'kill-master' | 'kill-follower' | 'stop' | 'partition' | 'loss';

/** One fault; faults run one after another, each followed by a wait for the cluster to agree again. */
export interface FaultStep {
  kind: FaultKind;
  /** How long the fault lasts: a killed node stays down, a stopped one stopped, a partition or loss in place. */
  durationMs: number;
  /** In [0, 1): which of the candidate nodes (sorted by name) is the victim, chosen when the step runs. */
  pick: number;
  /** Quiet time after the cluster agrees again, before the next step. */
  settleMs: number;
}

export interface ScheduleCounts {
  masterKills: number;
  followerKills?: number;
  stops?: number;
  partitions?: number;
  losses?: number;
}

/** Every count and duration has an upper bound, so a schedule from any seed ends in bounded time. */
export const MAX_FAULTS = 1000;
const DURATION_MS: Record<FaultKind, [number, number]> = {
  'kill-master': [500, 2000],
  'kill-follower': [500, 2000],
  stop: [5000, 5000],
  partition: [10_000, 10_000],
  loss: [15_000, 15_000],
};
const SETTLE_MS: [number, number] = [500, 1500];

export function makeSchedule(seed: number, counts: ScheduleCounts): FaultStep[] {
  const random = seededRandom(seed);
  const kinds: FaultKind[] = [
    ...Array<FaultKind>(counts.masterKills).fill('kill-master'),
    ...Array<FaultKind>(counts.followerKills ?? 0).fill('kill-follower'),
    ...Array<FaultKind>(counts.stops ?? 0).fill('stop'),
    ...Array<FaultKind>(counts.partitions ?? 0).fill('partition'),
    ...Array<FaultKind>(counts.losses ?? 0).fill('loss'),
  ];
  if (kinds.length > MAX_FAULTS) throw new Error(`a schedule holds at most ${MAX_FAULTS} faults, asked for ${kinds.length}`);
  // Fisher-Yates with the seeded generator: the order of the faults is part of what a seed replays.
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  const between = ([lo, hi]: [number, number]): number => Math.round(lo + random() * (hi - lo));
  return kinds.map((kind) => ({ kind, durationMs: between(DURATION_MS[kind]), pick: random(), settleMs: between(SETTLE_MS) }));
}

// ---------------------------------------------------------------------------------------------------
// History and checker

/**
 * One write as its client saw it. `ack`: answered 200, so it must be in every final log exactly once.
 * `fail`: the connection was refused, so it never left the client and must be in no log. `unknown`: any
 * other end (timeout, reset, an error answer): it may or may not have been decided, but at most once.
 */
export interface Write {
  client: string;
  value: string;
  startMs: number;
  endMs: number;
  outcome: 'ack' | 'fail' | 'unknown';
  detail?: string;
}

/** The writes one node's log decided: the records whose origin is a chaos write, in log order. */
export interface NodeLog {
  node: string;
  /** The first idx the log still holds (1 unless a checkpoint compacted the records before it). */
  firstIdx: number;
  lastIdx: number;
  writes: { idx: number; value: string; applied: boolean }[];
}

export interface FinalView {
  node: string;
  role: string;
  masterId: string | null;
  stateHash: string;
  lastIdx: number;
  members: number;
}

export interface Verdict {
  ok: boolean;
  problems: string[];
  attempted: number;
  acknowledged: number;
  /** Acknowledged writes missing from some node's log. */
  lost: string[];
  /** Writes found more than once in some node's log. */
  duplicated: string[];
  /** Writes in a log that no client attempted, or whose connection was refused. */
  phantom: string[];
  /** Writes without a definite answer that were decided anyway (allowed, once). */
  unknownDecided: number;
  /** Acknowledged writes that were decided as rejected (a write acknowledged on a losing side may be). */
  acknowledgedRejected: number;
  /** Acknowledged writes that sat in compacted records on some node, so could not be counted there. */
  unverifiable: number;
}

/**
 * Jepsen-style: every acknowledged write is in every node's log exactly once, nothing is in any log
 * twice or without having been sent, the logs agree on which write sits at which idx, and at the end
 * there is one master, one state hash, one last idx and every node a member of a cluster of all.
 */
export function checkHistory(history: readonly Write[], logs: readonly NodeLog[], finals: readonly FinalView[]): Verdict {
  const problems: string[] = [];
  const masters = new Set(finals.map((f) => f.masterId));
  if (masters.size !== 1 || masters.has(null)) problems.push(`the nodes do not name one master: ${finals.map((f) => `${f.node}→${f.masterId}`).join(', ')}`);
  const hashes = new Set(finals.map((f) => f.stateHash));
  if (hashes.size !== 1) problems.push(`the nodes end with ${hashes.size} state hashes: ${finals.map((f) => `${f.node}=${f.stateHash.slice(0, 12)}@${f.lastIdx}`).join(', ')}`);
  for (const f of finals) {
    if (f.role !== 'member' || f.members !== finals.length) problems.push(`${f.node} ends as ${f.role} with ${f.members} members, not one of ${finals.length}`);
  }

  const byValue = new Map<string, Write>();
  for (const w of history) {
    if (byValue.has(w.value)) problems.push(`the history holds ${w.value} twice: a client bug`);
    byValue.set(w.value, w);
  }
  const acked = history.filter((w) => w.outcome === 'ack');
  const lost = new Set<string>();
  const duplicated = new Set<string>();
  const phantom = new Set<string>();
  const unverifiable = new Set<string>();
  const idxOf = new Map<string, number>();
  for (const log of logs) for (const w of log.writes) if (!idxOf.has(w.value)) idxOf.set(w.value, w.idx);

  for (const log of logs) {
    const counts = new Map<string, number>();
    for (const w of log.writes) counts.set(w.value, (counts.get(w.value) ?? 0) + 1);
    for (const [value, n] of counts) {
      if (n > 1) {
        duplicated.add(value);
        problems.push(`${value} is in ${log.node}'s log ${n} times`);
      }
      const sent = byValue.get(value);
      if (sent === undefined || sent.outcome === 'fail') {
        phantom.add(value);
        problems.push(`${value} is in ${log.node}'s log but was ${sent === undefined ? 'never attempted' : 'refused before it was sent'}`);
      }
    }
    for (const w of acked) {
      if (counts.has(w.value)) continue;
      const idx = idxOf.get(w.value);
      if (log.firstIdx > 1 && idx !== undefined && idx < log.firstIdx) {
        unverifiable.add(w.value);
        continue;
      }
      lost.add(w.value);
      problems.push(`${w.value} (acknowledged to ${w.client} at ${new Date(w.endMs).toISOString()}) is missing from ${log.node}'s log`);
    }
  }

  // Where two logs both hold an idx, they hold the same write there.
  const reference = new Map<number, string>();
  for (const log of logs) {
    for (const w of log.writes) {
      const seen = reference.get(w.idx);
      if (seen === undefined) reference.set(w.idx, w.value);
      else if (seen !== w.value) problems.push(`the logs disagree at idx ${w.idx}: ${seen} and ${w.value} (${log.node})`);
    }
  }

  const decided = new Set(logs.flatMap((l) => l.writes.map((w) => w.value)));
  const rejected = new Set(logs.flatMap((l) => l.writes.filter((w) => !w.applied).map((w) => w.value)));
  return {
    ok: problems.length === 0,
    problems,
    attempted: history.length,
    acknowledged: acked.length,
    lost: [...lost],
    duplicated: [...duplicated],
    phantom: [...phantom],
    unknownDecided: history.filter((w) => w.outcome === 'unknown' && decided.has(w.value)).length,
    acknowledgedRejected: acked.filter((w) => rejected.has(w.value)).length,
    unverifiable: unverifiable.size,
  };
}

/** Reads a stopped node's log offline with the node's own reader; keeps only the records of chaos writes. */
export async function readNodeLog(node: string, dataDir: string, valuePrefix: string): Promise<NodeLog> {
  const store = await LogStore.open<LogRecord>(join(dataDir, 'log'));
  try {
    const firstIdx = store.firstIdx() ?? store.lastIdx() + 1;
    const lastIdx = store.lastIdx();
    const writes: NodeLog['writes'] = [];
    for (let from = firstIdx; from <= lastIdx; ) {
      const page = await store.read(from, 1000);
      if (page.length === 0) break;
      for (const record of page) {
        const command = record.origin?.command;
        if (command?.type !== 'SetNickname' || command.nickname === null || !command.nickname.startsWith(valuePrefix)) continue;
        writes.push({ idx: record.idx, value: command.nickname, applied: record.event.type === 'NicknameSet' });
      }
      from = page[page.length - 1]!.idx + 1;
    }
    return { node, firstIdx, lastIdx, writes };
  } finally {
    await store.close();
  }
}

/** Where a failed run's seed, schedule and history go (ignored by git). */
export const CHAOS_ARTIFACT_DIR = join(fileURLToPath(new URL('../../../', import.meta.url)), 'test-artifacts', 'chaos');

export async function saveChaosArtifact(seed: number, data: Record<string, unknown>): Promise<string> {
  await mkdir(CHAOS_ARTIFACT_DIR, { recursive: true });
  const path = join(CHAOS_ARTIFACT_DIR, `chaos-seed-${seed}-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await writeFile(path, `${JSON.stringify({ seed, ...data }, null, 1)}\n`);
  return path;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Signals a child's group only while the child runs: a group id is a pid, and an exited one can be reused. */
function signal(child: ChildProcess | null, sig: NodeJS.Signals): void {
  if (child !== null && child.exitCode === null && child.signalCode === null) killGroup(child, sig);
}

/** Ends a child: `sig`, then SIGKILL if it has not exited within 8 s. */
async function end(child: ChildProcess | null, sig: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child === null) return;
  signal(child, 'SIGCONT');
  signal(child, sig);
  await waitForExit(child, 8000).catch(async () => {
    signal(child, 'SIGKILL');
    await waitForExit(child, 5000).catch(() => undefined);
  });
}

// ---------------------------------------------------------------------------------------------------
// Clients: one per namespace, writing to and watching its own node on loopback

/**
 * Run with `node -e` inside a host's namespace: argv = value prefix, target node name, pause between
 * writes (ms), lifetime (ms). Each write is a fresh unique nickname sent once (a retry would be a new
 * command id, so a second record of the same value would not be a duplicate decision). It also polls
 * `GET /state` every 200 ms. Every line on stdout is JSON: `{k:'w',…}` a write, `{k:'s',…}` a view.
 * SIGUSR2 stops the writes (views go on); SIGTERM ends it after the write in flight.
 */
const CLIENT_SOURCE = String.raw`
const [prefix, target, gapMs, lifetimeMs] = [process.argv[1], process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const base = 'http://127.0.0.1:52600';
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let writing = true, running = true;
process.on('SIGUSR2', () => { writing = false; });
process.on('SIGTERM', () => { writing = false; running = false; });
setTimeout(() => { writing = false; running = false; }, lifetimeMs).unref();
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const why = (e) => String((e && e.cause && e.cause.code) || (e && e.name) || e);
async function observe() {
  while (running) {
    const t = Date.now();
    try {
      const r = await fetch(base + '/state', { signal: AbortSignal.timeout(1000) });
      if (!r.ok) out({ k: 's', t, down: 'http ' + r.status });
      else {
        const s = await r.json();
        out({ k: 's', t, self: s.nodeId, role: s.role, masterId: s.masterId, stateHash: s.stateHash, lastIdx: s.lastIdx, members: s.members.length });
      }
    } catch (e) { out({ k: 's', t, down: why(e) }); }
    await sleep(200);
  }
}
async function write() {
  for (let n = 0; running; n++) {
    if (!writing) { await sleep(100); continue; }
    const value = prefix + '-' + n;
    const startMs = Date.now();
    let outcome, detail;
    try {
      const r = await fetch(base + '/cluster/nickname', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ node: target, nickname: value }), signal: AbortSignal.timeout(5000) });
      const text = await r.text();
      outcome = r.ok ? 'ack' : 'unknown';
      if (!r.ok) detail = r.status + ' ' + text.slice(0, 200);
    } catch (e) {
      detail = why(e);
      outcome = detail === 'ECONNREFUSED' ? 'fail' : 'unknown';
    }
    out({ k: 'w', value, startMs, endMs: Date.now(), outcome, detail });
    await sleep(gapMs * (0.5 + Math.random()));
  }
}
Promise.all([observe(), write()]).then(() => process.exit(0));
`;

export interface View {
  t: number;
  self?: string;
  role?: string;
  masterId?: string | null;
  stateHash?: string;
  lastIdx?: number;
  members?: number;
  down?: string;
}

export interface ChaosClient {
  node: LanNode;
  process: ChildProcess;
  writes: Write[];
  /** The latest view of its node. */
  view: View | null;
  /** Called with every view, for waits that watch the stream. */
  listeners: Set<(view: View) => void>;
}

function startClient(lan: Lan, node: LanNode, prefix: string, target: string, gapMs: number, lifetimeMs: number): ChaosClient {
  const child = lan.execNode(node.host, CLIENT_SOURCE, [prefix, target, String(gapMs), String(lifetimeMs)]);
  const client: ChaosClient = { node, process: child, writes: [], view: null, listeners: new Set() };
  let rest = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop()!;
    for (const line of lines) {
      if (!line) continue;
      const o = JSON.parse(line) as ({ k: 'w' } & Omit<Write, 'client'>) | ({ k: 's' } & View);
      if (o.k === 'w') {
        const { k: _k, ...w } = o;
        client.writes.push({ client: node.host.name, ...w });
      } else {
        const { k: _k, ...v } = o;
        client.view = v;
        for (const listener of client.listeners) listener(v);
      }
    }
  });
  child.stderr!.resume();
  return client;
}

// ---------------------------------------------------------------------------------------------------
// The cluster under test

export interface ChaosCluster {
  lan: Lan;
  root: string;
  nodes: LanNode[];
  clients: ChaosClient[];
  seed: number;
  valuePrefix: string;
  /** What the faults did, with wall-clock times, for the figures and the failure artifact. */
  events: ChaosEvent[];
}

export interface ChaosEvent {
  kind: FaultKind;
  node: string;
  atMs: number;
  /** When the fault ended (the node restarted, resumed, or the network healed). */
  endMs: number;
  /** For kills: from the restart until the node was a member with a state hash its master had since. */
  rejoinMs?: number;
  /** From the end of the fault until every node named one master again. */
  agreedMs: number;
}

const ANSWER_TIMEOUT_MS = 60_000;

/** A LAN of `hosts` namespaces with a node in each, joined into one cluster with join codes, and one client per node. */
export async function startChaosCluster(options: { hosts: number; seed: number; writeGapMs: number; lifetimeMs: number }): Promise<ChaosCluster> {
  const lan = await createLan({ hosts: options.hosts });
  const root = await mkdtemp(join(tmpdir(), 'shoal-chaos-'));
  const nodes: LanNode[] = lan.hosts.map((host) => ({ host, dataDir: join(root, host.name), process: null, output: null }));
  const valuePrefix = `w-${options.seed}-`;
  const cluster: ChaosCluster = { lan, root, nodes, clients: [], seed: options.seed, valuePrefix, events: [] };
  try {
    for (const node of nodes) startLanNode(lan, node);
    await Promise.all(nodes.map((node) => eventually(`${node.host.name} to answer`, ANSWER_TIMEOUT_MS, async () => ((await lanCli(lan, node, 'status', '--json')).code === 0 ? true : undefined))));
    for (const joiner of nodes.slice(1)) {
      const code = /shoal1-\S+/.exec((await lanCli(lan, nodes[0]!, 'invite', '--code')).stdout)?.[0];
      if (!code) throw new Error('shoal invite --code printed no join code');
      const joined = await lanCli(lan, joiner, 'join', code);
      if (joined.code !== 0) throw new Error(`shoal join on ${joiner.host.name} failed: ${joined.stderr}`);
    }
    const target = nodes[0]!.host.name;
    cluster.clients = nodes.map((node) => startClient(lan, node, `${valuePrefix}${node.host.name}`, target, options.writeGapMs, options.lifetimeMs));
    await agreement(cluster, 30_000);
    return cluster;
  } catch (error) {
    await stopChaosCluster(cluster);
    throw error;
  }
}

/** Stops clients and nodes (SIGCONT first: a stopped process sees SIGTERM only once it runs), reaps engines, removes the LAN. Keeps the data dirs unless `removeData`. */
export async function stopChaosCluster(cluster: ChaosCluster, removeData = true): Promise<void> {
  await Promise.all(cluster.clients.map((c) => end(c.process)));
  await Promise.all(cluster.nodes.map((n) => end(n.process)));
  for (const node of cluster.nodes) node.process = null;
  // Nodes killed with SIGKILL leave their engines behind.
  for (const node of cluster.nodes) await reapOrphans(node.dataDir, pino({ level: 'silent' })).catch(() => undefined);
  await cluster.lan.destroy();
  if (removeData) await rm(cluster.root, { recursive: true, force: true });
}

const fresh = (v: View | null, now: number): v is View => v !== null && now - v.t < 1500 && v.down === undefined;

/** Every node, seen within the last 1.5 s, a member of a cluster of all, naming the same master. Returns that master's node. */
function agreed(cluster: ChaosCluster): LanNode | null {
  const now = Date.now();
  const views = cluster.clients.map((c) => c.view);
  if (!views.every((v) => fresh(v, now) && v.role === 'member' && v.members === cluster.nodes.length && typeof v.masterId === 'string')) return null;
  const masters = new Set(views.map((v) => v!.masterId));
  if (masters.size !== 1) return null;
  const index = views.findIndex((v) => v!.self === views[0]!.masterId);
  return index < 0 ? null : cluster.nodes[index]!;
}

export async function agreement(cluster: ChaosCluster, timeoutMs: number): Promise<LanNode> {
  return eventually('every node a member naming one master', timeoutMs, async () => agreed(cluster) ?? undefined);
}

/** The node the current views name master (the most named one among fresh views), or null. */
function currentMaster(cluster: ChaosCluster): LanNode | null {
  const now = Date.now();
  const votes = new Map<string, number>();
  for (const c of cluster.clients) if (fresh(c.view, now) && c.view.masterId) votes.set(c.view.masterId, (votes.get(c.view.masterId) ?? 0) + 1);
  const top = [...votes].sort((a, b) => b[1] - a[1])[0]?.[0];
  const index = cluster.clients.findIndex((c) => c.view?.self === top);
  return index < 0 ? null : cluster.nodes[index]!;
}


/**
 * Waits until `node` is a member naming `master` with a state hash that the master itself showed at or
 * after `sinceMs`: it has caught up at least to the state of the moment it came back.
 */
function rejoined(cluster: ChaosCluster, node: LanNode, sinceMs: number, timeoutMs: number): Promise<number> {
  const mine = cluster.clients[cluster.nodes.indexOf(node)]!;
  const masterHashes = new Set<string>();
  return new Promise((resolve, reject) => {
    const listeners: [ChaosClient, (v: View) => void][] = [];
    const done = (error: Error | null): void => {
      clearTimeout(timer);
      for (const [c, l] of listeners) c.listeners.delete(l);
      if (error) reject(error);
      else resolve(Date.now());
    };
    const timer = setTimeout(() => done(new Error(`${node.host.name} did not rejoin within ${timeoutMs} ms (last view ${JSON.stringify(mine.view)})`)), timeoutMs);
    for (const c of cluster.clients) {
      const listener = (v: View): void => {
        if (v.t < sinceMs || v.down !== undefined) return;
        if (v.self !== undefined && v.self === v.masterId && v.stateHash) masterHashes.add(v.stateHash);
        const own = mine.view;
        if (own && own.t >= sinceMs && own.role === 'member' && own.masterId && own.masterId !== own.self && own.stateHash && masterHashes.has(own.stateHash)) done(null);
        else if (own && own.t >= sinceMs && own.role === 'member' && own.masterId === own.self) done(null);
      };
      c.listeners.add(listener);
      listeners.push([c, listener]);
    }
  });
}

async function kill(cluster: ChaosCluster, node: LanNode, kind: FaultKind, downMs: number): Promise<ChaosEvent> {
  const atMs = Date.now();
  killGroup(node.process!, 'SIGKILL');
  await waitForExit(node.process!, 5000);
  node.process = null;
  await sleep(downMs);
  const endMs = Date.now();
  startLanNode(cluster.lan, node);
  const child = node.process!;
  // A node that cannot start again fails the run at once, with its own words.
  const exited = waitForExit(child, ANSWER_TIMEOUT_MS + 1000).then(
    ({ code, signal: sig }) => Promise.reject(new Error(`${node.host.name} exited (${code ?? sig}) after its restart: ${node.output?.all.toString().slice(-2000).trim()}`)),
    () => new Promise<never>(() => {}),
  );
  const back = await Promise.race([rejoined(cluster, node, endMs, ANSWER_TIMEOUT_MS), exited]);
  await agreement(cluster, ANSWER_TIMEOUT_MS);
  return { kind, node: node.host.name, atMs, endMs, rejoinMs: back - endMs, agreedMs: Date.now() - endMs };
}

/** Runs one step on the cluster and waits until it agrees again. */
export async function runFault(cluster: ChaosCluster, step: FaultStep): Promise<ChaosEvent> {
  const master = currentMaster(cluster) ?? (await agreement(cluster, ANSWER_TIMEOUT_MS));
  const byName = [...cluster.nodes].sort((a, b) => a.host.name.localeCompare(b.host.name));
  const pickFrom = (candidates: LanNode[]): LanNode => candidates[Math.floor(step.pick * candidates.length)]!;
  const followers = byName.filter((n) => n !== master);
  let event: ChaosEvent;
  switch (step.kind) {
    case 'kill-master':
      event = await kill(cluster, master, step.kind, step.durationMs);
      break;
    case 'kill-follower':
      event = await kill(cluster, pickFrom(followers), step.kind, step.durationMs);
      break;
    case 'stop': {
      const victim = pickFrom(byName);
      const atMs = Date.now();
      signal(victim.process, 'SIGSTOP');
      await sleep(step.durationMs);
      signal(victim.process, 'SIGCONT');
      const endMs = Date.now();
      await agreement(cluster, ANSWER_TIMEOUT_MS);
      event = { kind: step.kind, node: victim.host.name, atMs, endMs, agreedMs: Date.now() - endMs };
      break;
    }
    case 'partition': {
      const victim = pickFrom(byName);
      const atMs = Date.now();
      await cluster.lan.partition([victim.host], byName.filter((n) => n !== victim).map((n) => n.host));
      await sleep(step.durationMs);
      await cluster.lan.heal();
      const endMs = Date.now();
      await agreement(cluster, ANSWER_TIMEOUT_MS);
      event = { kind: step.kind, node: victim.host.name, atMs, endMs, agreedMs: Date.now() - endMs };
      break;
    }
    case 'loss': {
      const atMs = Date.now();
      // Each frame crosses two switch ports (its sender's and its receiver's), each dropping 11 %:
      // 1 - 0.89² ≈ 20 % of the frames between any two hosts are lost.
      for (const node of byName) await cluster.lan.dropRandom(node.host, LOSS_PER_PORT_PERCENT);
      await sleep(step.durationMs);
      await cluster.lan.clearDrops();
      const endMs = Date.now();
      await agreement(cluster, ANSWER_TIMEOUT_MS);
      event = { kind: step.kind, node: 'all', atMs, endMs, agreedMs: Date.now() - endMs };
      break;
    }
  }
  cluster.events.push(event);
  await sleep(step.settleMs);
  return event;
}

export const LOSS_PER_PORT_PERCENT = 11;

/**
 * Stops the writes, waits until every node shows the same master, state hash and last idx twice in a
 * row, and returns those views.
 */
export async function finalViews(cluster: ChaosCluster, timeoutMs: number): Promise<FinalView[]> {
  for (const client of cluster.clients) signal(client.process, 'SIGUSR2');
  // A write in flight when the signal came ends within its 5 s timeout.
  await sleep(5500);
  let previous: string | null = null;
  return eventually('one master, one state hash and one last idx on every node', timeoutMs, async () => {
    await sleep(300);
    const now = Date.now();
    const views = cluster.clients.map((c) => c.view);
    if (!views.every((v) => fresh(v, now))) return undefined;
    const finals = views.map((v, i) => ({
      node: cluster.nodes[i]!.host.name,
      role: v!.role ?? '?',
      masterId: v!.masterId ?? null,
      stateHash: v!.stateHash ?? '',
      lastIdx: v!.lastIdx ?? -1,
      members: v!.members ?? 0,
    }));
    const key = JSON.stringify(finals.map((f) => [f.role, f.masterId, f.stateHash, f.lastIdx, f.members]));
    const same = new Set(finals.map((f) => `${f.masterId} ${f.stateHash} ${f.lastIdx}`)).size === 1 && finals.every((f) => f.role === 'member' && f.members === finals.length);
    const stable = key === previous;
    previous = key;
    return same && stable ? finals : undefined;
  }).catch(() => {
    // Not converged: hand back what the nodes show, so the checker names the disagreement.
    return cluster.clients.map((c, i) => ({
      node: cluster.nodes[i]!.host.name,
      role: c.view?.role ?? c.view?.down ?? 'unseen',
      masterId: c.view?.masterId ?? null,
      stateHash: c.view?.stateHash ?? '',
      lastIdx: c.view?.lastIdx ?? -1,
      members: c.view?.members ?? 0,
    }));
  });
}

/** Each node's data dir, exit status and the tail of its output (of its latest start), for a failure artifact. */
export function nodeReports(cluster: ChaosCluster): { node: string; dataDir: string; exitCode: number | null; signal: string | null; outputTail: string }[] {
  return cluster.nodes.map((n) => ({
    node: n.host.name,
    dataDir: n.dataDir,
    exitCode: n.process?.exitCode ?? null,
    signal: n.process?.signalCode ?? null,
    outputTail: n.output?.all.toString().slice(-16_000) ?? '',
  }));
}

/** The whole history, every client's writes by start time. */
export function historyOf(cluster: ChaosCluster): Write[] {
  return cluster.clients.flatMap((c) => c.writes).sort((a, b) => a.startMs - b.startMs);
}

/** For each master kill: from the kill until any client's write sent after it was acknowledged. */
export function failoversMs(events: readonly ChaosEvent[], history: readonly Write[]): number[] {
  const acks = history.filter((w) => w.outcome === 'ack');
  return events
    .filter((e) => e.kind === 'kill-master')
    .map((e) => {
      const first = acks.filter((w) => w.startMs >= e.atMs).reduce((min, w) => Math.min(min, w.endMs), Number.POSITIVE_INFINITY);
      return first - e.atMs;
    })
    .filter((ms) => Number.isFinite(ms));
}

/** Stops the nodes (the clients first), then reads each one's log. */
export async function collectLogs(cluster: ChaosCluster): Promise<NodeLog[]> {
  await Promise.all(cluster.clients.map((c) => end(c.process)));
  await Promise.all(cluster.nodes.map((n) => end(n.process)));
  for (const node of cluster.nodes) node.process = null;
  return Promise.all(cluster.nodes.map((n) => readNodeLog(n.host.name, n.dataDir, cluster.valuePrefix)));
}
