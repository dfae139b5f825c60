import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StatusView } from '../api/control/control.js';
import { gpuLines } from './gpu-lines.js';

const GIB = 1024 ** 3;
const gpu = (index: number, extra: Record<string, unknown> = {}) => ({
  index,
  name: 'Test GPU 12G',
  vendor: 'nvidia',
  compute: 'cuda',
  vramTotalBytes: 12 * GIB,
  vramFreeBytes: 11 * GIB,
  unifiedMemory: false,
  utilizationPct: null,
  temperatureC: null,
  powerW: null,
  ...extra,
});

test('a GPU line per node: its devices with the figures it reports, none, or not reported yet', () => {
  const status = {
    nodeId: 'a',
    members: [{ nodeId: 'a' }, { nodeId: 'b' }, { nodeId: 'c' }],
    resources: { a: { gpus: [gpu(0, { utilizationPct: 37.4, temperatureC: 61, powerW: 120.6 }), gpu(1)] }, b: { gpus: [] } },
  } as unknown as Pick<StatusView, 'nodeId' | 'members' | 'resources'>;
  const names: Record<string, string> = { a: 'alpha', b: 'beta', c: 'gamma-box' };
  assert.deepEqual(gpuLines(status, (id) => names[id]!), [
    'GPUs:',
    '  alpha      Test GPU 12G (cuda): 11.0 GiB free of 12.0 GiB, 37% busy, 61 °C, 121 W',
    '             Test GPU 12G (cuda): 11.0 GiB free of 12.0 GiB',
    '  beta       none',
    '  gamma-box  not reported',
  ]);
  const mac = { nodeId: 'm', members: [], resources: { m: { gpus: [gpu(0, { name: 'Apple M2', vendor: 'apple', compute: 'metal', unifiedMemory: true })] } } } as unknown as StatusView;
  assert.match(gpuLines(mac, () => 'mac')[1]!, /Apple M2 \(metal\): 11\.0 GiB free of 12\.0 GiB \(unified memory\)$/);
});
