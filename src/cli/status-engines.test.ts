import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import type { StatusView } from '../api/control/control.js';
import { enginesLine, formatStatus } from './cluster-commands.js';

const base = { percent: null, remediation: null, source: null, compute: 'cpu' } as const;

test('shoal status shows engine provisioning with its progress and what to run', () => {
  assert.equal(enginesLine({ ...base, phase: 'building', percent: 37, message: 'compiling ggml.c' }), 'building 37%: compiling ggml.c');
  assert.equal(enginesLine({ ...base, phase: 'cached', source: 'cache', message: 'llama-server and ggml-rpc-server (cpu) are in the cache' }), 'llama-server and ggml-rpc-server (cpu) are in the cache');
  assert.equal(
    enginesLine({ ...base, phase: 'unavailable', message: 'building needs cmake', remediation: 'sudo apt-get install -y cmake' }),
    'unavailable: building needs cmake\n    -> sudo apt-get install -y cmake',
  );
  const status = {
    nodeId: 'n1',
    name: 'a',
    version: '0',
    apiKeyRequired: false,
    fingerprint: 'f',
    role: 'standalone',
    members: [],
    discovered: [],
    invitations: [],
    health: { level: 'ok', reasons: [] },
    instances: [],
    models: [],
    resources: {},
    engines: { ...base, phase: 'downloading', percent: 5, message: 'downloading http://h/x.tar.gz' },
  } as unknown as StatusView;
  assert.match(formatStatus(status, 'http://127.0.0.1:52600'), /^Engines {6}downloading 5%: downloading http:\/\/h\/x\.tar\.gz$/m);
  assert.doesNotMatch(formatStatus({ ...status, engines: undefined }, 'http://127.0.0.1:52600'), /^Engines/m);
});
