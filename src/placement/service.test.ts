import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { cardsDir } from '../models/cards/catalog.js';
import { TINY_MODEL_SPEC, TINY_VISION_MODEL_ID } from '../models/generate/builtin.js';
import { generateRandomModel } from '../models/generate/random-model.js';
import { newInstanceId } from '../common/ids.js';
import { InstanceSpec } from '../master/state/instances.js';
import { appleNode, card, cudaNode, factsA, GiB, MIXED_TEST_BACKENDS, node } from './fixtures.test-support.js';
import { planPlacement, type Plan, type PlanInput, type PlanOptions } from './planner.js';
import { PlacementService, planFromSpec, specFromPlan, type PlacementServiceOptions } from './service.js';

function planOf(input: PlanInput, options: PlanOptions): Plan {
  const result = planPlacement(input, { contextTokens: 4096, parallel: 1, ...options });
  assert.ok(result.ok, result.ok ? '' : result.error.message);
  return result.plan;
}

test('the instance record carries what the engine needs per GPU: -ngl, devices and their tensor split', () => {
  const c = card();
  const plan = planOf({ card: c, facts: factsA(), nodes: [cudaNode(0, 8 * GiB, [12 * GiB, 12 * GiB])] }, {});
  const spec = InstanceSpec.parse(specFromPlan(plan, c, newInstanceId(), 0));
  const [p] = spec.placements;
  assert.equal(p!.gpuLayers, 33);
  assert.deepEqual(p!.devices?.map((d) => [d.index, d.layerCount, d.tensorSplit]), [
    [0, 16, 16],
    [1, 16, 17],
  ]);
  assert.equal(p!.devices?.[1]!.estimatedBytes, Math.ceil(plan.placements[0]!.devices[1]!.bytes));
  // The worker's memory guard checks RAM: the host side only on a discrete GPU.
  assert.equal(p!.estimatedBytes, Math.ceil(plan.placements[0]!.ramBytes));
  assert.ok(p!.estimatedBytes < GiB);
  assert.equal(spec.allowSpill, undefined);
  // Rebuilt for a re-placement, the layout and the knob come back.
  const again = planFromSpec(spec, factsA());
  assert.equal(again.placements[0]!.gpuLayers, 33);
  assert.deepEqual(again.placements[0]!.devices.map((d) => d.tensorSplit), [16, 17]);
  assert.equal(again.allowSpill, false);
});

test('a CPU part records no GPU fields; a spilled one records allowSpill; unified memory counts the device in RAM', () => {
  const c = card();
  const cpu = InstanceSpec.parse(specFromPlan(planOf({ card: c, facts: factsA(), nodes: [node(0, 16 * GiB)] }, {}), c, newInstanceId(), 0));
  assert.equal(cpu.placements[0]!.gpuLayers, undefined);
  assert.equal(cpu.placements[0]!.devices, undefined);

  const spilled = planOf({ card: c, facts: factsA(), nodes: [cudaNode(0, 16 * GiB, [4 * GiB])] }, { allowSpill: true });
  const spec = InstanceSpec.parse(specFromPlan(spilled, c, newInstanceId(), 0));
  assert.equal(spec.allowSpill, true);
  assert.equal(spec.placements[0]!.gpuLayers, 27);
  assert.equal(planFromSpec(spec, factsA()).placements[0]!.spilledLayers, 5);

  const mixed = card({ compatible_backends: MIXED_TEST_BACKENDS });
  const apple = planOf({ card: mixed, facts: factsA(), nodes: [appleNode(0, 16 * GiB, 12 * GiB)] }, {});
  const placed = specFromPlan(apple, mixed, newInstanceId(), 0).placements[0]!;
  assert.equal(placed.estimatedBytes, Math.ceil(apple.placements[0]!.estimate.totalBytes + apple.placements[0]!.devices[0]!.bytes));
});

/** A file card in `dir`'s catalog; `extra` is appended TOML. */
function cardToml(id: string, path: string, extra = ''): string {
  return `id = "${id}"\nname = "${id}"\ntasks = ["chat"]\ncompatible_backends = ["llama_server-cpu", "llama_cpp-cpu"]\n[source]\nkind = "file"\npath = "${path}"\n${extra}`;
}

test("a speculative card's facts carry its draft's when the draft's file is here, and none when it is not", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-draft-facts-'));
  try {
    const gguf = join(dir, 'tiny.gguf');
    await generateRandomModel(TINY_MODEL_SPEC, gguf);
    await mkdir(cardsDir(dir), { recursive: true });
    const speculative = (draft: string): string => `[runtime.speculative]\ndraft = "${draft}"\n`;
    await writeFile(join(cardsDir(dir), 'target.toml'), cardToml('test/target', gguf, speculative('test/draft')));
    // The draft's own card names the target as its draft: only the served card's draft is read.
    await writeFile(join(cardsDir(dir), 'draft.toml'), cardToml('test/draft', gguf, speculative('test/target')));
    await writeFile(join(cardsDir(dir), 'orphan.toml'), cardToml('test/orphan', gguf, speculative('test/missing')));
    await writeFile(join(cardsDir(dir), 'missing.toml'), cardToml('test/missing', join(dir, 'not-here.gguf')));
    // modelFacts reads only the catalog and this node's files.
    const service = new PlacementService({ dataDir: dir, downloadedPath: async () => null, log: pino({ level: 'silent' }) } as unknown as PlacementServiceOptions);

    const target = await service.modelFacts('test/target');
    assert.equal(target.draft?.blockCount, target.facts.blockCount);
    const draft = await service.modelFacts('test/draft');
    assert.ok(draft.draft !== undefined, 'its own draft is read when it is the card served');
    const orphan = await service.modelFacts('test/orphan');
    assert.equal(orphan.draft, undefined, 'a draft whose file is not on this node has no facts');

    // The planner then counts it, or says it did not.
    const nodes = [node(0, 2 * GiB, { backends: ['llama_server-cpu'] })];
    const counted = planOf({ card: target.card, facts: target.facts, nodes, draft: target.draft }, {});
    assert.ok(counted.placements[0]!.estimate.draftBytes > 0);
    const uncounted = planOf({ card: orphan.card, facts: orphan.facts, nodes, draft: orphan.draft }, {});
    assert.equal(uncounted.placements[0]!.estimate.draftBytes, 0);
    assert.ok(uncounted.warnings.some((w) => w.includes('test/missing') && w.includes('not counted')), uncounted.warnings.join('\n'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a vision card's facts carry its projector's bytes when the file is here, and none when it is not", async () => {
  const dir = await mkdtemp(join(tmpdir(), 'shoal-projector-facts-'));
  try {
    const gguf = join(dir, 'tiny.gguf');
    await generateRandomModel(TINY_MODEL_SPEC, gguf);
    await mkdir(cardsDir(dir), { recursive: true });
    const vision = (projector: string): string =>
      `id = "test/vl"\nname = "vl"\ntasks = ["chat"]\ncompatible_backends = ["llama_server-cpu"]\n[source]\nkind = "file"\npath = "${gguf}"\n[capabilities]\nvision = true\n[projector]\nkind = "file"\npath = "${projector}"\n`;
    await writeFile(join(cardsDir(dir), 'vl.toml'), vision(join(dir, 'not-here.gguf')));
    const service = new PlacementService({ dataDir: dir, downloadedPath: async () => null, log: pino({ level: 'silent' }) } as unknown as PlacementServiceOptions);
    assert.equal((await service.modelFacts('test/vl')).projectorBytes, undefined, 'a projector not on this node has no bytes to count');
    // The built-in vision model's projector is generated beside its model and counted at its size.
    const builtin = await service.modelFacts(TINY_VISION_MODEL_ID);
    const projectorFile = (await readdir(join(dir, 'models', 'builtin'))).find((f) => f.includes('mmproj'));
    assert.ok(projectorFile, 'the projector was generated');
    assert.equal(builtin.projectorBytes, (await stat(join(dir, 'models', 'builtin', projectorFile))).size);
    await writeFile(join(cardsDir(dir), 'vl.toml'), vision(join(dir, 'models', 'builtin', projectorFile)));
    assert.equal((await service.modelFacts('test/vl')).projectorBytes, builtin.projectorBytes);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
