import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bootstrapAddrProblem } from './bootstrap-addrs.js';

const PEER = '12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN';

test('a bootstrap address with /p2p/<peerId> is fine', () => {
  assert.equal(bootstrapAddrProblem(`/ip4/127.0.0.1/tcp/52601/p2p/${PEER}`), null);
  assert.equal(bootstrapAddrProblem(`/dns4/node.lan/tcp/52601/p2p/${PEER}`), null);
});

test('one without a peer id is named, with how to complete it', () => {
  const problem = bootstrapAddrProblem('/ip4/127.0.0.1/tcp/52601');
  assert.match(problem ?? '', /has no \/p2p\/<peerId> and is ignored/);
  assert.match(problem ?? '', /\/ip4\/127\.0\.0\.1\/tcp\/52601\/p2p\//);
});

test('one that is not a multiaddr is named too', () => {
  assert.match(bootstrapAddrProblem('192.168.1.20:52601') ?? '', /is not a multiaddr and is ignored/);
});
