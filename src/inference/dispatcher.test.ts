import { generateTask } from '../../test/support/tasks.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ShoalError, type ErrorCode } from '../common/errors.js';
import type { InstanceId, ModelId, NodeId } from '../common/ids.js';
import type { ModelCapability } from '../wire/capability.js';
import type { InstanceState } from '../master/state/instances.js';
import { emptyState, type ClusterState, type MemberState } from '../master/state/state.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import type { InstanceRunner } from '../worker/runner-contract.js';
import type { InstanceStatus, LocalInstance } from '../worker/worker.js';
import { ClusterDispatcher, type ClusterDispatcherOptions } from './dispatcher.js';

// The dispatcher over fakes of exactly what its constructor takes: a Worker-shaped object with this
// node's instances, cluster state, other nodes' runner reports, a connectivity check, a remote runner.

type RunnerReport = NonNullable<ReturnType<ClusterDispatcherOptions['runnersOf']>>['runners'][number];

const SELF = 'node-self' as NodeId;
const B = 'node-b' as NodeId;
const C = 'node-c' as NodeId;
const ALL: ModelCapability[] = ['chat', 'completion', 'embeddings', 'tools'];
const START: TaskEvent = { type: 'start', promptTokens: 1 };
const END: TaskEvent = { type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 1, completionTokens: 0 } };

function chat(model: string, over: Partial<Extract<RunnerTask, { kind: 'generate' }>> = {}): RunnerTask {
  return generateTask({ model, prompt: { kind: 'chat', messages: [{ role: 'user', content: 'hi' }] }, ...over });
}

const TOOL = { name: 'lookup', parameters: { type: 'object' } };

let conversations = 0;
/** A chat no earlier request began, so no replica holds its prefix and only load and locality decide. */
function unrelated(model: string): RunnerTask {
  conversations += 1;
  return chat(model, { prompt: { kind: 'chat', messages: [{ role: 'user', content: `conversation ${conversations}` }] } });
}

/** One of this node's instances: its status and a runner that records what it ran. */
function local(instanceId: string, modelId: string, over: Partial<InstanceStatus> = {}): { status: InstanceStatus; ran: RunnerTask[] } {
  const status: InstanceStatus = {
    instanceId: instanceId as InstanceId,
    modelId: modelId as ModelId,
    role: 'full',
    backend: 'llama_cpp-cpu',
    capabilities: ALL,
    placedAt: 1_700_000_000,
    local: true,
    state: 'ready',
    reason: null,
    pid: 1234,
    restarts: 0,
    inFlight: 0,
    queued: 0,
    contextSize: 2048,
    sequences: 4,
    gpu: false,
    model: null,
    ...over,
  };
  return { status, ran: [] };
}

function workerOf(instances: { status: InstanceStatus; ran: RunnerTask[] }[]): ClusterDispatcherOptions['worker'] {
  return {
    status: () => instances.map((i) => i.status),
    get: (instanceId) => {
      const found = instances.find((i) => i.status.instanceId === instanceId);
      if (!found) return undefined;
      const runner: InstanceRunner = {
        status: () => found.status,
        whenReady: async () => undefined,
        stop: async () => undefined,
        ...(found.status.role === 'donor'
          ? {}
          : {
              run: async function* (task: RunnerTask) {
                found.ran.push(task);
                yield START;
                yield END;
              },
            }),
      };
      const { instanceId: id, modelId, role, backend, capabilities, placedAt } = found.status;
      const instance: LocalInstance = { instanceId: id, modelId, role, backend, capabilities, placedAt, local: found.status.local, runner };
      return instance;
    },
  };
}

function report(instanceId: string, modelId: string, over: Partial<RunnerReport> = {}): RunnerReport {
  return { instanceId: instanceId as InstanceId, modelId: modelId as ModelId, role: 'full', state: 'ready', reason: null, inFlight: 0, queued: 0, ...over };
}

function member(nodeId: NodeId, status: MemberState['status'] = 'active'): MemberState {
  return {
    nodeId,
    name: nodeId as string as MemberState['name'],
    fingerprint: 'AAAA-AAAA-AAAA-AAAA' as MemberState['fingerprint'],
    addrs: [],
    nickname: null,
    admittedIdx: 1,
    termSlot: 0,
    hostPreferred: false,
    status,
  };
}

function placed(instanceId: string, modelId: string, over: Partial<InstanceState> = {}): InstanceState {
  return {
    instanceId: instanceId as InstanceId,
    modelId: modelId as ModelId,
    shape: 'single',
    placements: [{ nodeId: B, role: 'full', backend: 'llama_server-cpu', firstLayer: 0, layerCount: 4, holdsOutput: true, tensorSplit: null, estimatedBytes: 1 }],
    contextTokens: 8192,
    parallel: 2,
    kvCacheType: 'f16',
    capabilities: ['chat', 'completion'],
    exclusions: [],
    replicas: 1,
    minNodes: 1,
    refusal: { hops: 0, fellBack: false },
    predictedDecodeTokPerS: 10,
    warnings: [],
    createdAtMs: 1_700_000_123_456,
    createdIdx: 2,
    ...over,
  };
}

interface RemoteCall {
  nodeId: NodeId;
  instanceId: InstanceId;
  task: RunnerTask;
}

interface Setup {
  local?: { status: InstanceStatus; ran: RunnerTask[] }[];
  members?: MemberState[];
  instances?: InstanceState[];
  reports?: Partial<Record<NodeId, RunnerReport[]>>;
  disconnected?: NodeId[];
  remote?: ClusterDispatcherOptions['remote'];
}

function dispatcherOf(setup: Setup): { dispatcher: ClusterDispatcher; calls: RemoteCall[] } {
  const state: ClusterState = {
    ...emptyState(),
    members: Object.fromEntries([member(SELF), ...(setup.members ?? [])].map((m) => [m.nodeId, m])),
    instances: Object.fromEntries((setup.instances ?? []).map((i) => [i.instanceId, i])),
  };
  const calls: RemoteCall[] = [];
  const remote = setup.remote ?? (async function* (): AsyncGenerator<TaskEvent> {
    yield START;
    yield END;
  });
  const dispatcher = new ClusterDispatcher({
    selfId: SELF,
    worker: workerOf(setup.local ?? []),
    state: () => state,
    runnersOf: (nodeId) => {
      const runners = setup.reports?.[nodeId];
      return runners ? { runners } : null;
    },
    connected: (nodeId) => !(setup.disconnected ?? []).includes(nodeId),
    remote: (nodeId, instanceId, task, signal) => {
      calls.push({ nodeId, instanceId, task });
      return remote(nodeId, instanceId, task, signal);
    },
  });
  return { dispatcher, calls };
}

async function drain(events: AsyncIterable<TaskEvent>): Promise<TaskEvent[]> {
  const out: TaskEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

function assertCode(run: () => unknown, code: ErrorCode, message?: RegExp): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof ShoalError, `a ShoalError, not ${String(error)}`);
    assert.equal(error.code, code);
    if (message) assert.match(error.message, message);
    return true;
  });
}

test("candidates are this node's instances and the reports of active, connected members", async () => {
  const D = 'node-d' as NodeId;
  const { dispatcher, calls } = dispatcherOf({
    local: [local('l-1', 'm/local')],
    members: [member(B), member(C), member(D, 'pruned')],
    reports: {
      [SELF]: [report('stale-self', 'm/self-report')],
      [B]: [report('b-1', 'm/b')],
      [C]: [report('c-1', 'm/c')],
      [D]: [report('d-1', 'm/d')],
      // Not a member at all: never asked.
      ['node-stranger' as NodeId]: [report('s-1', 'm/stranger')],
    },
    disconnected: [C],
  });
  assert.deepEqual(dispatcher.models().map((m) => m.id), ['m/b', 'm/local']);

  assert.deepEqual(await drain(dispatcher.run(chat('m/b'), new AbortController().signal)), [START, END]);
  assert.deepEqual(calls.map((c) => [c.nodeId, c.instanceId, c.task.model]), [[B, 'b-1', 'm/b']]);
  for (const model of ['m/c', 'm/d', 'm/self-report', 'm/stranger']) assertCode(() => dispatcher.run(chat(model), new AbortController().signal), 'MODEL_NOT_FOUND');
});

test("a local instance runs in process; a remote one runs through `remote` when it is really less loaded", async () => {
  const mine = local('l-1', 'm', { inFlight: 1, queued: 1 });
  const { dispatcher, calls } = dispatcherOf({ local: [mine], members: [member(B)], reports: { [B]: [report('b-1', 'm', { inFlight: 1 })] } });
  await drain(dispatcher.run(chat('m'), new AbortController().signal));
  assert.deepEqual(calls.map((c) => c.instanceId), ['b-1'], 'load 2 here against 1 + half a hop there');
  assert.equal(mine.ran.length, 0);

  mine.status.queued = 0;
  await drain(dispatcher.run(unrelated('m'), new AbortController().signal));
  assert.equal(calls.length, 1, 'a tie stays on this node');
  assert.deepEqual(mine.ran.map((t) => t.model), ['m']);
});

test("a conversation's next turn goes back to the replica that served its last one while loads are equal", async () => {
  const bReports = [report('b-1', 'm', { inFlight: 1 })];
  const { dispatcher, calls } = dispatcherOf({ members: [member(B), member(C)], reports: { [B]: bReports, [C]: [report('c-1', 'm')] } });
  const turn1 = chat('m', { prompt: { kind: 'chat', messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hello' }] } });
  await drain(dispatcher.run(turn1, new AbortController().signal));
  assert.deepEqual(calls.map((c) => c.instanceId), ['c-1'], 'b-1 was busier');

  bReports[0]!.inFlight = 0;
  const messages = turn1.kind === 'generate' && turn1.prompt.kind === 'chat' ? turn1.prompt.messages : [];
  const turn2 = chat('m', { prompt: { kind: 'chat', messages: [...messages, { role: 'assistant', content: 'hi' }, { role: 'user', content: 'more' }] } });
  await drain(dispatcher.run(turn2, new AbortController().signal));
  // Another conversation has no holder: the tie goes to b-1 by node id.
  await drain(dispatcher.run(unrelated('m'), new AbortController().signal));
  assert.deepEqual(calls.map((c) => c.instanceId), ['c-1', 'c-1', 'b-1']);

  // Busier by one request, the holder loses to the lighter replica.
  const onB = [report('b-1', 'm', { inFlight: 1 })];
  const onC = [report('c-1', 'm')];
  const later = dispatcherOf({ members: [member(B), member(C)], reports: { [B]: onB, [C]: onC } });
  await drain(later.dispatcher.run(turn1, new AbortController().signal));
  onB[0]!.inFlight = 0;
  onC[0]!.inFlight = 1;
  await drain(later.dispatcher.run(turn2, new AbortController().signal));
  assert.deepEqual(later.calls.map((c) => c.instanceId), ['c-1', 'b-1']);
});

/**
 * A remote runner whose requests stay open after their first event until released, failed or aborted,
 * so what the dispatcher counts as open can be watched. Each request waits on the gate that was current
 * when it started.
 */
function heldRemote(): { remote: ClusterDispatcherOptions['remote']; release: () => void; fail: () => void } {
  const newGate = (): { promise: Promise<void>; resolve: () => void; reject: (error: Error) => void } => {
    let resolve!: () => void;
    let reject!: (error: Error) => void;
    const promise = new Promise<void>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    promise.catch(() => undefined); // a gate failed with no request behind it is not an unhandled rejection
    return { promise, resolve, reject };
  };
  let gate = newGate();
  const remote: ClusterDispatcherOptions['remote'] = async function* (_nodeId, _instanceId, _task, signal) {
    const mine = gate;
    yield START;
    const aborted = new Promise<never>((_resolve, reject) => signal.addEventListener('abort', () => reject(new ShoalError('CANCELLED', 'cancelled')), { once: true }));
    await Promise.race([mine.promise, aborted]);
    yield END;
  };
  const open = (): ReturnType<typeof newGate> => {
    const current = gate;
    gate = newGate();
    return current;
  };
  return { remote, release: () => open().resolve(), fail: () => open().reject(new ShoalError('INSTANCE_LOST', 'node went away')) };
}

test('requests this node has open on a remote runner count against it until they end, fail, are aborted or left', async () => {
  const held = heldRemote();
  // Two equal remote runners: with nothing open, node-b wins the tie (node and instance id order).
  const { dispatcher, calls } = dispatcherOf({
    members: [member(B), member(C)],
    reports: { [B]: [report('b-1', 'm')], [C]: [report('c-1', 'm')] },
    remote: held.remote,
  });
  const next = (): string => calls.at(-1)?.nodeId ?? 'none';
  const begin = async (signal = new AbortController().signal): Promise<{ iterator: AsyncIterator<TaskEvent>; rest: Promise<TaskEvent[]> }> => {
    const iterator = dispatcher.run(unrelated('m'), signal)[Symbol.asyncIterator]();
    assert.deepEqual(await iterator.next(), { done: false, value: START });
    const rest = (async () => {
      const out: TaskEvent[] = [];
      for (let r = await iterator.next(); !r.done; r = await iterator.next()) out.push(r.value);
      return out;
    })();
    return { iterator, rest };
  };

  // Ends normally.
  const first = await begin();
  assert.equal(next(), B);
  const second = await begin();
  assert.equal(next(), C, 'one open on node-b outweighs the tie');
  const third = await begin();
  assert.equal(next(), B, 'one open on each: the tie again');
  held.release();
  assert.deepEqual(await Promise.all([first.rest, second.rest, third.rest]), [[END], [END], [END]]);
  await begin().then((r) => (held.release(), r.rest));
  assert.equal(next(), B, 'all released');

  // Fails with a typed error.
  const failing = await begin();
  assert.equal(next(), B);
  held.fail();
  await assert.rejects(failing.rest, /node went away/);
  const afterFailure = await begin();
  assert.equal(next(), B, 'released after an error');
  held.release();
  await afterFailure.rest;

  // Aborted by the client.
  const abort = new AbortController();
  const aborted = await begin(abort.signal);
  assert.equal(next(), B);
  abort.abort();
  await assert.rejects(aborted.rest, /cancelled/);
  const afterAbort = await begin();
  assert.equal(next(), B, 'released after an abort');
  held.release();
  await afterAbort.rest;

  // Left early by the consumer (the HTTP client went away between events).
  const left = dispatcher.run(unrelated('m'), new AbortController().signal)[Symbol.asyncIterator]();
  await left.next();
  assert.equal(next(), B);
  await left.return?.();
  const afterLeaving = await begin();
  assert.equal(next(), B, 'released when the iteration is left');
  held.release();
  await afterLeaving.rest;
});

test("listings: one per model, a ready replica's facts first; capabilities and window from cluster state, else the default model's", () => {
  const notReady = local('l-1', 'org/shared', { state: 'starting', capabilities: ['chat'] });
  const ready = local('l-2', 'org/local', {
    capabilities: ['chat', 'completion'],
    contextSize: 4096,
    model: { architecture: 'qwen2', sizeBytes: 123, fileType: 'MOSTLY_Q8_0', parameterCount: 1_540_000_000, hasChatTemplate: true },
  });
  const { dispatcher } = dispatcherOf({
    local: [notReady, ready, local('l-3', 'org/donor-only', { role: 'donor' })],
    members: [member(B)],
    instances: [
      placed('b-1', 'org/shared', {
        capabilities: ['embeddings'],
        contextTokens: 512,
        // Pooled: every part counts, the GPU ones also as GPU memory.
        shape: 'pooled',
        placements: [
          { nodeId: B, role: 'full', backend: 'llama_server-cpu', firstLayer: 0, layerCount: 2, holdsOutput: false, tensorSplit: 0.5, estimatedBytes: 5 },
          { nodeId: B, role: 'full', backend: 'llama_server-cuda', firstLayer: 2, layerCount: 2, holdsOutput: true, tensorSplit: 0.5, estimatedBytes: 7 },
        ],
      }),
    ],
    reports: { [B]: [report('b-1', 'org/shared'), report('b-2', 'org/default-of-b'), report('b-3', 'org/donor-only', { role: 'donor' })] },
  });
  assert.deepEqual(dispatcher.models(), [
    {
      id: 'org/default-of-b',
      created: dispatcher.models()[0]!.created,
      ready: true,
      capabilities: ALL,
      contextSize: null,
      details: { family: 'llama', parameterSize: null, quantization: null, sizeBytes: null },
      memory: null,
    },
    {
      id: 'org/local',
      created: 1_700_000_000,
      ready: true,
      capabilities: ['chat', 'completion'],
      contextSize: 4096,
      details: { family: 'qwen2', parameterSize: '1.5B', quantization: 'MOSTLY_Q8_0', sizeBytes: 123 },
      memory: null,
    },
    {
      id: 'org/shared',
      created: 1_700_000_123,
      ready: true,
      capabilities: ['embeddings'],
      contextSize: 512,
      details: { family: 'llama', parameterSize: null, quantization: null, sizeBytes: null },
      memory: { bytes: 12, gpuBytes: 7 },
    },
  ]);
});

test('typed errors: not placed, loading, failed, and a capability the serving instance lacks', () => {
  const { dispatcher } = dispatcherOf({
    local: [local('l-1', 'm/loading', { state: 'starting', reason: 'loading the model' }), local('l-2', 'm/chat-only', { capabilities: ['chat'] })],
    members: [member(B)],
    instances: [
      placed('b-2', 'm/remote-chat', { capabilities: ['chat'] }),
      // Placed on B, whose telemetry has no runner of it: B is down (or starting it).
      placed('b-9', 'm/node-down'),
      placed('b-8', 'm/awaiting', { awaitingApproval: [{ nodeId: B, bytes: 10, source: 'hub' }] }),
    ],
    reports: {
      [B]: [
        report('b-1', 'm/failed', { state: 'failed', reason: 'circuit breaker open' }),
        report('b-3', 'm/failed', { state: 'stopped' }),
        report('b-2', 'm/remote-chat'),
        report('b-4', 'm/donor', { role: 'donor' }),
      ],
    },
  });
  const signal = new AbortController().signal;
  assertCode(() => dispatcher.run(chat('m/nope'), signal), 'MODEL_NOT_FOUND', /'m\/nope' is not placed on this cluster; placed models: m\/chat-only, m\/failed, m\/loading, m\/remote-chat: place it/);
  assert.throws(() => dispatcher.run(chat('m/nope'), signal), { param: 'model' });
  assertCode(() => dispatcher.run(chat('m/donor'), signal), 'MODEL_NOT_FOUND');
  assertCode(() => dispatcher.run(chat('m/node-down'), signal), 'MODEL_LOADING', /placed, but none of its runners is heard from yet/);
  assertCode(() => dispatcher.run(chat('m/awaiting'), signal), 'MODEL_LOADING', /shoal models approve b-8/);
  assertCode(() => dispatcher.run(chat('m/loading'), signal), 'MODEL_LOADING', /not ready yet \(l-1 on this node: loading the model\): retry shortly/);
  assertCode(() => dispatcher.run(chat('m/failed'), signal), 'MODEL_FAILED', /failed on every node \(b-1 on node-b: circuit breaker open; b-3 on node-b: stopped\)/);

  // The local instance's own capabilities.
  assertCode(() => dispatcher.run(chat('m/chat-only', { prompt: { kind: 'text', text: 'x' } }), signal), 'CAPABILITY_MISSING', /does not support completion; its capabilities are chat/);
  assertCode(() => dispatcher.run({ kind: 'embed', model: 'm/chat-only', inputs: ['x'], truncate: false, normalize: false }, signal), 'CAPABILITY_MISSING', /embeddings/);
  assertCode(() => dispatcher.run(chat('m/chat-only', { tools: [TOOL] }), signal), 'CAPABILITY_MISSING', /does not support tools/);
  assert.throws(() => dispatcher.run(chat('m/chat-only', { tools: [TOOL] }), signal), { param: 'model' });
  // Tools the request forbids using, or a count, need only chat.
  assert.ok(dispatcher.run(chat('m/chat-only', { tools: [TOOL], toolChoice: { mode: 'none' } }), signal));
  assert.ok(dispatcher.run({ kind: 'count', model: 'm/chat-only', prompt: { kind: 'chat', messages: [{ role: 'user', content: 'x' }] }, tools: [TOOL] }, signal));
  assertCode(() => dispatcher.run({ kind: 'count', model: 'm/chat-only', prompt: { kind: 'text', text: 'x' }, tools: [] }, signal), 'CAPABILITY_MISSING', /completion/);

  // A remote instance's capabilities come from cluster state.
  assertCode(() => dispatcher.run(chat('m/remote-chat', { prompt: { kind: 'text', text: 'x' } }), signal), 'CAPABILITY_MISSING', /its capabilities are chat$/);
  assert.ok(dispatcher.run(chat('m/remote-chat'), signal));
});
