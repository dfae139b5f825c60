import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { canonicalJson, GENESIS_HASH, recordHash, sha256Hex, stateHash } from './hash.js';

const sha256Of = (value: unknown): string => sha256Hex(canonicalJson(value));
import { defaultSettings, DEFAULT_DOWNLOAD_APPROVAL_BYTES } from './settings.js';
import { emptyState, type ClusterState } from './state.js';
import { member, nodeId } from './fixtures.test-support.js';

describe('canonical JSON and hashes', () => {
  test('key order never matters, at any depth; array order does', () => {
    assert.equal(canonicalJson({ b: 1, a: { d: [3, { y: 1, x: 2 }], c: null } }), '{"a":{"c":null,"d":[3,{"x":2,"y":1}]},"b":1}');
    assert.equal(canonicalJson({ a: 1, b: 2 }), canonicalJson({ b: 2, a: 1 }));
    assert.notEqual(canonicalJson([1, 2]), canonicalJson([2, 1]));
  });

  test('undefined keys are left out as in JSON; non-JSON values are refused', () => {
    assert.equal(canonicalJson({ a: undefined, b: 'x' }), '{"b":"x"}');
    assert.equal(canonicalJson([undefined]), '[null]');
    assert.throws(() => canonicalJson({ a: Number.NaN }));
    assert.throws(() => canonicalJson({ a: Infinity }));
    assert.throws(() => canonicalJson({ a: () => 1 }));
  });

  test('strings are escaped exactly as JSON.stringify does', () => {
    const text = 'quote " backslash \\ newline \n unicode é \u2028';
    assert.equal(canonicalJson({ text }), JSON.stringify({ text }));
  });

  test('stateHash is independent of the order members were inserted', () => {
    const m0 = { ...member(0), nickname: null, admittedIdx: 1, termSlot: 0, hostPreferred: false, status: 'active' as const };
    const m1 = { ...member(1), nickname: 'b', admittedIdx: 3, termSlot: 1, hostPreferred: true, status: 'pruned' as const };
    const a: ClusterState = { clusterId: null, members: { [nodeId(0)]: m0, [nodeId(1)]: m1 }, dissolved: false, instances: {}, settings: defaultSettings() };
    const b: ClusterState = { settings: defaultSettings(), instances: {}, dissolved: false, members: { [nodeId(1)]: { ...m1 }, [nodeId(0)]: { ...m0 } }, clusterId: null };
    assert.equal(stateHash(a), stateHash(b));
    assert.match(stateHash(a), /^[0-9a-f]{64}$/);
    assert.notEqual(stateHash(a), stateHash(emptyState()));
  });

  test('settings at their defaults leave the hash of a state from before settings existed unchanged; others change it', () => {
    const { settings: _settings, ...before } = emptyState();
    assert.equal(stateHash(emptyState()), sha256Of(before));
    const changed = { ...emptyState(), settings: { ...defaultSettings(), downloadApprovalBytes: DEFAULT_DOWNLOAD_APPROVAL_BYTES + 1 } };
    assert.notEqual(stateHash(changed), stateHash(emptyState()));
  });

  test('tracing off leaves the hash of settings from before the switch existed unchanged; on changes it', () => {
    const { tracing: _tracing, ...older } = { ...defaultSettings(), downloadApprovalBytes: 0 };
    const withSwitch: ClusterState = { ...emptyState(), settings: { ...older, tracing: false } };
    assert.equal(stateHash(withSwitch), sha256Of({ ...emptyState(), settings: older }));
    assert.notEqual(stateHash({ ...withSwitch, settings: { ...older, tracing: true } }), stateHash(withSwitch));
    assert.notEqual(stateHash({ ...emptyState(), settings: { ...defaultSettings(), tracing: true } }), stateHash(emptyState()), 'tracing on is not a default');
  });

  test('recordHash covers the previous hash, term, idx, event and origin', () => {
    const body = { term: 1, idx: 1, event: { type: 'ClusterDissolved' }, origin: null };
    const base = recordHash(GENESIS_HASH, body);
    assert.match(base, /^[0-9a-f]{32}$/);
    assert.notEqual(recordHash('1'.repeat(32), body), base);
    assert.notEqual(recordHash(GENESIS_HASH, { ...body, term: 2 }), base);
    assert.notEqual(recordHash(GENESIS_HASH, { ...body, idx: 2 }), base);
    assert.notEqual(recordHash(GENESIS_HASH, { ...body, event: { type: 'TermStarted' } }), base);
    assert.notEqual(recordHash(GENESIS_HASH, { ...body, origin: { commandId: 'x' } }), base);
  });
});
