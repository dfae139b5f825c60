import { generateTask } from '../../test/support/tasks.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { AsyncQueue } from '../common/async-queue.js';
import { ShoalError } from '../common/errors.js';
import type { InstanceId, ModelId } from '../common/ids.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { InstanceRunner, RunnerState, RunnerStatus } from './runner-contract.js';
import { Worker } from './worker.js';

const log = pino({ level: 'silent' });

const GENERATE = generateTask();

const END: TaskEvent = { type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens: 1, completionTokens: 1 } };

/** An engine whose streams the test writes and whose readiness it decides. */
class ScriptedEngine implements InstanceRunner {
  state: RunnerState = 'starting';
  readonly streams: AsyncQueue<TaskEvent>[] = [];
  readonly kills: string[] = [];
  private readonly waiters: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];

  constructor(readonly pid: number) {}

  becomeReady(): void {
    this.state = 'ready';
    for (const waiter of this.waiters.splice(0)) waiter.resolve();
  }

  failToLoad(): void {
    this.state = 'failed';
    for (const waiter of this.waiters.splice(0)) waiter.reject(new ShoalError('MODEL_FAILED', 'the model did not load'));
  }

  status(): RunnerStatus {
    const inFlight = this.streams.filter((s) => !s.ended).length;
    return { state: this.state, reason: null, pid: this.pid, restarts: 0, inFlight, queued: 0, contextSize: 512, sequences: 1, gpu: false, model: null };
  }

  whenReady(signal?: AbortSignal): Promise<void> {
    if (this.state === 'ready') return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      signal?.addEventListener('abort', () => reject(new ShoalError('CANCELLED', 'cancelled')), { once: true });
    });
  }

  run(_task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    if (this.state === 'stopped') throw new ShoalError('RUNNER_STOPPED', 'the engine was stopped');
    const stream = new AsyncQueue<TaskEvent>();
    signal.addEventListener('abort', () => stream.fail(new ShoalError('CANCELLED', 'cancelled')), { once: true });
    this.streams.push(stream);
    return stream;
  }

  kill(reason: string): void {
    this.kills.push(reason);
    for (const stream of this.streams) if (!stream.ended) stream.fail(new ShoalError('RUNNER_CRASHED', 'killed'));
  }

  async stop(): Promise<void> {
    this.state = 'stopped';
    for (const stream of this.streams) if (!stream.ended) stream.fail(new ShoalError('RUNNER_STOPPED', 'stopped'));
  }
}

async function drain(stream: AsyncIterable<TaskEvent>): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

const tick = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function held(stallTimeoutMs = 60_000): { worker: Worker; old: ScriptedEngine; instanceId: InstanceId } {
  const worker = new Worker({ log, threads: 1, gpu: false, contextSize: 512, sequences: 1, stallTimeoutMs });
  const old = new ScriptedEngine(1001);
  old.becomeReady();
  const instanceId = 'inst-h' as InstanceId;
  worker.attach({ instanceId, modelId: 'm' as ModelId, role: 'full', backend: 'llama_cpp-cpu', capabilities: ['chat'], placedAt: 0, local: true, runner: old });
  return { worker, old, instanceId };
}

test('a handover routes new requests to the new engine at once and stops the old one only after its open requests end', async () => {
  const { worker, old, instanceId } = held();
  const runner = worker.get(instanceId)!.runner;
  const before = drain(runner.run!(GENERATE, new AbortController().signal));
  const next = new ScriptedEngine(1002);
  const moving = worker.handOver(instanceId, next, 'llama_server-cpu');
  await tick();
  assert.equal(worker.status()[0]?.backend, 'llama_cpp-cpu', 'the old engine serves while the new one loads');
  next.becomeReady();
  await tick();
  assert.equal(worker.get(instanceId)?.runner, runner, 'the instance keeps its one runner');
  assert.equal(worker.status().length, 1);
  assert.equal(worker.status()[0]?.backend, 'llama_server-cpu');
  const after = drain(runner.run!(GENERATE, new AbortController().signal));
  assert.equal(next.streams.length, 1, 'the request after the swap went to the new engine');
  assert.equal(old.streams.length, 1);
  assert.equal(worker.status()[0]?.inFlight, 2, 'the load of both engines counts');
  assert.equal(old.state, 'ready', 'the old engine is not stopped while it holds a request');

  old.streams[0]!.push(END);
  old.streams[0]!.end();
  assert.deepEqual(await before, [END], 'the request on the old engine finishes there');
  assert.deepEqual(await moving, { outcome: 'moved', instanceId, from: 'llama_cpp-cpu', to: 'llama_server-cpu' });
  assert.equal(old.state, 'stopped');
  next.streams[0]!.push(END);
  next.streams[0]!.end();
  assert.deepEqual(await after, [END]);
  await worker.stop();
  assert.equal(next.state, 'stopped');
});

test('a stall on the draining engine kills that engine, not the new one', async () => {
  const { worker, old, instanceId } = held(40);
  const runner = worker.get(instanceId)!.runner;
  const stalled = drain(runner.run!(GENERATE, new AbortController().signal));
  old.streams[0]!.push({ type: 'start', promptTokens: 0 });
  const next = new ScriptedEngine(1002);
  next.becomeReady();
  const moving = worker.handOver(instanceId, next, 'llama_server-cpu');
  await assert.rejects(stalled, (e: unknown) => e instanceof ShoalError && e.code === 'RUNNER_STALLED');
  assert.equal(old.kills.length, 1);
  assert.deepEqual(next.kills, []);
  assert.equal((await moving).outcome, 'moved');
  await worker.stop();
});

test('a new engine that fails to load is stopped and the old one keeps serving', async () => {
  const { worker, old, instanceId } = held();
  const next = new ScriptedEngine(1002);
  const moving = worker.handOver(instanceId, next, 'llama_server-cpu');
  next.failToLoad();
  const outcome = await moving;
  assert.equal(outcome.outcome, 'kept');
  assert.ok(outcome.outcome === 'kept' && outcome.code === 'MODEL_FAILED' && /did not become ready: the model did not load/.test(outcome.reason), JSON.stringify(outcome));
  assert.equal(next.state, 'stopped');
  assert.equal(worker.status()[0]?.backend, 'llama_cpp-cpu');
  const served = drain(worker.get(instanceId)!.runner.run!(GENERATE, new AbortController().signal));
  old.streams[0]!.push(END);
  old.streams[0]!.end();
  assert.deepEqual(await served, [END]);
  await worker.stop();
});

test('a second handover while one loads is refused and its engine stopped', async () => {
  const { worker, instanceId } = held();
  const first = new ScriptedEngine(1002);
  const moving = worker.handOver(instanceId, first, 'llama_server-cpu');
  const second = new ScriptedEngine(1003);
  const refused = await worker.handOver(instanceId, second, 'llama_server-cpu');
  assert.ok(refused.outcome === 'kept' && refused.code === 'UNCHANGED', JSON.stringify(refused));
  assert.equal(second.state, 'stopped');
  first.becomeReady();
  assert.equal((await moving).outcome, 'moved');
  await worker.stop();
});

test('a handover still loading when the worker stops ends as kept, and the new engine is stopped', async () => {
  const { worker, instanceId } = held();
  const next = new ScriptedEngine(1002);
  const moving = worker.handOver(instanceId, next, 'llama_server-cpu');
  await worker.stop();
  // Stopped by the time the worker's stop resolves: no engine outlives the worker.
  assert.equal(next.state, 'stopped');
  const outcome = await moving;
  assert.ok(outcome.outcome === 'kept' && outcome.code === 'CANCELLED', JSON.stringify(outcome));
});

test('detaching an instance whose new engine still loads stops that engine before the detach resolves', async () => {
  const { worker, instanceId } = held();
  const next = new ScriptedEngine(1003);
  const moving = worker.handOver(instanceId, next, 'llama_server-cpu');
  await worker.detach(instanceId);
  assert.equal(next.state, 'stopped');
  assert.equal((await moving).outcome, 'kept');
  await worker.stop();
});
