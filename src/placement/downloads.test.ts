import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { awaitingApproval, plannedDownloads, type DownloadsInput } from './downloads.js';
import { card, factsA, GiB, node, nodeId } from './fixtures.test-support.js';
import { planPlacement } from './planner.js';

const names = (id: string): string | null => (id === nodeId(0) ? 'alpha' : id === nodeId(1) ? 'beta' : null);

function input(overrides: Partial<DownloadsInput> = {}): DownloadsInput {
  return { nodeIds: [nodeId(0), nodeId(1)], modelBytes: 5 * GiB, downloadable: true, holders: new Set([nodeId(0)]), approvalBytes: 4 * GiB, names, ...overrides };
}

describe('the downloads a plan would start', () => {
  test('a node without a copy downloads it, from a member that holds one; above the threshold it needs approval', () => {
    const plan = plannedDownloads(input());
    assert.deepEqual(plan, {
      downloads: [{ nodeId: nodeId(1), name: 'beta', bytes: 5 * GiB, source: 'peer', needsApproval: true }],
      approvalBytes: 4 * GiB,
      needsApproval: true,
    });
    assert.deepEqual(awaitingApproval(plan), [{ nodeId: nodeId(1), bytes: 5 * GiB, source: 'peer' }]);
  });

  test('at or below the threshold it is listed and starts without asking', () => {
    const plan = plannedDownloads(input({ modelBytes: 4 * GiB }));
    assert.equal(plan.downloads.length, 1);
    assert.equal(plan.downloads[0]?.needsApproval, false);
    assert.equal(plan.needsApproval, false);
    assert.equal(awaitingApproval(plan), undefined);
  });

  test('a threshold of 0 asks for every download', () => {
    assert.equal(plannedDownloads(input({ modelBytes: 1, approvalBytes: 0 })).needsApproval, true);
  });

  test('with no member holding a copy, every node downloads from the hub', () => {
    const plan = plannedDownloads(input({ holders: new Set() }));
    assert.deepEqual(plan.downloads.map((d) => [d.name, d.source]), [['alpha', 'hub'], ['beta', 'hub']]);
  });

  test('nodes that hold a copy, built-in models and a node holding two parts download nothing more', () => {
    assert.deepEqual(plannedDownloads(input({ holders: new Set([nodeId(0), nodeId(1)]) })).downloads, []);
    assert.deepEqual(plannedDownloads(input({ downloadable: false, holders: new Set() })).downloads, []);
    assert.equal(plannedDownloads(input({ nodeIds: [nodeId(1), nodeId(1)] })).downloads.length, 1);
  });

  test('over a real plan: replicas on two nodes, one holding the file, lists the other with its name', () => {
    const facts = factsA();
    const result = planPlacement({ card: card(), facts, nodes: [node(0, 64 * GiB), node(1, 64 * GiB)] }, { replicas: 2 });
    assert.ok(result.ok, JSON.stringify(result));
    const plan = plannedDownloads(input({ nodeIds: result.plan.placements.map((p) => p.nodeId), modelBytes: facts.fileBytes, approvalBytes: GiB }));
    assert.deepEqual(plan.downloads.map((d) => ({ name: d.name, bytes: d.bytes, needsApproval: d.needsApproval })), [{ name: 'beta', bytes: facts.fileBytes, needsApproval: true }]);
  });
});
