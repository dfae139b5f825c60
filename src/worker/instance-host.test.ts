// The master's lost-node scan, on a real InstanceHost with real timers: a pruning that heals within
// the grace (a minority's NodeTimedOut followed by NodeReturned) changes nothing; one that lasts
// drops the lost replica, never the survivor.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import type { InstanceId, NodeId } from '../common/ids.js';
import { apply, applyRecord } from '../master/state/apply.js';
import { clusterLog, instanceSpec, nodeId } from '../master/state/fixtures.test-support.js';
import { emptyState, type ClusterState } from '../master/state/state.js';
import type { PlacementService } from '../placement/service.js';
import type { InstanceState } from '../master/state/instances.js';
import { InstanceHost, LOST_NODE_GRACE_MS, type InstanceHostOptions } from './instance-host.js';
import type { Worker } from './worker.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function replicatedCluster(): ClusterState {
  let state = emptyState();
  for (const record of clusterLog(3).records) state = applyRecord(state, record);
  return apply(state, { type: 'InstanceCreated', instance: instanceSpec('inst-r', [1, 2]), replaces: null }, 50);
}

function hostOver(state: () => ClusterState, decided: (event: 'drop', node: NodeId) => void): { host: InstanceHost; calls: string[] } {
  const calls: string[] = [];
  const placement = {
    dropReplica: async (instance: InstanceState, node: NodeId) => {
      calls.push(`drop ${instance.instanceId} ${node}`);
      decided('drop', node);
    },
    addReplica: async (instance: InstanceState) => {
      calls.push(`add ${instance.instanceId}`);
      return false;
    },
    replace: async (instance: InstanceState, node: NodeId) => {
      calls.push(`replace ${instance.instanceId} ${node}`);
      return true;
    },
  } as unknown as PlacementService;
  const worker = { status: () => [], detach: async () => {} } as unknown as Worker;
  const options = {
    selfId: nodeId(0),
    log: pino({ level: 'silent' }),
    worker,
    placement,
    state,
    isMaster: () => true,
    connected: () => true,
    runnersOf: () => null,
    offerBytes: async () => 0,
    modelPath: async () => '',
    engines: null,
    tunnels: { open: async () => assert.fail('no tunnels here') },
  } satisfies InstanceHostOptions;
  return { host: new InstanceHost(options), calls };
}

test('a pruning that heals within the grace churns nothing; one that lasts drops only the lost replica', async () => {
  const healthy = replicatedCluster();
  const pruned = apply(healthy, { type: 'NodeTimedOut', nodeId: nodeId(2), heartbeatAgeMs: 31_000, lastSeenAgeMs: 31_000 }, 51);
  let state = pruned;
  const { host, calls } = hostOver(
    () => state,
    (_event, node) => (state = apply(state, { type: 'ReplicaDropped', instanceId: 'inst-r' as InstanceId, nodeId: node, message: 'lost' }, 60)),
  );
  host.start();
  try {
    await sleep(LOST_NODE_GRACE_MS / 2);
    state = apply(pruned, { type: 'NodeReturned', nodeId: nodeId(2) }, 52);
    await sleep(LOST_NODE_GRACE_MS + 1500);
    assert.equal(calls.length, 0, `NodeTimedOut then NodeReturned within the grace: no teardown, no re-placement (${calls.join(', ')})`);

    state = pruned;
    await sleep(LOST_NODE_GRACE_MS + 2500);
    assert.deepEqual(
      calls.filter((call) => !call.startsWith('add ')),
      [`drop inst-r ${nodeId(2)}`],
      'pruned past the grace: the lost replica leaves, once, and the survivor is never re-placed',
    );
    assert.ok(calls.includes('add inst-r'), 'and the master then looks for a node to bring it back to two replicas');
  } finally {
    await host.stop();
  }
});
