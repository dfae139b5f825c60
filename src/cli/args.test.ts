import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isShoalError } from '../common/errors.js';
import { parseArgs, unknownCommandMessage, wantsHelp } from './args.js';

const options = { 'api-port': { type: 'string' }, json: { type: 'boolean' }, follow: { type: 'boolean', short: 'f' } } as const;

function failure(args: string[], allowPositionals = false): string {
  try {
    parseArgs({ args, options, strict: true, allowPositionals });
  } catch (error) {
    assert.ok(isShoalError(error) && error.code === 'BAD_REQUEST');
    return error.message;
  }
  assert.fail(`parsed ${args.join(' ')}`);
}

test('parseArgs parses what node parses', () => {
  const { values, positionals } = parseArgs({ args: ['--api-port', '5', '-f', 'x'], options, strict: true, allowPositionals: true });
  assert.deepEqual({ ...values }, { 'api-port': '5', follow: true });
  assert.deepEqual(positionals, ['x']);
});

test('an unknown option names the nearest known one', () => {
  assert.equal(failure(['--apiport', '5']), 'unknown option --apiport; did you mean --api-port?');
  assert.equal(failure(['--jsno=1']), 'unknown option --jsno; did you mean --json?');
  assert.equal(failure(['--zebra']), 'unknown option --zebra');
  assert.equal(failure(['-x']), 'unknown option -x');
});

test('a missing value, a value for a flag and a stray argument say so plainly', () => {
  assert.equal(failure(['--api-port']), 'option --api-port needs a value');
  assert.equal(failure(['--json=yes']), 'option --json takes no value');
  assert.equal(failure(['extra']), "unexpected argument 'extra': this command takes only options");
});

test('unknownCommandMessage suggests the nearest command', () => {
  assert.equal(unknownCommandMessage('command', 'stauts', ['status', 'ps']), "unknown command 'stauts'; did you mean 'status'?");
  assert.equal(unknownCommandMessage('command', 'frobnicate', ['status', 'ps']), "unknown command 'frobnicate'");
});

test('wantsHelp sees -h and --help before --, not after', () => {
  assert.equal(wantsHelp(['x', '--help']), true);
  assert.equal(wantsHelp(['-h']), true);
  assert.equal(wantsHelp(['--', '--help']), false);
  assert.equal(wantsHelp(['--helpful']), false);
});
