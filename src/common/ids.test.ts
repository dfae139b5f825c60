import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ClusterId, clusterIdFrom, CommandId, commandIdFrom, NodeId } from './ids.js';

test('ids drawn from injected randomness are well-formed, even at the ends of [0, 1]', () => {
  for (const value of [0, 0.5, 0.999999, 1]) {
    assert.ok(CommandId.safeParse(commandIdFrom(() => value)).success, `command id from ${value}`);
    assert.ok(ClusterId.safeParse(clusterIdFrom(() => value)).success, `cluster id from ${value}`);
  }
  let x = 7;
  const ids = new Set(Array.from({ length: 1000 }, () => commandIdFrom(() => ((x = (x * 48271) % 2147483647) / 2147483647))));
  assert.equal(ids.size, 1000);
});

test('node ids are libp2p Ed25519 peer ids', () => {
  assert.ok(NodeId.safeParse(`12D3KooW${'A'.repeat(44)}`).success);
  assert.ok(!NodeId.safeParse(`12D3KooW${'0'.repeat(44)}`).success, 'base58 has no 0');
  assert.ok(!NodeId.safeParse('QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N').success);
});
