import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StopMatcher } from './stop-matcher.js';

function run(stops: string[], pieces: string[]): { out: string; stopped: boolean } {
  const matcher = new StopMatcher(stops);
  let out = '';
  for (const piece of pieces) {
    const r = matcher.push(piece);
    out += r.text;
    if (r.stopped) return { out, stopped: true };
  }
  return { out: out + matcher.flush(), stopped: false };
}

test('without stops everything passes straight through', () => {
  assert.deepEqual(run([], ['a', 'b']), { out: 'ab', stopped: false });
});

test('a stop split across pieces is found and never emitted', () => {
  assert.deepEqual(run(['END'], ['hello E', 'N', 'D more']), { out: 'hello ', stopped: true });
});

test('a partial match that fails is released', () => {
  assert.deepEqual(run(['END'], ['hello E', 'NX', ' done']), { out: 'hello ENX done', stopped: false });
});

test('held text is flushed when generation ends', () => {
  assert.deepEqual(run(['END'], ['hello EN']), { out: 'hello EN', stopped: false });
});

test('the earliest of several stops wins, and is reported', () => {
  assert.deepEqual(run(['cd', 'b'], ['abcd']), { out: 'a', stopped: true });
  const matcher = new StopMatcher(['cd', 'b']);
  matcher.push('abcd');
  assert.equal(matcher.matchedStop, 'b');
  assert.equal(new StopMatcher(['x']).matchedStop, null);
});

test('emitted text never contains a stop, whatever the split', () => {
  const text = 'the quick brown fox jumps';
  for (let split = 0; split <= text.length; split++) {
    const r = run(['brown'], [text.slice(0, split), text.slice(split)]);
    assert.deepEqual(r, { out: 'the quick ', stopped: true });
  }
});
