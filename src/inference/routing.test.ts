import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InstanceId, ModelId, NodeId } from '../common/ids.js';
import { chooseRoute, type RouteCandidate } from './routing.js';

// This node's id sorts first, so a tie broken by id would pick it: only the hop handicap makes a remote lose a tie.
const SELF = 'node-0' as NodeId;

/** A ready, idle runner of `m` on this node unless told otherwise. */
function candidate(instanceId: string, over: Partial<RouteCandidate> = {}): RouteCandidate {
  const local = over.local ?? true;
  return {
    nodeId: local ? SELF : ('node-z' as NodeId),
    instanceId: instanceId as InstanceId,
    modelId: 'm' as ModelId,
    role: 'full',
    state: 'ready',
    reason: null,
    load: 0,
    sentOpen: 0,
    local,
    ...over,
  };
}

function routed(candidates: RouteCandidate[]): string {
  const choice = chooseRoute(candidates);
  assert.equal(choice.kind, 'route', `expected a route, got ${JSON.stringify(choice)}`);
  return choice.kind === 'route' ? choice.candidate.instanceId : '';
}

test('no candidates: none', () => {
  assert.deepEqual(chooseRoute([]), { kind: 'none' });
});

test('a ready runner wins over idle ones that are not ready, however loaded it is', () => {
  assert.equal(routed([candidate('a', { state: 'starting' }), candidate('b', { load: 50 }), candidate('c', { state: 'restarting' })]), 'b');
});

test('among ready runners the least loaded wins, counting requests this node sent that the report may not show', () => {
  assert.equal(routed([candidate('a', { load: 3 }), candidate('b', { load: 1 }), candidate('c', { load: 2 })]), 'b');
  assert.equal(routed([candidate('a', { local: false, load: 0, sentOpen: 3 }), candidate('b', { local: false, nodeId: 'node-third' as NodeId, load: 2 })]), 'b');
});

test('this node wins a tie with a remote runner, and equal remotes are broken by node and instance id', () => {
  assert.equal(routed([candidate('remote', { local: false, load: 1 }), candidate('local', { load: 1 })]), 'local');
  assert.equal(routed([candidate('local', { load: 1 }), candidate('remote', { local: false, load: 1 })]), 'local');
  const b = candidate('i-1', { local: false, nodeId: 'node-b' as NodeId });
  const a = candidate('i-2', { local: false, nodeId: 'node-a' as NodeId });
  assert.equal(routed([b, a]), 'i-2');
  assert.equal(routed([a, b]), 'i-2');
});

test('a remote runner carries half a request of handicap: it wins only when it is at least one request less loaded', () => {
  assert.equal(routed([candidate('local', { load: 1 }), candidate('remote', { local: false, load: 0 })]), 'remote');
  assert.equal(routed([candidate('local', { load: 1 }), candidate('remote', { local: false, load: 0, sentOpen: 1 })]), 'local');
  // Same load as the local one plus half: a remote at 0 against a local at 0 stays local.
  assert.equal(routed([candidate('remote', { local: false }), candidate('local')]), 'local');
});

test('donors never serve: only donors is none, and an idle ready donor loses to a busy full runner or driver', () => {
  assert.deepEqual(chooseRoute([candidate('d1', { role: 'donor' }), candidate('d2', { role: 'donor', local: false })]), { kind: 'none' });
  assert.equal(routed([candidate('donor', { role: 'donor' }), candidate('full', { load: 9 })]), 'full');
  assert.equal(routed([candidate('donor', { role: 'donor' }), candidate('driver', { role: 'driver', load: 9 })]), 'driver');
  // A donor that is not ready does not make the model "loading" either.
  assert.equal(routed([candidate('donor', { role: 'donor', state: 'starting' }), candidate('full')]), 'full');
});

test('nothing ready: loading while any runner may still come up, failed once all gave up; reasons name each runner', () => {
  const starting = candidate('i-a', { state: 'starting', reason: 'loading the model' });
  const restarting = candidate('i-b', { state: 'restarting', local: false, nodeId: 'node-b' as NodeId });
  const failed = candidate('i-c', { state: 'failed', reason: 'circuit breaker open' });
  const stopped = candidate('i-d', { state: 'stopped', local: false, nodeId: 'node-d' as NodeId });
  const donor = candidate('i-e', { role: 'donor', state: 'failed', reason: 'donor down' });

  assert.deepEqual(chooseRoute([starting, restarting, failed, donor]), {
    kind: 'loading',
    reasons: ['i-a on this node: loading the model', 'i-b on node-b: restarting', 'i-c on this node: circuit breaker open'],
  });
  assert.deepEqual(chooseRoute([failed, stopped, donor]), {
    kind: 'failed',
    reasons: ['i-c on this node: circuit breaker open', 'i-d on node-d: stopped'],
  });
});

test("among equally loaded runners the one holding the prompt's prefix wins, over the hop too; a lighter load still wins", () => {
  const holder = (c: RouteCandidate) => ({ nodeId: c.nodeId, instanceId: c.instanceId });
  const a = candidate('a', { local: false, nodeId: 'node-a' as NodeId });
  const b = candidate('b', { local: false, nodeId: 'node-b' as NodeId });
  assert.equal(routed([a, b]), 'a');
  assert.equal((chooseRoute([a, b], holder(b)) as { candidate: RouteCandidate }).candidate.instanceId, 'b');
  // The holder's cache saves evaluating the whole prefix, much more than the hop costs.
  const mine = candidate('mine');
  assert.equal((chooseRoute([mine, b], holder(b)) as { candidate: RouteCandidate }).candidate.instanceId, 'b');
  // Busier by one request, counted from the report or from what this node sent, the holder loses.
  assert.equal((chooseRoute([a, { ...b, load: 1 }], holder(b)) as { candidate: RouteCandidate }).candidate.instanceId, 'a');
  assert.equal((chooseRoute([mine, { ...b, sentOpen: 1 }], holder(b)) as { candidate: RouteCandidate }).candidate.instanceId, 'mine');
  // A holder that is not ready, or a donor, is no candidate at all.
  assert.equal((chooseRoute([a, { ...b, state: 'starting' }], holder(b)) as { candidate: RouteCandidate }).candidate.instanceId, 'a');
  assert.equal((chooseRoute([a, { ...b, role: 'donor' }], holder(b)) as { candidate: RouteCandidate }).candidate.instanceId, 'a');
});
