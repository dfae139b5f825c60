import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { ShoalError } from '../common/errors.js';
import { formatPath } from '../common/format-path.js';
import { parseBody } from './validation.js';

test('paths read the way API users write them', () => {
  assert.equal(formatPath([]), '');
  assert.equal(formatPath(['messages', 0, 'content']), 'messages[0].content');
  assert.equal(formatPath(['stop', 2]), 'stop[2]');
});

const Schema = z.strictObject({ a: z.number(), b: z.array(z.strictObject({ c: z.string() })).optional() });

function codeOf(fn: () => unknown): { code: string; param: string | null; message: string } {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof ShoalError);
    return { code: error.code, param: error.param, message: error.message };
  }
  assert.fail('expected a ShoalError');
}

test('a body that is not an object is a BAD_REQUEST', () => {
  for (const body of [undefined, null, 'x', 3, [1]]) assert.equal(codeOf(() => parseBody(Schema, body)).code, 'BAD_REQUEST');
});

test('an invalid field is named', () => {
  const failure = codeOf(() => parseBody(Schema, { a: 1, b: [{ c: 4 }] }));
  assert.deepEqual([failure.code, failure.param], ['BAD_REQUEST', 'b[0].c']);
  assert.match(failure.message, /'b\[0\]\.c'/);
});

test('an unknown field is an UNSUPPORTED_PARAMETER naming it, also when nested', () => {
  assert.deepEqual(
    (({ code, param }) => [code, param])(codeOf(() => parseBody(Schema, { a: 1, tools: [] }))),
    ['UNSUPPORTED_PARAMETER', 'tools'],
  );
  assert.equal(codeOf(() => parseBody(Schema, { a: 1, b: [{ c: 'x', d: 1 }] })).param, 'b[0].d');
});

test('a valid body comes back typed', () => {
  assert.deepEqual(parseBody(Schema, { a: 1 }), { a: 1 });
});
