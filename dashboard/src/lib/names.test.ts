import assert from 'node:assert/strict';
import { test } from 'node:test';
import { hasNodeId, nameNodeIds } from './names.js';

const ALPHA = '12D3KooWEttWsvGZeuisixw86acAAtxbgVRaz9NrANahD5gQAW7M';
const OTHER = '12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN';

test('peer ids in a line become names, each where it occurs', () => {
  const names = new Map([[ALPHA, 'alpha']]);
  const nameOf = (id: string): string => names.get(id) ?? `…${id.slice(-8)}`;
  assert.equal(nameNodeIds(`member ${ALPHA} joined; nodeId=${ALPHA}`, nameOf), 'member alpha joined; nodeId=alpha');
  assert.equal(nameNodeIds(`/ip4/10.0.0.2/tcp/52601/p2p/${OTHER}`, nameOf), `/ip4/10.0.0.2/tcp/52601/p2p/…${OTHER.slice(-8)}`);
  assert.equal(nameNodeIds('no ids here, not even 12D3KooW…', nameOf), 'no ids here, not even 12D3KooW…');
});

test('hasNodeId finds an id anywhere and nothing else', () => {
  assert.equal(hasNodeId(`x=${ALPHA}`), true);
  assert.equal(hasNodeId('12D3KooW… (an example)'), false);
  // The global regex's position does not leak between calls.
  assert.equal(hasNodeId(`${OTHER}`), true);
  assert.equal(hasNodeId(`${OTHER}`), true);
});
