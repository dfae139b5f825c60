import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SimFailure, Simulation, type SimReport } from './sim.js';

// SHOAL_SIM_SEED=<n> replays exactly one seed; SHOAL_SIM_SEEDS=<count> runs seeds 1..count (default 200).
const single = process.env.SHOAL_SIM_SEED;
const count = Number(process.env.SHOAL_SIM_SEEDS ?? '200');
const seeds = single !== undefined && single !== '' ? [Number(single)] : Array.from({ length: count }, (_, i) => i + 1);

test(`5-node cluster converges under seeded faults (${seeds.length} seed${seeds.length === 1 ? '' : 's'})`, (t) => {
  assert.ok(seeds.every((seed) => Number.isInteger(seed)), 'SHOAL_SIM_SEED(S) must be integers');
  const failures: SimFailure[] = [];
  const reports: SimReport[] = [];
  for (const seed of seeds) {
    try {
      reports.push(new Simulation(seed).run());
    } catch (error) {
      if (!(error instanceof SimFailure)) throw error;
      failures.push(error);
      if (failures.length >= 5) break;
    }
  }
  const sum = (key: keyof SimReport): number => reports.reduce((total, report) => total + report[key], 0);
  t.diagnostic(
    `seeds ok ${reports.length}/${seeds.length}; totals: commands ${sum('submitted')}, decided acks ${sum('decidedAcks')}, ` +
      `term claims ${sum('elections')}, truncations ${sum('truncations')}, re-proposals ${sum('reproposed')}, ` +
      `crashes ${sum('crashes')}, partitions ${sum('partitions')}, deliveries ${sum('deliveries')}`,
  );
  if (failures.length > 0) {
    const others = failures.slice(1).map((failure) => `seed ${failure.seed}: ${failure.reason.split('\n')[0]}`);
    assert.fail(`${failures[0]!.message}\n${others.length > 0 ? `--- other failing seeds ---\n${others.join('\n')}` : ''}`);
  }
});
