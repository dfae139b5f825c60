import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError } from '../../common/errors.js';
import { ClusterRemoveError } from '../cluster-remove-error.js';
import { ModelsError } from '../hub/errors.js';
import type { NodeRemoval } from '../views.js';
import { friendlyHubError, remoteError, withPeerFailures } from './failures.js';

const refusal = (error: NodeRemoval['error']): NodeRemoval => ({ nodeId: 'n2', name: 'alpha', self: false, outcome: 'refused', freedBytes: 0, removedFiles: false, cardFile: null, error });

test("a member's refusal keeps its models reason, and an unknown code becomes INTERNAL", () => {
  const inUse = remoteError(refusal({ code: 'BAD_REQUEST', reason: 'MODEL_IN_USE', message: 'it is loaded' }));
  assert.ok(inUse instanceof ModelsError);
  assert.equal(inUse.reason, 'MODEL_IN_USE');
  assert.equal(inUse.message, 'alpha refused: it is loaded');
  const odd = remoteError(refusal({ code: 'NO_SUCH_CODE', reason: 'NO_SUCH_REASON', message: 'what' }));
  assert.ok(!(odd instanceof ModelsError));
  assert.equal(odd.code, 'INTERNAL');
});

test('a failed download names the members tried, keeping the reason of its own failure', () => {
  const error = withPeerFailures(new ModelsError('DOWNLOAD_FAILED', 'the hub cut it short'), [{ name: 'alpha', message: 'gone' }]);
  assert.ok(error instanceof ModelsError);
  assert.equal(error.reason, 'DOWNLOAD_FAILED');
  assert.equal(error.message, 'the hub cut it short; copying from the members that hold it failed too (alpha: gone)');
  const alone = new ShoalError('INTERNAL', 'x');
  assert.equal(withPeerFailures(alone, []), alone);
});

test('an unreachable hub is worded with the endpoint and what to do', () => {
  const error = friendlyHubError(new ModelsError('HUB_UNREACHABLE', 'fetch failed', { cause: new Error('ECONNREFUSED') }), 'http://127.0.0.1:9');
  assert.equal(error.message, 'the model hub at http://127.0.0.1:9 cannot be reached (ECONNREFUSED): check the network or set SHOAL_HF_ENDPOINT');
});

test('a cluster removal that removed nothing is a ShoalError with the code, reason and message of why', () => {
  const nodes = [refusal({ code: 'BAD_REQUEST', reason: 'MODEL_IN_USE', message: 'it is loaded' })];
  const why = remoteError(nodes[0]!);
  const error = new ClusterRemoveError(why, nodes);
  assert.ok(error instanceof ShoalError);
  assert.deepEqual([error.code, error.reason, error.message, error.cause], ['BAD_REQUEST', 'MODEL_IN_USE', 'alpha refused: it is loaded', why]);
  assert.equal(error.nodes, nodes);
  const absent = new ClusterRemoveError(new ShoalError('NOT_FOUND', 'no model'), []);
  assert.deepEqual([absent.code, absent.reason], ['NOT_FOUND', null]);
});
