import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { z } from 'zod';
import { GENESIS_HASH } from './hash.js';
import { LogRecord, verifyChain } from './record.js';
import { clusterLog, nodeId, origin } from './fixtures.test-support.js';

describe('the hash chain', () => {
  const log = clusterLog(3);
  log.add(1, { type: 'NicknameSet', nodeId: nodeId(1), nickname: 'attic' }, origin(1, { type: 'SetNickname', nodeId: nodeId(1), nickname: 'attic' }));
  log.add(4, { type: 'TermStarted', term: 4, masterId: nodeId(2) });

  test('a well-formed log verifies from genesis, and from any point inside it', () => {
    assert.deepEqual(verifyChain(0, GENESIS_HASH, log.records), { ok: true, lastHash: log.lastHash });
    const [first, second, ...rest] = log.records;
    assert.equal(verifyChain(2, second!.hash, rest, second!.term).ok, true);
    assert.equal(first!.idx, 1);
  });

  test('gaps, reordering and falling terms are refused', () => {
    const records = log.records;
    assert.equal(verifyChain(0, GENESIS_HASH, [records[0]!, records[2]!]).ok, false);
    assert.equal(verifyChain(0, GENESIS_HASH, [records[1]!, records[0]!]).ok, false);
    assert.equal(verifyChain(5, records[4]!.hash, [records[5]!], 9).ok, false, 'term 4 after term 9');
  });

  test('any flipped bit anywhere in the encoded log is detected (by the schema or by the chain)', () => {
    const wire = Buffer.from(JSON.stringify(log.records));
    const Records = z.array(LogRecord);
    let flips = 0;
    for (let i = 0; i < wire.length; i++) {
      for (const bit of [0x01, 0x20]) {
        const damaged = Buffer.from(wire);
        damaged[i] = damaged[i]! ^ bit;
        let parsed: unknown;
        try {
          parsed = JSON.parse(damaged.toString('utf8'));
        } catch {
          continue; // not JSON any more: the decoder refuses it
        }
        const records = Records.safeParse(parsed);
        if (!records.success) continue;
        flips++;
        const result = verifyChain(0, GENESIS_HASH, records.data);
        assert.equal(result.ok, false, `flip of bit ${bit} at byte ${i} went unnoticed`);
      }
    }
    assert.ok(flips > 100, `only ${flips} flips reached the chain check`);
  });
});
