// Tier 4 chaos (issue #16, item 9), short CI version: 3 real nodes in network namespaces, one client per
// node writing unique nicknames, and a seeded schedule of master kills, a follower kill, a SIGSTOP, a
// partition and 20 % packet loss. At the end every acknowledged write must be in every node's log
// exactly once, with one master and one state hash. A failure saves the seed, schedule and history under
// test-artifacts/chaos/ and names the file; replay with SHOAL_CHAOS_SEED=<seed>. Root only; skipped
// with the reason otherwise. mDNS runs inside the LAN's own namespaces only.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
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
} from '../support/chaos.js';
import { netnsAvailable } from '../support/netns.js';

const available = await netnsAvailable();
const skip = available.ok ? false : `chaos tests skipped: ${available.reason}`;

const seed = process.env.SHOAL_CHAOS_SEED ? Number(process.env.SHOAL_CHAOS_SEED) : Math.floor(Math.random() * 2 ** 31);

describe('chaos: acknowledged writes survive kills, stops, partitions and loss', { skip, timeout: 480_000 }, () => {
  test(`every acknowledged write is in every node's log exactly once (seed ${seed})`, async (t) => {
    const schedule = makeSchedule(seed, { masterKills: 3, followerKills: 1, stops: 1, partitions: 1, losses: 1 });
    t.diagnostic(`seed ${seed}: ${schedule.map((s) => s.kind).join(', ')}`);
    let cluster: ChaosCluster | null = null;
    let stage = 'start';
    let failed = false;
    const artifact = async (extra: Record<string, unknown>): Promise<string> =>
      saveChaosArtifact(seed, { stage, schedule, events: cluster?.events ?? [], history: cluster ? historyOf(cluster) : [], nodes: cluster ? nodeReports(cluster) : [], ...extra });
    try {
      cluster = await startChaosCluster({ hosts: 3, seed, writeGapMs: 150, lifetimeMs: 420_000 });
      for (const [i, step] of schedule.entries()) {
        stage = `step ${i + 1} (${step.kind})`;
        const event = await runFault(cluster, step);
        t.diagnostic(`${stage} on ${event.node}: agreed ${event.agreedMs} ms after it ended${event.rejoinMs === undefined ? '' : `, rejoined in ${event.rejoinMs} ms`}`);
      }
      stage = 'final agreement';
      const finals = await finalViews(cluster, 60_000);
      stage = 'reading logs';
      const logs = await collectLogs(cluster);
      const history = historyOf(cluster);
      const verdict = checkHistory(history, logs, finals);
      const failovers = failoversMs(cluster.events, history);
      t.diagnostic(
        `attempted ${verdict.attempted}, acknowledged ${verdict.acknowledged}, lost ${verdict.lost.length}, duplicated ${verdict.duplicated.length}, ` +
          `undetermined but decided ${verdict.unknownDecided}; failover ms ${failovers.join(', ')}; rejoin ms ${cluster.events.filter((e) => e.rejoinMs !== undefined).map((e) => e.rejoinMs).join(', ')}`,
      );
      if (!verdict.ok) {
        failed = true;
        const path = await artifact({ finals, logs, verdict });
        assert.fail(`seed ${seed}: ${verdict.problems.slice(0, 10).join('; ')} (history in ${path})`);
      }
      assert.ok(verdict.acknowledged > 0, 'the clients had writes acknowledged');
    } catch (error) {
      if (error instanceof assert.AssertionError) throw error;
      failed = true;
      const path = await artifact({ error: String(error) }).catch(() => 'nowhere: saving failed');
      throw new Error(`seed ${seed}, ${stage}: ${(error as Error).message} (history in ${path})`, { cause: error });
    } finally {
      // A failed run keeps its data dirs (named in the artifact) for the logs.
      if (cluster) await stopChaosCluster(cluster, !failed);
    }
  });
});
