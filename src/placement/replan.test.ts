// Model A (fixtures) needs ≈ 4.52 GiB for a full copy; 5 GiB nodes hold it alone.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { card, factsA, GiB, node, nodeId } from './fixtures.test-support.js';
import { planPlacement, type Plan, type PlanInput, type PlanResult } from './planner.js';
import { MAX_REFUSAL_HOPS, replanAfterDownloadFailure, replanAfterRefusal } from './replan.js';
import type { ClusterNode } from './nodes.js';
import type { ModelCard } from '../models/cards/card.js';

function input(nodes: ClusterNode[], c: ModelCard = card()): PlanInput {
  return { card: c, facts: factsA(), nodes };
}

function ok(result: PlanResult): Plan {
  assert.ok(result.ok, result.ok ? '' : `${result.error.code}: ${result.error.message}`);
  return result.plan;
}

const ids = (plan: Plan) => plan.placements.map((p) => p.nodeId);
const singleOnly = card({ compatible_backends: ['llama_cpp-cpu'] });

test('refusal chain: one node wider, then wider again, then it gives up (two hops)', () => {
  const cluster = input([node(0, 6 * GiB), node(1, 5 * GiB), node(2, 5 * GiB), node(3, 5 * GiB)]);
  const first = ok(planPlacement(cluster));
  assert.equal(first.shape, 'single');
  assert.deepEqual(ids(first), [nodeId(0)]);

  // hop 1: the single node refused → a 2-node split
  const second = ok(replanAfterRefusal(first, nodeId(0), cluster));
  assert.equal(second.shape, 'pooled');
  assert.equal(second.placements.length, 2);
  assert.equal(second.minNodes, 2);
  assert.deepEqual(second.refusal, { hops: 1, fellBack: false });

  // hop 2: a donor refused → a 3-node split
  const third = ok(replanAfterRefusal(second, second.placements[0]!.nodeId, cluster));
  assert.equal(third.placements.length, 3);
  assert.deepEqual(third.refusal, { hops: 2, fellBack: false });

  // a third refusal: the chain is spent
  const end = replanAfterRefusal(third, third.placements[0]!.nodeId, cluster);
  assert.ok(!end.ok);
  assert.equal(end.error.code, 'PLACEMENT_REFUSED');
  assert.match(end.error.message, /2 re-placements were already tried/);
  assert.equal(MAX_REFUSAL_HOPS, 2);
});

test('refusal chain: no wider split exists → once to a single node without the refuser, then terminal', () => {
  const cluster = input([node(0, 6 * GiB), node(1, 5 * GiB)], singleOnly);
  const first = ok(planPlacement(cluster));
  assert.deepEqual(ids(first), [nodeId(0)]);

  const fallback = ok(replanAfterRefusal(first, nodeId(0), cluster));
  assert.equal(fallback.shape, 'single');
  assert.deepEqual(ids(fallback), [nodeId(1)]);
  assert.deepEqual(fallback.refusal, { hops: 1, fellBack: true });
  assert.deepEqual(fallback.exclusions, [nodeId(0)], 'the refuser is stamped as excluded');

  const end = replanAfterRefusal(fallback, nodeId(1), cluster);
  assert.ok(!end.ok);
  assert.equal(end.error.code, 'PLACEMENT_REFUSED');
  assert.match(end.error.message, /single-node fallback/);
});

test('refusal chain: neither wider nor another single node → gives up with both reasons', () => {
  const cluster = input([node(0, 6 * GiB), node(1, 3 * GiB)], singleOnly);
  const first = ok(planPlacement(cluster));
  const end = replanAfterRefusal(first, nodeId(0), cluster);
  assert.ok(!end.ok);
  assert.equal(end.error.code, 'PLACEMENT_REFUSED');
  assert.deepEqual(end.error.causes?.map((c) => c.code), ['TOPOLOGY_GAP', 'MEMORY_SHORTFALL']);
});

test('refusal chain never loops: a cluster that refuses everything ends within two re-placements', () => {
  const shapes: Array<{ what: string; cluster: PlanInput }> = [
    { what: 'poolable', cluster: input([node(0, 6 * GiB), node(1, 5 * GiB), node(2, 5 * GiB), node(3, 5 * GiB), node(4, 5 * GiB)]) },
    { what: 'single only', cluster: input([node(0, 6 * GiB), node(1, 5 * GiB), node(2, 5 * GiB), node(3, 5 * GiB)], singleOnly) },
    { what: 'split only', cluster: input([node(0, 3 * GiB), node(1, 2 * GiB), node(2, 2 * GiB), node(3, 2 * GiB), node(4, 2 * GiB)]) },
  ];
  for (const { what, cluster } of shapes) {
    for (const refuserOf of [(p: Plan) => p.placements[0]!.nodeId, (p: Plan) => p.placements[p.placements.length - 1]!.nodeId]) {
      let plan = ok(planPlacement(cluster));
      let replans = 0;
      for (;;) {
        const next = replanAfterRefusal(plan, refuserOf(plan), cluster);
        replans++;
        if (!next.ok) {
          assert.equal(next.error.code, 'PLACEMENT_REFUSED', what);
          break;
        }
        plan = next.plan;
        assert.ok(replans <= MAX_REFUSAL_HOPS, `${what}: more than ${MAX_REFUSAL_HOPS} re-placements`);
      }
      assert.ok(replans <= MAX_REFUSAL_HOPS + 1, what);
    }
  }
});

test('re-placements keep the operator exclusions', () => {
  const cluster = input([node(0, 6 * GiB), node(1, 5 * GiB), node(2, 5 * GiB), node(3, 9 * GiB)]);
  const first = ok(planPlacement(cluster, { exclusions: [nodeId(3)] }));
  assert.deepEqual(ids(first), [nodeId(0)]);
  const wider = ok(replanAfterRefusal(first, nodeId(0), cluster));
  assert.ok(!ids(wider).includes(nodeId(3)));
  assert.deepEqual(wider.exclusions, [nodeId(3)]);
  const afterDownload = ok(replanAfterDownloadFailure(wider, wider.placements[0]!.nodeId, cluster));
  assert.ok(!ids(afterDownload).includes(nodeId(3)));
  assert.ok(afterDownload.exclusions.includes(nodeId(3)));
});

test('replicas: a refused copy moves to another node', () => {
  const cluster = input([node(0, 8 * GiB), node(1, 6 * GiB), node(2, 5 * GiB)]);
  const first = ok(planPlacement(cluster, { replicas: 2 }));
  assert.deepEqual(ids(first), [nodeId(0), nodeId(1)]);
  const moved = ok(replanAfterRefusal(first, nodeId(0), cluster));
  assert.equal(moved.shape, 'replicas');
  assert.deepEqual(ids(moved), [nodeId(1), nodeId(2)]);
  assert.deepEqual(moved.refusal, { hops: 1, fellBack: false });
});

test('a refusal or failure from a node outside the plan is refused', () => {
  const cluster = input([node(0, 8 * GiB), node(1, 6 * GiB)]);
  const first = ok(planPlacement(cluster));
  const refusal = replanAfterRefusal(first, nodeId(1), cluster);
  assert.ok(!refusal.ok);
  assert.equal(refusal.error.code, 'INVALID_REQUEST');
  const download = replanAfterDownloadFailure(first, nodeId(7), cluster);
  assert.ok(!download.ok);
  assert.equal(download.error.code, 'INVALID_REQUEST');
});

test('download failure: re-placed without that node, until no node is left', () => {
  const cluster = input([node(0, 8 * GiB), node(1, 6 * GiB), node(2, 5 * GiB)]);
  let plan = ok(planPlacement(cluster));
  const visited = [ids(plan)[0]];
  for (;;) {
    const next = replanAfterDownloadFailure(plan, plan.placements[0]!.nodeId, cluster);
    if (!next.ok) {
      assert.equal(next.error.code, 'ALL_EXCLUDED');
      break;
    }
    assert.ok(!visited.includes(ids(next.plan)[0]), 'never back on a node whose download failed');
    assert.deepEqual(next.plan.refusal, plan.refusal, 'a download failure spends no refusal hop');
    plan = next.plan;
    visited.push(ids(plan)[0]);
  }
  assert.deepEqual(visited, [nodeId(0), nodeId(1), nodeId(2)]);

  // In a split, the failed node is replaced and the rest of the request is kept.
  const split = input([node(0, 3 * GiB), node(1, 2 * GiB), node(2, 2 * GiB)]);
  const pooled = ok(planPlacement(split));
  assert.deepEqual(ids(pooled), [nodeId(1), nodeId(0)]);
  const again = ok(replanAfterDownloadFailure(pooled, nodeId(1), split));
  assert.deepEqual(ids(again), [nodeId(2), nodeId(0)]);
  assert.deepEqual(again.exclusions, [nodeId(1)]);
});
