import assert from 'node:assert/strict';
import { test } from 'node:test';
import { enginesSummary } from './engines.js';

const view = { percent: null, message: 'm', remediation: null, source: null, compute: 'cpu' as const };

test('engine provisioning in words: progress while it runs, no card for engines cached at the start', () => {
  assert.deepEqual(enginesSummary({ ...view, phase: 'building', percent: 42 }), { badge: 'Building', tone: 'warn', percent: 42, show: true });
  assert.equal(enginesSummary({ ...view, phase: 'downloading', percent: null }).percent, null);
  assert.equal(enginesSummary({ ...view, phase: 'verifying', percent: 100 }).percent, null);
  assert.equal(enginesSummary({ ...view, phase: 'cached' }).show, false);
  assert.equal(enginesSummary({ ...view, phase: 'unavailable' }).tone, 'bad');
  assert.equal(enginesSummary({ ...view, phase: 'ready', source: 'release' }).show, true);
});
