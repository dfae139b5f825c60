import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { InstanceId, ModelId } from '../common/ids.js';
import type { InstanceRunner } from './runner-contract.js';
import { servedByLlamaServer, type NodeEngines } from './engine-factory.js';

type LlamaServerSpec = Parameters<NodeEngines['llamaServer']>[0];

/** Engines that record the spec each runner is made from, for the compute given. */
function recordingEngines(compute: NodeEngines['compute']): { engines: Pick<NodeEngines, 'compute' | 'llamaServer'>; specs: LlamaServerSpec[] } {
  const specs: LlamaServerSpec[] = [];
  return {
    specs,
    engines: {
      compute,
      llamaServer: (spec) => {
        specs.push(spec);
        return {} as InstanceRunner;
      },
    },
  };
}

const SPEC = {
  instanceId: 'i-1' as InstanceId,
  modelId: 'm' as ModelId,
  modelPath: '/m.gguf',
  capabilities: [],
  contextSize: 2048,
  sequences: 2,
  onChange: () => undefined,
};

test('the default model runs on the GPU when the engines were built for one and such a device is here', () => {
  const { engines, specs } = recordingEngines('cuda');
  const served = servedByLlamaServer(engines, [{ compute: 'cuda' }]);
  assert.equal(served.backend, 'llama_server-cuda');
  served.runner(SPEC);
  assert.equal(specs[0]?.gpuLayers, 999);
  assert.equal(specs[0]?.contextTokens, 2048);
  assert.equal(specs[0]?.parallel, 2);
});

test('the default model stays on the CPU with CPU engines, or without a device of the engines\' compute', () => {
  for (const [compute, detected] of [
    ['cpu', [{ compute: 'cuda' as const }]],
    ['cuda', []],
    ['cuda', [{ compute: 'vulkan' as const }]],
  ] as const) {
    const { engines, specs } = recordingEngines(compute);
    const served = servedByLlamaServer(engines, detected);
    assert.equal(served.backend, 'llama_server-cpu', `${compute} with ${JSON.stringify(detected)}`);
    served.runner(SPEC);
    assert.equal(specs[0]?.gpuLayers, undefined);
  }
});
