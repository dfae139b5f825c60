import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { generateRandomModel } from '../../src/models/generate/random-model.js';
import { shoal } from '../support/cli.js';
import { startTestNode, type TestNode } from '../support/node-process.js';

/**
 * Placement against injected GPU readings on a real node process (tier 3, issue #15): SHOAL_TEST_GPUS
 * fills detection, the telemetry carries the devices with `--vram-budget` applied, and the dry run
 * places the model per device (layers, bytes, fit, `-ngl` and the tensor split).
 */

// The built-in tiny cards prefer the CPU (a GPU costs more than their whole decode): a card of its own here.
const MODEL = 'test/tiny-gpu';
const GiB = 2 ** 30;
const TWO_12G = [
  { name: 'Test GPU 12G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 12 * GiB, vramFreeBytes: 11 * GiB },
  { name: 'Test GPU 12G', vendor: 'nvidia', compute: 'cuda', vramTotalBytes: 12 * GiB, vramFreeBytes: 11 * GiB },
];

interface PlanBody {
  plan: {
    placements: {
      backend: string;
      gpuLayers: number | null;
      layerShare: { layerCount: number };
      devices: { index: number; layerCount: number; holdsOutput: boolean; tensorSplit: number; bytes: number; freeBytes: number; fits: boolean }[];
    }[];
  };
}

describe('placement on a node with two fake 12 GB GPUs and a VRAM budget', () => {
  let node: TestNode;
  before(async () => {
    node = await startTestNode({
      args: ['--name', 'gpu-box', '--backends', 'llama_server-cuda,rpc-cuda,llama_server-cpu,rpc-cpu,llama_cpp-cpu', '--vram-budget', '2GiB'],
      env: { SHOAL_TEST_GPUS: JSON.stringify(TWO_12G) },
    });
    const file = join(node.dataDir, 'tiny-gpu.gguf');
    await generateRandomModel({ ...TINY_MODEL_SPEC, name: MODEL }, file);
    await mkdir(join(node.dataDir, 'cards'), { recursive: true });
    await writeFile(
      join(node.dataDir, 'cards', 'tiny-gpu.toml'),
      [`id = "${MODEL}"`, 'name = "tiny on a GPU"', 'tasks = ["chat", "completion"]', 'compatible_backends = ["llama_server-cpu", "llama_server-cuda"]', '', '[source]', 'kind = "file"', `path = "${file}"`, ''].join('\n'),
    );
  });
  after(async () => {
    await node?.stop();
  });

  test('the dry run places the model per device, within the budget, with -ngl and the tensor split', async () => {
    const res = await fetch(`${node.url}/place_instance`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: MODEL, dry_run: true }) });
    const body = (await res.json()) as PlanBody;
    assert.equal(res.status, 200, JSON.stringify(body));
    const [p] = body.plan.placements;
    assert.equal(p!.backend, 'llama_server-cuda');
    // The tiny model's two layers, one per device, the output on the second (weight 1 + 1).
    assert.equal(p!.layerShare.layerCount, 2);
    assert.equal(p!.gpuLayers, 3);
    assert.deepEqual(p!.devices.map((d) => [d.index, d.layerCount, d.holdsOutput, d.tensorSplit, d.fits]), [
      [0, 1, false, 1, true],
      [1, 1, true, 2, true],
    ]);
    // --vram-budget caps each device below its 11 GiB free.
    assert.deepEqual(p!.devices.map((d) => d.freeBytes), [2 * GiB, 2 * GiB]);

    const cli = await shoal(node, 'models', 'launch', MODEL, '--dry-run');
    assert.equal(cli.code, 0, cli.stderr);
    assert.match(cli.stdout, /-ngl 3/);
    assert.match(cli.stdout, /GPU 0 Test GPU 12G: 1 layers, split weight 1, .* of 2\.00 GiB VRAM free/);
    assert.match(cli.stdout, /GPU 1 Test GPU 12G: 1 layers \+ output, split weight 2/);
  });
});
