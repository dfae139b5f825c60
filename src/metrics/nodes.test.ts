import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MemberView, StatusView } from '../api/control/control.js';
import { RESOURCES_STALE_MS, type ResourcesView } from '../cluster/telemetry.js';
import type { ClusterState } from '../master/state/state.js';
import { memberGpus, peersOf, resolveNode } from './nodes.js';
import type { NodeGpus } from './prometheus.js';

const member = (nodeId: string, name: string, nickname: string | null = null): MemberView => ({
  nodeId, name, nickname, fingerprint: 'F', isMaster: false, isSelf: nodeId === 'self', hostPreferred: false, health: { level: 'ok', reasons: [] },
});

function status(role: 'standalone' | 'member', members: MemberView[]): StatusView {
  return { nodeId: 'self', name: 'me', role, members } as unknown as StatusView;
}

test('no selector, the own id or the own name is this node', () => {
  const s = status('standalone', []);
  for (const selector of [undefined, '', 'self', 'me']) assert.deepEqual(resolveNode(s, selector), { nodeId: 'self', name: 'me', isSelf: true });
  assert.throws(() => resolveNode(s, 'other'), /no member is called 'other'/);
  assert.deepEqual(peersOf(s), []);
});

test('members by id, name or nickname; an ambiguous name asks for the id', () => {
  const s = status('member', [member('self', 'me'), member('b', 'beta', 'bee'), member('c', 'gamma'), member('d', 'gamma')]);
  assert.deepEqual(resolveNode(s, 'b'), { nodeId: 'b', name: 'bee', isSelf: false });
  assert.deepEqual(resolveNode(s, 'beta'), { nodeId: 'b', name: 'bee', isSelf: false });
  assert.deepEqual(resolveNode(s, 'bee'), { nodeId: 'b', name: 'bee', isSelf: false });
  assert.throws(() => resolveNode(s, 'gamma'), /names 2 members: use the node id/);
  assert.deepEqual(resolveNode(s, 'me'), { nodeId: 'self', name: 'me', isSelf: true });
  assert.deepEqual(peersOf(s).map((p) => p.nodeId), ['b', 'c', 'd']);
});

test('a standalone node has no peers even if its last roster lingers', () => {
  const s = status('standalone', [member('self', 'me'), member('b', 'beta')]);
  assert.deepEqual(peersOf(s), []);
  assert.throws(() => resolveNode(s, 'beta'), /no member/);
});

test('memberGpus: own readings first, fresh members by nickname or name, stale reports and self left out', () => {
  const gpu = (name: string) => ({ index: 0, name, vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 1, vramFreeBytes: 1, utilization: null, temperatureC: null, powerW: null });
  const state = { members: { a: { name: 'box-a', nickname: 'attic' }, b: { name: 'box-b', nickname: null } } } as unknown as ClusterState;
  const resources = {
    self: { ageMs: 0, gpus: [gpu('old self')] },
    a: { ageMs: 500, gpus: [gpu('A')] },
    b: { ageMs: RESOURCES_STALE_MS + 1, gpus: [gpu('B')] },
    c: { ageMs: 0, gpus: [] },
  } as unknown as Record<string, ResourcesView>;
  const self = { nodeId: 'self', name: 'me', gpus: [gpu('mine')] } as unknown as NodeGpus;
  const shown = memberGpus(self, state, resources);
  assert.deepEqual(shown.map((n) => [n.nodeId, n.name, n.gpus.map((g) => g.name)]), [
    ['self', 'me', ['mine']],
    ['a', 'attic', ['A']],
    ['c', 'c', []],
  ]);
});
