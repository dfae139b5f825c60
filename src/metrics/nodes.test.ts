import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MemberView, StatusView } from '../api/control/control.js';
import { peersOf, resolveNode } from './nodes.js';

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
