import assert from 'node:assert/strict';
import { readFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { LogStore } from '../src/master/log/store.js';
import { GENESIS_HASH } from '../src/master/state/hash.js';
import { CommandId, NodeId } from '../src/common/ids.js';
import { makeRecord, type LogRecord } from '../src/master/state/record.js';
import { checkHistory, failoversMs, makeSchedule, readNodeLog, saveChaosArtifact, type FinalView, type NodeLog, type Write } from '../test/support/chaos.js';

const write = (value: string, outcome: Write['outcome'], startMs = 0): Write => ({ client: 'h1', value, startMs, endMs: startMs + 10, outcome });
const agreeing: FinalView[] = ['h1', 'h2'].map((node) => ({ node, role: 'member', masterId: 'M', stateHash: 'abc', lastIdx: 9, members: 2 }));
const log = (node: string, writes: [number, string][], firstIdx = 1): NodeLog => ({ node, firstIdx, lastIdx: 9, writes: writes.map(([idx, value]) => ({ idx, value, applied: true })) });

describe('the chaos history checker', () => {
  test('passes a history whose acknowledged writes are each in every log once', () => {
    const history = [write('w-1', 'ack'), write('w-2', 'unknown'), write('w-3', 'unknown'), write('w-4', 'fail')];
    const logs = [log('h1', [[2, 'w-1'], [3, 'w-2']]), log('h2', [[2, 'w-1'], [3, 'w-2']])];
    const verdict = checkHistory(history, logs, agreeing);
    assert.deepEqual(verdict.problems, []);
    assert.equal(verdict.ok, true);
    assert.equal(verdict.acknowledged, 1);
    assert.equal(verdict.unknownDecided, 1);
  });

  test('fails on a lost acknowledged write, a duplicate, a phantom and a disagreement', () => {
    const history = [write('w-1', 'ack'), write('w-2', 'ack'), write('w-3', 'fail')];
    const logs = [log('h1', [[2, 'w-1'], [3, 'w-1'], [4, 'w-2']]), log('h2', [[2, 'w-1'], [4, 'w-3']])];
    const verdict = checkHistory(history, logs, agreeing);
    assert.equal(verdict.ok, false);
    assert.deepEqual(verdict.lost, ['w-2']);
    assert.deepEqual(verdict.duplicated, ['w-1']);
    assert.deepEqual(verdict.phantom, ['w-3']);
    assert.ok(verdict.problems.some((p) => p.includes('disagree at idx 4')));
  });

  test('fails when the nodes end with two masters or two state hashes', () => {
    const split: FinalView[] = [agreeing[0]!, { ...agreeing[1]!, masterId: 'N', stateHash: 'def' }];
    const verdict = checkHistory([], [log('h1', []), log('h2', [])], split);
    assert.equal(verdict.ok, false);
    assert.equal(verdict.problems.length, 2);
  });

  test('a write in records a node compacted away is unverifiable there, not lost', () => {
    const verdict = checkHistory([write('w-1', 'ack')], [log('h1', [[2, 'w-1']]), log('h2', [], 5)], agreeing);
    assert.equal(verdict.ok, true);
    assert.equal(verdict.unverifiable, 1);
  });

  test('a seed replays the same schedule, and another seed gives another', () => {
    const counts = { masterKills: 3, followerKills: 1, stops: 1, partitions: 1, losses: 1 };
    assert.deepEqual(makeSchedule(7, counts), makeSchedule(7, counts));
    assert.notDeepEqual(makeSchedule(7, counts), makeSchedule(8, counts));
    assert.equal(makeSchedule(7, counts).filter((s) => s.kind === 'kill-master').length, 3);
  });

  test('failover is the time from a kill to the first acknowledgement of a write sent after it', () => {
    const history = [write('a', 'ack', 900), write('b', 'unknown', 1000), write('c', 'ack', 2000), write('d', 'ack', 2500)];
    assert.deepEqual(failoversMs([{ kind: 'kill-master', node: 'h1', atMs: 1000, endMs: 1500, agreedMs: 0 }], history), [1010]);
  });

  test('the offline reader finds each chaos write by its command, applied or rejected, and nothing else', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-chaos-log-'));
    try {
      const from = NodeId.parse('12D3KooWGzh8uDgKXeeGEqS2VJ5rA8mHWRvrW2tJmJnUKQ7z6Xcd');
      const origin = (n: number, nickname: string) => ({ commandId: CommandId.parse(`00000000-0000-4000-8000-00000000000${n}`), from, command: { type: 'SetNickname' as const, nodeId: from, nickname } });
      const records: LogRecord[] = [];
      const push = (event: LogRecord['event'], o: LogRecord['origin']): void => {
        records.push(makeRecord(records.at(-1)?.hash ?? GENESIS_HASH, 1, records.length + 1, event, o));
      };
      push({ type: 'NicknameSet', nodeId: from, nickname: 'w-9-h1-0' }, origin(1, 'w-9-h1-0'));
      push({ type: 'NicknameSet', nodeId: from, nickname: 'other' }, origin(2, 'other'));
      push({ type: 'CommandRejected', commandId: origin(3, 'w-9-h2-0').commandId, code: 'MEMBER_NOT_FOUND', message: 'gone' }, origin(3, 'w-9-h2-0'));
      const store = await LogStore.open<LogRecord>(join(dir, 'log'));
      await store.append(records);
      await store.close();
      const read = await readNodeLog('h1', dir, 'w-9-');
      assert.deepEqual(read, { node: 'h1', firstIdx: 1, lastIdx: 3, writes: [{ idx: 1, value: 'w-9-h1-0', applied: true }, { idx: 3, value: 'w-9-h2-0', applied: false }] });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a failure artifact holds the seed and what it was given', async () => {
    const path = await saveChaosArtifact(42, { history: [write('w-1', 'ack')] });
    try {
      const saved = JSON.parse(await readFile(path, 'utf8')) as { seed: number; history: Write[] };
      assert.equal(saved.seed, 42);
      assert.equal(saved.history[0]!.value, 'w-1');
    } finally {
      await rm(path, { force: true });
    }
  });
});
