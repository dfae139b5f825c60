import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { commonPrefix, extendTerms, tailTerms, termAt, truncateTerms } from './term-ranges.js';

describe('term runs', () => {
  test('extend, look up and truncate', () => {
    const terms: { term: number; firstIdx: number }[] = [];
    for (const [idx, term] of [1, 1, 1, 5, 5, 9].entries()) extendTerms(terms, term, idx + 1);
    assert.deepEqual(terms, [
      { term: 1, firstIdx: 1 },
      { term: 5, firstIdx: 4 },
      { term: 9, firstIdx: 6 },
    ]);
    const shape = { terms, lastIdx: 6 };
    assert.deepEqual([0, 1, 3, 4, 5, 6, 7].map((idx) => termAt(shape, idx)), [undefined, 1, 1, 5, 5, 9, undefined]);
    assert.deepEqual(truncateTerms(terms, 4), terms.slice(0, 2));
    assert.deepEqual(tailTerms(terms, 2), terms.slice(1));
  });

  test('the common prefix of two logs', () => {
    const a = { terms: [{ term: 1, firstIdx: 1 }, { term: 5, firstIdx: 4 }], lastIdx: 8 };
    assert.equal(commonPrefix(a, a), 8, 'identical');
    assert.equal(commonPrefix(a, { ...a, lastIdx: 6 }), 6, 'one is a prefix of the other');
    const forkedIn5 = { terms: [{ term: 1, firstIdx: 1 }, { term: 5, firstIdx: 4 }, { term: 7, firstIdx: 6 }], lastIdx: 9 };
    assert.equal(commonPrefix(forkedIn5, a), 5, 'forked inside term 5');
    assert.equal(commonPrefix(a, forkedIn5), 5, 'symmetric');
    assert.equal(commonPrefix({ terms: [{ term: 1, firstIdx: 1 }, { term: 7, firstIdx: 6 }], lastIdx: 9 }, a), 3, 'term 5 never reached the other');
    assert.equal(commonPrefix({ terms: [{ term: 1, firstIdx: 1 }, { term: 3, firstIdx: 3 }], lastIdx: 9 }, a), 2, 'forked inside term 1');
    assert.equal(commonPrefix({ terms: [{ term: 2, firstIdx: 1 }], lastIdx: 3 }, a), 0, 'nothing shared');
    assert.equal(commonPrefix({ terms: [], lastIdx: 0 }, a), 0, 'empty');
  });

  test('a cut-short run list that hides the answer says so', () => {
    const a = { terms: [{ term: 1, firstIdx: 1 }, { term: 5, firstIdx: 4 }], lastIdx: 8 };
    assert.equal(commonPrefix({ terms: [{ term: 7, firstIdx: 20 }], lastIdx: 25 }, a), null);
    assert.equal(commonPrefix({ terms: [{ term: 5, firstIdx: 6 }], lastIdx: 9 }, a), 8, 'the tail still overlaps');
  });
});
