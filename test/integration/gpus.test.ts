import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { StatusView } from '../../src/api/control/control.js';
import type { ResourcesView } from '../../src/cluster/telemetry.js';
import { eventually, shoal } from '../support/cli.js';
import { api } from '../support/control-api.js';
import { startTestNode } from '../support/node-process.js';

/**
 * A real node whose GPU detection is replaced by SHOAL_TEST_GPUS (CONTRIBUTING.md, "Testing without a
 * GPU"): the injected device travels in its resources (`/state`), `/metrics` and `shoal status`, while
 * what it advertises still follows what really loads here (node-llama-cpp's CUDA build does not load on
 * a machine without CUDA, so no `llama_cpp-cuda`).
 */

const GPU = { name: 'Test GPU 24G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 25769803776, vramFreeBytes: 24696061952 };

async function selfResources(node: { url: string }): Promise<ResourcesView | undefined> {
  const { body } = await api<StatusView>(node, 'GET', '/state');
  return body.resources[body.nodeId] as ResourcesView | undefined;
}

describe('GPUs injected with SHOAL_TEST_GPUS', () => {
  test('show in /state, /metrics and shoal status; llama_cpp-cuda is advertised only where it loads', async () => {
    await using node = await startTestNode({ env: { SHOAL_TEST_GPUS: JSON.stringify([GPU]) } });
    const resources = await eventually('the node reports its resources', 30_000, () => selfResources(node));
    assert.deepEqual(resources.gpus, [{ ...GPU, index: 0, unifiedMemory: false, utilizationPct: null, temperatureC: null, powerW: null }]);
    assert.ok(resources.backends.includes('llama_cpp-cpu'), resources.backends.join(', '));
    // This machine has no CUDA: its CUDA build cannot load, so it is not advertised (placement would put work there).
    const { getLlamaGpuTypes } = await import('node-llama-cpp');
    const cudaLoads = (await getLlamaGpuTypes('supported')).includes('cuda');
    assert.equal(resources.backends.includes('llama_cpp-cuda'), cudaLoads, `advertised ${resources.backends.join(', ')}`);

    const metrics = await (await fetch(`${node.url}/metrics`)).text();
    assert.match(metrics, /^shoal_gpu_vram_total_bytes\{node_id="[^"]+",node="[^"]+",gpu="0",name="Test GPU 24G",compute="cuda"\} 25769803776$/m);
    assert.match(metrics, /^shoal_gpu_vram_free_bytes\{[^}]*gpu="0"[^}]*\} 24696061952$/m);
    assert.doesNotMatch(metrics, /^shoal_gpu_utilization_percent\{/m, 'a figure not reported has no sample');
    // The sampler's GPU figure comes from the same readings (the dashboard's metrics charts).
    await eventually('the GPU in the sampled gauges', 15_000, async () => (/^shoal_node_gpu_memory_total_bytes 25769803776$/m.test(await (await fetch(`${node.url}/metrics`)).text()) ? true : undefined));

    const status = await shoal(node, 'status');
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^GPUs:\n {2}\S+ +Test GPU 24G \(cuda\): 23\.0 GiB free of 24\.0 GiB$/m);
  });

  test('a malformed value stops the start with one line that names the field', async () => {
    const node = await startTestNode({ waitReady: false, env: { SHOAL_TEST_GPUS: '[{"name":"Test GPU","vendor":"nvidia","compute":"cuda","vramFreeBytes":1}]' } });
    const exit = await node.exited;
    await node.stop();
    assert.equal(exit.code, 1, node.output());
    assert.match(node.output(), /SHOAL_TEST_GPUS is malformed at \[0\]\.vramTotalBytes/);
  });

  test('--backends replaces the detected tags on the node itself', async () => {
    await using node = await startTestNode({ args: ['--backends', 'llama_cpp-cpu,rpc-cpu'] });
    const resources = await eventually('the node reports its resources', 30_000, () => selfResources(node));
    assert.deepEqual(resources.backends, ['llama_cpp-cpu', 'rpc-cpu']);
    const refused = await startTestNode({ waitReady: false, args: ['--backends', 'llama_cpp-cpu,gpu-fast'] });
    const exit = await refused.exited;
    await refused.stop();
    assert.equal(exit.code, 2, refused.output());
    assert.match(refused.output(), /'gpu-fast' is not a backend tag/);
  });
});
