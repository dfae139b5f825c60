import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { nextTerm, TERM_SLOTS, termSlotOf } from './election.js';
import { byRank, compareRank, outranks, type Rankable } from './rank.js';

const node = (nodeId: string, admittedIdx: number, hostPreferred = false): Rankable => ({ nodeId, admittedIdx, hostPreferred });

describe('rank', () => {
  test('host preference first, then seniority, then node id ascending', () => {
    const senior = node('12D3KooWzz', 1);
    const junior = node('12D3KooWaa', 5);
    const preferredJunior = node('12D3KooWmm', 9, true);
    assert.ok(outranks(senior, junior), 'seniority beats a smaller id');
    assert.ok(outranks(preferredJunior, senior), 'the operator preference beats seniority');
    assert.ok(outranks(node('12D3KooWaa', 3), node('12D3KooWab', 3)), 'ties go to the smaller id');
    assert.equal(compareRank(senior, { ...senior }), 0);
    assert.deepEqual(
      byRank([junior, senior, preferredJunior]).map((n) => n.nodeId),
      ['12D3KooWmm', '12D3KooWzz', '12D3KooWaa'],
    );
  });

  test('the order is total and antisymmetric', () => {
    const nodes = [node('a', 1), node('b', 1), node('c', 2, true), node('d', 2), node('e', 3, true)];
    for (const a of nodes) for (const b of nodes) if (a !== b) assert.notEqual(outranks(a, b), outranks(b, a), `${a.nodeId} vs ${b.nodeId}`);
  });
});

describe('terms', () => {
  test('a node only claims terms of its own slot, always above what it saw', () => {
    assert.equal(nextTerm(0, 0), 1);
    assert.equal(nextTerm(1, 0), 1 + TERM_SLOTS);
    assert.equal(nextTerm(1, 4), 5);
    assert.equal(nextTerm(700, 3), 772);
    assert.equal(nextTerm(0, TERM_SLOTS - 1), TERM_SLOTS);
    for (const above of [0, 1, 5, 255, 256, 257, 1000, 123_456]) {
      for (const slot of [0, 1, 17, TERM_SLOTS - 1]) {
        const term = nextTerm(above, slot);
        assert.ok(term > above && term <= above + TERM_SLOTS);
        assert.equal(termSlotOf(term), slot);
      }
    }
    assert.throws(() => nextTerm(0, TERM_SLOTS));
  });

  test('two slots never pick the same term, whatever each has seen', () => {
    const claimed = new Map<number, number>();
    for (let slot = 0; slot < 8; slot++) {
      for (let seen = 0; seen < 2000; seen += 37) {
        const term = nextTerm(seen, slot);
        assert.ok(!claimed.has(term) || claimed.get(term) === slot);
        claimed.set(term, slot);
      }
    }
  });
});
