import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NodeDownloadsView } from '../api/control/control.js';
import type { InstanceId } from '../common/ids.js';
import { apply, applyRecord } from '../master/state/apply.js';
import { clusterLog, instanceSpec, nodeId } from '../master/state/fixtures.test-support.js';
import { emptyState } from '../master/state/state.js';
import { instanceViews } from './node-views.js';

const state = clusterLog(3).records.reduce(applyRecord, emptyState());
const report = (modelId: string, id: string): NodeDownloadsView['downloads'][number] => ({
  id,
  modelId,
  state: 'downloading',
  doneBytes: 10,
  totalBytes: 100,
  bytesPerSecond: 5,
  source: { kind: 'peer', nodeId: nodeId(0), name: 'n0' },
  error: null,
  agoMs: 1000,
});

test('an instance view shows the downloads of its model on the nodes holding its parts, and nothing else', () => {
  const placed = apply(state, { type: 'InstanceCreated', instance: instanceSpec('inst-a', [0, 1]), replaces: null }, 20);
  const downloads: Record<string, NodeDownloadsView> = {
    [nodeId(1)]: { ageMs: 200, downloads: [report('shoal/tiny', 'dl-1'), report('other/model', 'dl-2')] },
    [nodeId(2)]: { ageMs: 200, downloads: [report('shoal/tiny', 'dl-3')] },
  };
  const [view] = instanceViews(placed, nodeId(0), [], () => null, downloads);
  assert.deepEqual(view?.downloads, [{ ...report('shoal/tiny', 'dl-1'), nodeId: nodeId(1) }], 'node 2 holds no part; other/model is another model');
  assert.equal(view?.awaitingApproval, null);
});

test('an instance awaiting approval names the nodes and sizes it waits for, and says so for each part', () => {
  const spec = { ...instanceSpec('inst-w', [0, 1]), awaitingApproval: [{ nodeId: nodeId(1), bytes: 5e9, source: 'hub' as const }] };
  const placed = apply(state, { type: 'InstanceCreated', instance: spec, replaces: null }, 20);
  const [view] = instanceViews(placed, nodeId(0), [], () => null);
  assert.equal(view?.instanceId, 'inst-w' as InstanceId);
  assert.deepEqual(view?.awaitingApproval, [{ nodeId: nodeId(1), name: placed.members[nodeId(1)]?.name ?? null, bytes: 5e9, source: 'hub' }]);
  assert.ok(view?.awaitingApproval?.[0]?.name, 'a member has a name');
  assert.ok(view?.runners.every((r) => r.state === 'unknown' && r.reason === 'waits for the approval of its downloads'));
  assert.deepEqual(view?.downloads, []);
});
