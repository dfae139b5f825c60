import { parseArgs } from 'node:util';
import {
  checkHistory,
  collectLogs,
  failoversMs,
  finalViews,
  historyOf,
  makeSchedule,
  nodeReports,
  runFault,
  saveChaosArtifact,
  startChaosCluster,
  stopChaosCluster,
  type ChaosCluster,
  type ChaosEvent,
} from '../test/support/chaos.js';
import { netnsAvailable } from '../test/support/netns.js';
import { summarize } from './stats.js';

/**
 * Master kills at length (issue #16, item 9): `npm run bench:chaos` runs 200 kill -9s of the master of
 * a 3-node cluster in network namespaces, one client per node writing unique nicknames, and prints one
 * JSON object: lost and duplicated acknowledged writes (checked against every node's log, as the chaos
 * test does), failover (kill until a write sent after it is acknowledged) and rejoin (restart until
 * the killed node is a member with a state hash its master had since) as median and max.
 *
 * The kills run in rounds on a fresh cluster each (--kills-per-round, default 20), so a round's writes
 * stay below the records at which a checkpoint compacts the log and every write can be counted.
 * A round that fails saves its seed and history under test-artifacts/chaos/. Progress goes to stderr.
 *
 * Usage: node dist/bench/chaos.js [--master-kills 200] [--kills-per-round 20] [--seed N]
 */
const { values } = parseArgs({
  strict: false,
  options: { 'master-kills': { type: 'string' }, 'kills-per-round': { type: 'string' }, seed: { type: 'string' }, quick: { type: 'boolean' } },
});
const intOption = (raw: unknown, fallback: number, min: number, max: number): number => {
  const n = typeof raw === 'string' ? Number(raw) : NaN;
  return Number.isFinite(n) ? Math.min(max, Math.max(min, Math.round(n))) : fallback;
};
/** --quick (bench/run.ts --quick): 5 kills, enough to see the figures are produced. */
const masterKills = intOption(values['master-kills'], values.quick === true ? 5 : 200, 1, 1000);
const killsPerRound = intOption(values['kills-per-round'], 20, 1, 50);
const firstSeed = intOption(values.seed, Math.floor(Math.random() * 2 ** 31), 0, 2 ** 31 - 1);
/** Each client's pause between writes (randomized ±50 %): 3 clients keep about 6 writes a second going. */
const WRITE_GAP_MS = 500;
/** A bound on one round, for the clients' lifetime: far above what a kill takes (about 10 s). */
const ROUND_MS_PER_KILL = 90_000;

const log = (message: string): void => void process.stderr.write(`[chaos] ${message}\n`);
const round1 = (x: number): number => Math.round(x * 10) / 10;

interface RoundResult {
  seed: number;
  kills: number;
  /** False when the round stopped before its logs were read: its writes were not checked. */
  checked: boolean;
  attempted: number;
  acknowledged: number;
  lost: number;
  duplicated: number;
  problems: string[];
  artifact?: string;
  failoversMs: number[];
  events: ChaosEvent[];
}

async function runRound(seed: number, kills: number): Promise<RoundResult> {
  const schedule = makeSchedule(seed, { masterKills: kills });
  let cluster: ChaosCluster | null = null;
  let stage = 'start';
  let failed = false;
  try {
    cluster = await startChaosCluster({ hosts: 3, seed, writeGapMs: WRITE_GAP_MS, lifetimeMs: kills * ROUND_MS_PER_KILL + 120_000 });
    for (const [i, step] of schedule.entries()) {
      stage = `kill ${i + 1}`;
      const event = await runFault(cluster, step);
      log(`seed ${seed} kill ${i + 1}/${kills}: ${event.node}, rejoined in ${event.rejoinMs} ms`);
    }
    stage = 'final agreement';
    const finals = await finalViews(cluster, 60_000);
    stage = 'reading logs';
    const logs = await collectLogs(cluster);
    const history = historyOf(cluster);
    const verdict = checkHistory(history, logs, finals);
    const result: RoundResult = {
      seed,
      kills,
      checked: true,
      attempted: verdict.attempted,
      acknowledged: verdict.acknowledged,
      lost: verdict.lost.length,
      duplicated: verdict.duplicated.length,
      problems: verdict.problems.slice(0, 10),
      failoversMs: failoversMs(cluster.events, history),
      events: cluster.events,
    };
    if (verdict.unverifiable > 0) result.problems.push(`${verdict.unverifiable} acknowledged writes sat in compacted records: lower --kills-per-round`);
    if (!verdict.ok) {
      failed = true;
      result.artifact = await saveChaosArtifact(seed, { schedule, events: cluster.events, history, finals, logs, verdict, nodes: nodeReports(cluster) });
    }
    return result;
  } catch (error) {
    const history = cluster ? historyOf(cluster) : [];
    failed = true;
    const artifact = await saveChaosArtifact(seed, { stage, schedule, events: cluster?.events ?? [], history, nodes: cluster ? nodeReports(cluster) : [], error: String(error) }).catch(() => undefined);
    return {
      seed,
      kills,
      checked: false,
      attempted: history.length,
      acknowledged: history.filter((w) => w.outcome === 'ack').length,
      lost: 0,
      duplicated: 0,
      problems: [`${stage}: ${(error as Error).message}`],
      ...(artifact ? { artifact } : {}),
      failoversMs: cluster ? failoversMs(cluster.events, history) : [],
      events: cluster?.events ?? [],
    };
  } finally {
    // A failed round keeps its data dirs (named in the artifact) for the logs.
    if (cluster) await stopChaosCluster(cluster, !failed);
  }
}

async function main(): Promise<void> {
  const available = await netnsAvailable();
  if (!available.ok) throw new Error(`the chaos benchmark needs network namespaces: ${available.reason}`);
  const started = performance.now();
  const rounds: RoundResult[] = [];
  for (let done = 0, seed = firstSeed; done < masterKills; seed++) {
    const kills = Math.min(killsPerRound, masterKills - done);
    log(`round ${rounds.length + 1}: seed ${seed}, ${kills} master kills`);
    rounds.push(await runRound(seed, kills));
    done += kills;
  }
  const events = rounds.flatMap((r) => r.events);
  const failovers = rounds.flatMap((r) => r.failoversMs);
  const rejoins = events.flatMap((e) => (e.rejoinMs === undefined ? [] : [e.rejoinMs]));
  const sum = (f: (r: RoundResult) => number): number => rounds.reduce((n, r) => n + f(r), 0);
  const result = {
    benchmark: 'chaos',
    method:
      '3 nodes in network namespaces (test/support/chaos.ts), one client per node writing unique nicknames through its node on loopback ' +
      `(one write at a time, ${WRITE_GAP_MS} ms ±50 % apart, 5 s timeout, never retried); kill -9 of the master, restarted after 0.5-2 s; ` +
      `rounds of ${killsPerRound} kills on a fresh cluster. lostWrites: acknowledged writes missing from some node's final log; ` +
      'failoverMs: kill until a write sent after it is acknowledged; rejoinMs: restart until the node is a member with a state hash its master had since.',
    firstSeed,
    masterKills: events.filter((e) => e.kind === 'kill-master').length,
    masterKillsAsked: masterKills,
    rounds: rounds.length,
    /** lostWrites and duplicatedWrites count these rounds only; the others stopped before the check. */
    roundsChecked: rounds.filter((r) => r.checked).length,
    attemptedWrites: sum((r) => r.attempted),
    acknowledgedWrites: sum((r) => r.acknowledged),
    acknowledgedWritesChecked: sum((r) => (r.checked ? r.acknowledged : 0)),
    lostWrites: sum((r) => r.lost),
    duplicatedWrites: sum((r) => r.duplicated),
    failoverMs: summarize(failovers),
    rejoinMs: summarize(rejoins),
    failedRounds: rounds.filter((r) => r.problems.length > 0).map((r) => ({ seed: r.seed, problems: r.problems, artifact: r.artifact ?? null })),
    totalSeconds: round1((performance.now() - started) / 1000),
  };
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  if (result.failedRounds.length > 0) process.exitCode = 1;
}

await main();
// Everything it started is stopped by now; do not wait on anything left (a pipe, a timer).
process.stdout.write('', () => process.exit(process.exitCode ?? 0));
