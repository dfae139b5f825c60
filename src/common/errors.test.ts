import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorMessage, ShoalError, toShoalError } from './errors.js';

test('errorMessage gives an Error its message without the name, anything else as a string', () => {
  assert.equal(errorMessage(new TypeError('bad input')), 'bad input');
  assert.equal(errorMessage(new ShoalError('NOT_FOUND', 'no such model')), 'no such model');
  assert.equal(errorMessage('plain text'), 'plain text');
  assert.equal(errorMessage(42), '42');
  assert.equal(errorMessage(undefined), 'undefined');
});

test('toShoalError keeps a ShoalError and wraps anything else as INTERNAL with its cause', () => {
  const known = new ShoalError('QUEUE_FULL', 'try again');
  assert.equal(toShoalError(known), known);
  const cause = new Error('boom');
  const wrapped = toShoalError(cause);
  assert.equal(wrapped.code, 'INTERNAL');
  assert.equal(wrapped.message, 'internal error: boom');
  assert.equal(wrapped.cause, cause);
});
