import assert from 'node:assert/strict';
import { test } from 'node:test';
import { JsonEnd } from './json-end.js';

function endOf(pieces: string[]): { piece: number; offset: number } | null {
  const tracker = new JsonEnd();
  for (const [i, piece] of pieces.entries()) {
    const at = tracker.push(piece);
    if (at >= 0) return { piece: i, offset: at };
  }
  return null;
}

test('the end of an object is found, whatever the chunking', () => {
  const text = '{"a": "x}y", "b": [1, {"c": "\\"}"}]}   ';
  const end = text.lastIndexOf('}') + 1;
  for (let split = 0; split <= text.length; split++) {
    const found = endOf([text.slice(0, split), text.slice(split)]);
    assert.ok(found, `split ${split}`);
    assert.equal((found.piece === 0 ? 0 : split) + found.offset, end, `split ${split}`);
  }
});

test('arrays end too; leading whitespace is fine', () => {
  assert.deepEqual(endOf(['  [1, [2]] ']), { piece: 0, offset: 10 });
});

test('an unfinished value has no end', () => {
  assert.equal(endOf(['{"a": [1, 2']), null);
  assert.equal(endOf(['{"a": "}']), null);
});
