import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InstanceView, StatusView } from '../api/control/control.js';
import { formatPs, psRows } from './ps.js';

const member = (nodeId: string, name: string, nickname: string | null = null): StatusView['members'][number] => ({
  nodeId,
  name,
  nickname,
  fingerprint: 'AAAA-BBBB',
  isMaster: false,
  isSelf: false,
  hostPreferred: false,
  health: { level: 'ok', reasons: [] },
});

// Only the fields ps reads: the rest of the view grows with other features.
const pooled: Pick<InstanceView, 'instanceId' | 'modelId' | 'contextTokens' | 'parallel' | 'placements' | 'runners'> = {
  instanceId: 'inst-1',
  modelId: 'acme/big:Q4_K_M',
  contextTokens: 8192,
  parallel: 4,
  placements: [
    { nodeId: 'id-a', role: 'driver', backend: 'llama_server-cpu', layerCount: 20, tensorSplit: 1, estimatedBytes: 3 * 2 ** 30 },
    { nodeId: 'id-b', role: 'donor', backend: 'rpc-cpu', layerCount: 12, tensorSplit: 0.6, estimatedBytes: 2 * 2 ** 30 },
  ],
  runners: [
    { nodeId: 'id-a', role: 'driver', state: 'ready', reason: null, inFlight: 2, queued: 1 },
    { nodeId: 'id-b', role: 'donor', state: 'starting', reason: 'loading', inFlight: 0, queued: 0 },
  ],
};

function status(): StatusView {
  return {
    nodeId: 'id-a',
    name: 'alpha',
    members: [member('id-a', 'alpha'), member('id-b', 'beta', 'gpu-box')],
    discovered: [],
    instances: [pooled],
    models: [
      { instanceId: 'inst-0', modelId: 'shoal/tiny', role: 'full', backend: 'llama_server-cpu', local: true, state: 'ready', inFlight: 0, queued: 0, contextSize: 4096, sequences: 8, model: { sizeBytes: 5 * 2 ** 20 } },
      // The driver's own runner: already shown through the instance, not again as a local model.
      { instanceId: 'inst-1', modelId: 'acme/big:Q4_K_M', role: 'driver', backend: 'llama_server-cpu', local: false, state: 'ready', inFlight: 2, queued: 1, contextSize: 8192, sequences: 4, model: null },
    ],
  } as unknown as StatusView;
}

test('ps lists the default model and every part of every instance, by node name and nickname', () => {
  const rows = psRows(status());
  assert.deepEqual(
    rows.map((r) => [r.model, r.instance, r.node, r.role, r.memoryBytes, r.inFlight, r.slots, r.contextTokens, r.state]),
    [
      ['shoal/tiny', 'inst-0 (default model)', 'alpha', 'full', 5 * 2 ** 20, 0, 8, 4096, 'ready'],
      ['acme/big:Q4_K_M', 'inst-1', 'alpha', 'driver', 3 * 2 ** 30, 2, 4, 8192, 'ready'],
      ['acme/big:Q4_K_M', 'inst-1', 'gpu-box', 'donor', 2 * 2 ** 30, null, null, 8192, 'starting (loading)'],
    ],
  );
});

test('formatPs prints an aligned table with readable sizes and slot use', () => {
  const lines = formatPs(psRows(status())).split('\n');
  assert.match(lines[0]!, /^MODEL +INSTANCE +NODE +ROLE +BACKEND +MEMORY +SLOTS +CONTEXT +STATE$/);
  assert.match(lines[1]!, /^shoal\/tiny +inst-0 \(default model\) +alpha +full +llama_server-cpu +5\.00 MiB +0\/8 +4096 +ready$/);
  assert.match(lines[2]!, /^acme\/big:Q4_K_M +inst-1 +alpha +driver +llama_server-cpu +3\.00 GiB +2\/4 \+1 +8192 +ready$/);
  assert.match(lines[3]!, / gpu-box +donor +rpc-cpu +2\.00 GiB +- +8192 +starting \(loading\)$/);
  const column = lines[0]!.indexOf('MEMORY');
  for (const line of lines.slice(1)) assert.match(line.slice(column), /^\d/);
});

test('formatPs says how to start something when nothing runs', () => {
  assert.match(formatPs([]), /shoal launch <model>/);
});
