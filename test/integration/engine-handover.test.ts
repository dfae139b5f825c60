// Moving the default model, and cluster parts placed on the in-process engine, onto llama-server once
// the node's engines are ready (issue #14): a stream of
// concurrent requests runs through the worker while the instance moves from the node-llama-cpp runner
// child to a managed llama-server, on a generated random-weight model. Every request must end with its
// full output; the instance must stay listed throughout; the old engine's process must be gone after.
// A new engine that cannot load leaves the old one serving.

import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { pino } from 'pino';
import { findEngine } from '../../src/doctor/engines.js';
import { TINY_MODEL_ID, TINY_MODEL_SPEC } from '../../src/models/generate/builtin.js';
import { BUILTIN_CARDS } from '../../src/models/cards/catalog.js';
import { generateRandomModel } from '../../src/models/generate/random-model.js';
import { ModelId, type InstanceId } from '../../src/common/ids.js';
import { errorMessage } from '../../src/common/errors.js';
import { createEngineFactory, moveDefaultModel } from '../../src/worker/engine-factory.js';
import { LlamaServerRunner } from '../../src/worker/engines/llama-server.js';
import { Worker } from '../../src/worker/worker.js';
import { InstanceHost } from '../../src/worker/instance-host.js';
import { apply, applyRecord } from '../../src/master/state/apply.js';
import { emptyState, type ClusterState } from '../../src/master/state/state.js';
import { clusterLog, instanceSpec, nodeId } from '../../src/master/state/fixtures.test-support.js';
import type { PlacementService } from '../../src/placement/service.js';
import type { InferenceTask, TaskEvent } from '../../src/wire/task.js';
import { processAlive } from '../support/wait.js';
import { generateTask } from '../support/tasks.js';

const MAX_TOKENS = 48;
const CONCURRENT = 4;

const binaryPath = await findEngine('llama-server');
const skip = binaryPath === null ? 'llama-server is not built: run `shoal doctor --fix`' : false;
const dir = await mkdtemp(join(tmpdir(), 'shoal-engine-handover-'));
const modelPath = join(dir, 'tiny.gguf');
if (binaryPath !== null) await generateRandomModel(TINY_MODEL_SPEC, modelPath);
const log = pino({ level: 'silent' });

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function task(): InferenceTask {
  return generateTask({ model: TINY_MODEL_ID, prompt: { kind: 'text', text: 'Once upon a time' }, sampling: { maxTokens: MAX_TOKENS, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 } });
}


async function placedWorker(): Promise<{ worker: Worker; instanceId: InstanceId }> {
  const worker = new Worker({ log, threads: 1, gpu: false, contextSize: 512, sequences: 2 });
  const instance = worker.place(ModelId.parse(TINY_MODEL_ID), modelPath, ['chat', 'completion', 'embeddings', 'tools'], null);
  await instance.runner.whenReady();
  return { worker, instanceId: instance.instanceId };
}

interface Outcome {
  /** The instance's backend when the request was admitted, and when it ended. */
  admittedOn: string;
  endedOn: string;
  events: TaskEvent[];
  error: string | null;
}

/** Sends one request the way the dispatcher does: the instance's runner as the worker holds it now. */
async function request(worker: Worker, instanceId: InstanceId): Promise<Outcome> {
  const instance = worker.get(instanceId);
  assert.ok(instance?.runner.run, 'the instance is held and serves requests');
  const admittedOn = instance.backend;
  const events: TaskEvent[] = [];
  try {
    for await (const event of instance.runner.run(task(), new AbortController().signal)) events.push(event);
    return { admittedOn, endedOn: worker.get(instanceId)?.backend ?? 'gone', events, error: null };
  } catch (error) {
    return { admittedOn, endedOn: worker.get(instanceId)?.backend ?? 'gone', events, error: errorMessage(error) };
  }
}

function assertComplete(outcome: Outcome): void {
  assert.equal(outcome.error, null, `a request failed: ${outcome.error}`);
  const end = outcome.events.at(-1);
  assert.equal(end?.type, 'end', JSON.stringify(outcome.events.slice(-2)));
  assert.equal(end.finishReason, 'length');
  assert.equal(end.usage.completionTokens, MAX_TOKENS, 'the full output');
}

/** A host for node 0 of `state`, started before its engines were ready, with the placement calls `placement` gives. */
function hostBeforeEngines(worker: Worker, state: () => ClusterState, placement: Partial<Record<keyof PlacementService, unknown>>): InstanceHost {
  return new InstanceHost({
    selfId: nodeId(0),
    log,
    worker,
    placement: { replace: async () => assert.fail('nothing is re-placed'), ...placement } as unknown as PlacementService,
    state,
    isMaster: () => false,
    connected: () => true,
    runnersOf: () => null,
    offerBytes: async () => 1e12,
    modelPath: async () => modelPath,
    engines: null,
    tunnels: { open: async () => assert.fail('no tunnels here') },
  });
}

/** Waits until the worker's one part is ready. */
async function partReady(worker: Worker): Promise<void> {
  for (let tries = 0; worker.status()[0]?.state !== 'ready'; tries++) {
    assert.ok(tries < 600, `the part did not start: ${JSON.stringify(worker.status())}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('moving instances onto llama-server', { skip }, () => {
  test('requests running across the handover all complete, the instance stays listed, and the old engine stops', async () => {
    const engines = await createEngineFactory({ dataDir: join(dir, 'data'), threads: 1, log });
    assert.ok(engines, 'llama-server and ggml-rpc-server are built with a manifest');
    const { worker, instanceId } = await placedWorker();
    try {
      const before = worker.status();
      assert.equal(before.length, 1);
      assert.equal(before[0]?.backend, 'llama_cpp-cpu');
      const oldPid = before[0]?.pid;
      assert.ok(typeof oldPid === 'number' && processAlive(oldPid), 'the runner child runs');

      // The instance must be listed, as the one instance, at every change and between them.
      const listings: string[] = [];
      const look = (): void => {
        const status = worker.status();
        listings.push(status.length === 1 && status[0]?.instanceId === instanceId && status[0].state === 'ready' ? 'ok' : JSON.stringify(status));
      };
      const unlisten = worker.onChange(look);
      const sampler = setInterval(look, 5);

      let moving = true;
      const outcomes: Outcome[] = [];
      const streams = Array.from({ length: CONCURRENT }, async () => {
        // Each stream keeps one request open until the move is over, then sends one more.
        while (moving) outcomes.push(await request(worker, instanceId));
        outcomes.push(await request(worker, instanceId));
      });
      // Requests are open on the old engine when the move starts.
      while (worker.status()[0]!.inFlight + worker.status()[0]!.queued === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      const moved = await moveDefaultModel(worker, engines, { requested: 'auto', gpuPresent: false, detected: [] }, log);
      moving = false;
      await Promise.all(streams);
      clearInterval(sampler);
      unlisten();

      assert.deepEqual(moved, [{ outcome: 'moved', instanceId, from: 'llama_cpp-cpu', to: 'llama_server-cpu' }]);
      for (const outcome of outcomes) assertComplete(outcome);
      assert.ok(
        outcomes.some((o) => o.admittedOn === 'llama_cpp-cpu' && o.endedOn === 'llama_server-cpu'),
        'some request admitted on the old engine finished after the move (it was drained, not cut)',
      );
      assert.ok(outcomes.some((o) => o.admittedOn === 'llama_server-cpu'), 'requests after the move run on llama-server');
      assert.deepEqual(
        listings.filter((l) => l !== 'ok'),
        [],
        'the instance is listed, ready, throughout',
      );

      const after = worker.status();
      assert.equal(after.length, 1);
      assert.equal(after[0]?.instanceId, instanceId);
      assert.equal(after[0]?.backend, 'llama_server-cpu');
      assert.notEqual(after[0]?.pid, oldPid);
      assert.equal(processAlive(oldPid), false, 'the runner child has exited');
      assert.equal(after[0]?.inFlight, 0);

      const again = await moveDefaultModel(worker, engines, { requested: 'auto', gpuPresent: false, detected: [] }, log);
      assert.equal(again[0]?.outcome, 'kept', 'an instance already on llama-server stays');
    } finally {
      await worker.stop();
    }
  });

  test('a new engine that cannot load leaves the old one serving', async () => {
    const notAModel = join(dir, 'not-a-model.gguf');
    await writeFile(notAModel, 'this is not a GGUF file');
    const engines = await createEngineFactory({ dataDir: join(dir, 'data'), threads: 1, log });
    assert.ok(engines);
    const { worker, instanceId } = await placedWorker();
    try {
      assert.deepEqual(await moveDefaultModel(worker, engines, { requested: 'llama_cpp', gpuPresent: false, detected: [] }, log), [], '--engine llama_cpp keeps the runner child');
      const oldPid = worker.status()[0]?.pid;
      const running = request(worker, instanceId);
      const broken = new LlamaServerRunner({ binaryPath: binaryPath ?? '', modelPath: notAModel, dataDir: join(dir, 'data-broken'), log, threads: 1, contextTokens: 512, parallel: 2, maxCrashes: 1, initialBackoffMs: 10 });
      const outcome = await worker.handOver(instanceId, broken, 'llama_server-cpu');
      assert.equal(outcome.outcome, 'kept');
      assert.ok(outcome.outcome === 'kept' && outcome.code === 'MODEL_FAILED', JSON.stringify(outcome));
      assert.match(outcome.reason, /did not become ready/);
      assert.equal(broken.status().state, 'stopped', 'the failed engine is stopped');

      assertComplete(await running);
      const status = worker.status();
      assert.equal(status.length, 1);
      assert.equal(status[0]?.backend, 'llama_cpp-cpu');
      assert.equal(status[0]?.pid, oldPid);
      assertComplete(await request(worker, instanceId));
    } finally {
      await worker.stop();
    }
  });

  test('parts placed after the engines are recorded start on llama-server', async () => {
    const engines = await createEngineFactory({ dataDir: join(dir, 'data'), threads: 1, log });
    assert.ok(engines);
    let state: ClusterState = emptyState();
    for (const record of clusterLog(1).records) state = applyRecord(state, record);
    const spec = instanceSpec('inst-ls', [0]);
    const onServer = { ...spec, placements: spec.placements.map((p) => ({ ...p, backend: 'llama_server-cpu' })) };
    state = apply(state, { type: 'InstanceCreated', instance: onServer, replaces: null }, 50);
    const worker = new Worker({ log, threads: 1, gpu: false, contextSize: 512, sequences: 2 });
    const host = hostBeforeEngines(worker, () => state, {
      // No card on this node: the part starts without a draft (src/worker/draft.ts).
      modelFacts: async () => {
        throw new Error('no card here');
      },
    });
    try {
      await host.useEngines(engines);
      host.start();
      await partReady(worker);
      assert.equal(worker.status()[0]?.backend, 'llama_server-cpu');
      assertComplete(await request(worker, worker.status()[0]!.instanceId));
    } finally {
      await host.stop();
      await worker.stop();
    }
  });

  test('a cluster part placed on the in-process engine before the engines were ready moves onto llama-server, requests uncut, and state records it', async () => {
    const engines = await createEngineFactory({ dataDir: join(dir, 'data'), threads: 1, log });
    assert.ok(engines);
    let state: ClusterState = emptyState();
    for (const record of clusterLog(1).records) state = applyRecord(state, record);
    // instanceSpec places its parts on llama_cpp-cpu.
    state = apply(state, { type: 'InstanceCreated', instance: instanceSpec('inst-cpp', [0]), replaces: null }, 50);
    const instanceId = 'inst-cpp' as InstanceId;
    const worker = new Worker({ log, threads: 1, gpu: false, contextSize: 512, sequences: 2 });
    const moves: string[] = [];
    let compatible = ['llama_server-cpu', 'llama_cpp-cpu'];
    const host: InstanceHost = hostBeforeEngines(worker, () => state, {
      modelFacts: async () => ({ card: { ...BUILTIN_CARDS.find((c) => c.id === TINY_MODEL_ID)!, compatible_backends: compatible } }),
      // What the master does with MovePart: the PartMoved event applied to state.
      movePart: async (id: InstanceId, backend: string) => {
        moves.push(`${id} ${backend}`);
        state = apply(state, { type: 'PartMoved', instanceId: id, nodeId: nodeId(0), backend }, 51);
        host.reconcile();
      },
    });
    try {
      host.start();
      await partReady(worker);
      assert.equal(worker.status()[0]?.backend, 'llama_cpp-cpu');
      const oldPid = worker.status()[0]?.pid;

      // A card that does not list llama-server keeps its engine.
      compatible = ['llama_cpp-cpu'];
      await host.useEngines(engines);
      assert.equal(worker.status()[0]?.backend, 'llama_cpp-cpu');
      assert.deepEqual(moves, []);

      compatible = ['llama_server-cpu', 'llama_cpp-cpu'];
      let moving = true;
      const outcomes: Outcome[] = [];
      const streams = Array.from({ length: CONCURRENT }, async () => {
        while (moving) outcomes.push(await request(worker, instanceId));
        outcomes.push(await request(worker, instanceId));
      });
      while (worker.status()[0]!.inFlight + worker.status()[0]!.queued === 0) await new Promise((resolve) => setTimeout(resolve, 5));
      await host.useEngines(engines);
      moving = false;
      await Promise.all(streams);

      for (const outcome of outcomes) assertComplete(outcome);
      assert.ok(outcomes.some((o) => o.admittedOn === 'llama_cpp-cpu' && o.endedOn === 'llama_server-cpu'), 'a request admitted before the move was drained, not cut');
      assert.deepEqual(moves, ['inst-cpp llama_server-cpu']);
      assert.equal(state.instances[instanceId]?.placements[0]?.backend, 'llama_server-cpu', 'cluster state records the move');
      const after = worker.status();
      assert.equal(after.length, 1);
      assert.equal(after[0]?.backend, 'llama_server-cpu');
      assert.equal(processAlive(oldPid as number), false, 'the runner child has exited');
      // The reconcile after the recorded move keeps the part as it is: no restart.
      const pid = after[0]?.pid;
      host.reconcile();
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(worker.status()[0]?.pid, pid);
      assertComplete(await request(worker, instanceId));
    } finally {
      await host.stop();
      await worker.stop();
    }
  });
});
