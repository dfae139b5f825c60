import '../polyfill.js';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { TINY_MODEL_SPEC } from '../models/generate/builtin.js';
import { generateRandomModel } from '../models/generate/random-model.js';
import { RunnerSupervisor } from '../worker/runner/supervisor.js';
import { ShoalError, type ErrorCode } from '../common/errors.js';
import { RouterError, type Router } from '../router/index.js';
import { MAX_JSON_DEPTH } from '../wire/json-depth.js';
import type { RunnerTask, TaskEvent } from '../wire/task.js';
import { INFER_MAX_MESSAGE_BYTES, INFER_PROTOCOL, framesForEvent, vectorsPerFrame } from './protocol.js';
import type { InstanceRunner } from '../worker/runner-contract.js';
import type { LocalInstance } from '../worker/worker.js';
import { runRemote, serveInference, serveLocalInstances, type InferenceResolver } from './remote-runner.js';
import { startLoopbackRouter, type LoopbackRouter } from '../../test/support/loopback-router.js';
import { sleep, until } from '../../test/support/wait.js';

// Real libp2p routers on 127.0.0.1 with mDNS off; they find each other only by explicit dials.

type Node = LoopbackRouter;

const open: Router[] = [];
after(async () => {
  await Promise.all(open.map((router) => router.stop()));
});

async function startNode(): Promise<Node> {
  const node = await startLoopbackRouter('infer');
  open.push(node.router);
  return node;
}

function addr(router: Router): string {
  return `${router.addrs()[0] ?? ''}/p2p/${router.nodeId}`;
}

/** Two members of each other's roster, connected. */
async function pair(): Promise<[Node, Node]> {
  const [a, b] = await Promise.all([startNode(), startNode()]);
  for (const [x, y] of [[a, b], [b, a]] as const) {
    x.roster.add(y.router.nodeId);
    x.router.updateRoster([{ nodeId: y.router.nodeId, addrs: y.router.addrs() }]);
  }
  await a.router.dial(addr(b.router));
  return [a, b];
}

function stop(node: Node | Router): Promise<void> {
  const router = 'router' in node ? node.router : node;
  const at = open.indexOf(router);
  if (at !== -1) open.splice(at, 1);
  return router.stop();
}

const TASK: RunnerTask = {
  kind: 'generate',
  model: 'shoal/tiny',
  prompt: { kind: 'chat', messages: [{ role: 'user', content: 'hello' }] },
  sampling: { maxTokens: 8, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 },
  stop: [],
  tools: [],
  toolChoice: { mode: 'auto' },
  format: { kind: 'text' },
  logprobs: null,
};

const END: TaskEvent = { type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 3, completionTokens: 2 } };

/** Drains a run; returns its events and the error it ended with (if any), and when that came. */
async function drain(events: AsyncIterable<TaskEvent>, onEvent?: (event: TaskEvent) => void): Promise<{ events: TaskEvent[]; error: ShoalError | null; endedAt: number }> {
  const seen: TaskEvent[] = [];
  try {
    for await (const event of events) {
      seen.push(event);
      onEvent?.(event);
    }
    return { events: seen, error: null, endedAt: performance.now() };
  } catch (error) {
    assert.ok(error instanceof ShoalError, `a ShoalError, not ${String(error)}`);
    assert.ok(!(error instanceof RouterError), 'router errors are translated');
    return { events: seen, error, endedAt: performance.now() };
  }
}

/** A resolver whose runs start, then hang until cancelled; records what it saw. */
function hangingResolver(): { resolve: InferenceResolver; started: string[]; cancelled: string[] } {
  const started: string[] = [];
  const cancelled: string[] = [];
  const resolve: InferenceResolver = async function* (instanceId, _task, signal) {
    started.push(instanceId);
    yield { type: 'start', promptTokens: 3 };
    await new Promise<void>((done) => signal.addEventListener('abort', () => done(), { once: true }));
    cancelled.push(instanceId);
    throw new ShoalError('CANCELLED', 'cancelled');
  };
  return { resolve, started, cancelled };
}

describe('remote runner (/shoal/infer/1)', { timeout: 120_000 }, () => {
  test('events arrive in order and complete; keepalives carry a silent prompt phase; self short-circuits', async () => {
    const [a, b] = await pair();
    const seenTasks: unknown[] = [];
    await serveInference(b.router, async function* (instanceId, task) {
      seenTasks.push({ instanceId, task });
      if (task.kind === 'generate' && task.sampling.maxTokens === 1) await sleep(2500); // a long, silent prompt phase
      yield { type: 'start', promptTokens: 3 };
      for (let i = 0; i < 200; i++) yield { type: 'text', text: `t${i} ` };
      yield END;
    });
    const result = await drain(runRemote(a.router, b.router.nodeId, 'inst-1', TASK, new AbortController().signal));
    assert.equal(result.error, null);
    assert.deepEqual(result.events, [{ type: 'start', promptTokens: 3 }, ...Array.from({ length: 200 }, (_, i) => ({ type: 'text', text: `t${i} ` })), END]);
    assert.deepEqual(seenTasks, [{ instanceId: 'inst-1', task: TASK }]);

    // 2.5 s without an event is longer than the 1.5 s silence timeout: only the keepalives keep it alive.
    const slow = await drain(runRemote(a.router, b.router.nodeId, 'inst-1', { ...TASK, sampling: { ...TASK.sampling, maxTokens: 1 } }, new AbortController().signal));
    assert.equal(slow.error, null, `the silent phase ended the request: ${slow.error?.message}`);
    assert.equal(slow.events.length, 202);

    // To this node itself: same protocol, in process.
    await serveInference(a.router, async function* () {
      yield { type: 'start', promptTokens: 1 };
      yield END;
    });
    const self = await drain(runRemote(a.router, a.router.nodeId, 'inst-self', TASK, new AbortController().signal));
    assert.equal(self.error, null);
    assert.deepEqual(self.events.map((e) => e.type), ['start', 'end']);
    await Promise.all([stop(a), stop(b)]);
  });

  test("a request queued on the serving node's one slot hears its place there, then runs", async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-remote-queue-'));
    const modelPath = join(dir, 'tiny.gguf');
    await generateRandomModel(TINY_MODEL_SPEC, modelPath);
    const runner = new RunnerSupervisor({ log: pino({ level: 'silent' }), config: { modelPath, contextSize: 1024, sequences: 1, threads: 1, gpu: false } });
    const [a, b] = await pair();
    try {
      await runner.whenReady();
      await serveInference(b.router, (_instanceId, task, signal) => runner.run(task, signal));
      // The first holds the slot, generating until the second hears its place.
      const first = new AbortController();
      let firstStarted!: () => void;
      const holding = new Promise<void>((resolve) => (firstStarted = resolve));
      const firstRun = drain(runRemote(a.router, b.router.nodeId, 'inst-1', { ...TASK, sampling: { ...TASK.sampling, maxTokens: null } }, first.signal), (event) => {
        if (event.type === 'start') firstStarted();
      });
      await holding;
      const second = await drain(runRemote(a.router, b.router.nodeId, 'inst-1', { ...TASK, sampling: { ...TASK.sampling, maxTokens: 4 } }, new AbortController().signal), (event) => {
        if (event.type === 'queued') first.abort();
      });
      assert.equal(second.error, null, second.error?.message);
      assert.deepEqual(second.events.slice(0, 2).map((event) => event.type), ['queued', 'start']);
      assert.deepEqual(second.events[0], { type: 'queued', position: 1 });
      assert.equal(second.events.at(-1)?.type, 'end');
      assert.equal((await firstRun).error?.code, 'CANCELLED');
    } finally {
      await runner.stop();
      await Promise.all([stop(a), stop(b)]);
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('typed errors from the serving side reach the client with their code, message and param', async () => {
    const [a, b] = await pair();
    await serveInference(b.router, (instanceId, task) => {
      if (instanceId !== 'inst-known') throw new ShoalError('INSTANCE_LOST', `instance ${instanceId} is not on this node`);
      return (async function* (): AsyncGenerator<TaskEvent> {
        if (task.kind === 'count') throw new ShoalError('CONTEXT_OVERFLOW', 'the prompt does not fit', { param: 'messages' });
        yield { type: 'start', promptTokens: 3 };
        throw new ShoalError('RUNNER_CRASHED', 'the runner crashed mid-answer');
      })();
    });
    const cases: Array<{ instanceId: string; task: RunnerTask; code: ErrorCode; message: string; param: string | null; events: number }> = [
      { instanceId: 'inst-nope', task: TASK, code: 'INSTANCE_LOST', message: 'instance inst-nope is not on this node', param: null, events: 0 },
      { instanceId: 'inst-known', task: { kind: 'count', model: 'm', prompt: { kind: 'text', text: 'x' }, tools: [] }, code: 'CONTEXT_OVERFLOW', message: 'the prompt does not fit', param: 'messages', events: 0 },
      { instanceId: 'inst-known', task: TASK, code: 'RUNNER_CRASHED', message: 'the runner crashed mid-answer', param: null, events: 1 },
    ];
    for (const c of cases) {
      const result = await drain(runRemote(a.router, b.router.nodeId, c.instanceId, c.task, new AbortController().signal));
      assert.equal(result.error?.code, c.code);
      assert.equal(result.error?.message, c.message);
      assert.equal(result.error?.param, c.param);
      assert.equal(result.events.length, c.events);
    }
    // A plain exception is INTERNAL on the wire, not a lost instance.
    const c = await startNode();
    c.roster.add(a.router.nodeId);
    a.roster.add(c.router.nodeId);
    await a.router.dial(addr(c.router));
    await serveInference(c.router, () => {
      throw new TypeError('boom');
    });
    const internal = await drain(runRemote(a.router, c.router.nodeId, 'inst-x', TASK, new AbortController().signal));
    assert.equal(internal.error?.code, 'INTERNAL');
    assert.match(internal.error?.message ?? '', /boom/);
    await Promise.all([stop(a), stop(b), stop(c)]);
  });

  test("serveLocalInstances runs the worker's instance and answers INSTANCE_LOST for one it does not hold or a donor", async () => {
    const [a, b] = await pair();
    const served: string[] = [];
    const runners: Record<string, { run?: InstanceRunner['run'] }> = {
      'inst-full': {
        run: async function* (task) {
          served.push(task.model);
          yield { type: 'start', promptTokens: 3 };
          yield END;
        },
      },
      'inst-donor': {},
    };
    const worker = { get: (instanceId: string) => (runners[instanceId] ? ({ runner: runners[instanceId] } as LocalInstance) : undefined) };
    await serveLocalInstances(b.router, worker);
    const ok = await drain(runRemote(a.router, b.router.nodeId, 'inst-full', TASK, new AbortController().signal));
    assert.equal(ok.error, null);
    assert.deepEqual(ok.events, [{ type: 'start', promptTokens: 3 }, END]);
    assert.deepEqual(served, [TASK.model]);
    for (const instanceId of ['inst-gone', 'inst-donor']) {
      const lost = await drain(runRemote(a.router, b.router.nodeId, instanceId, TASK, new AbortController().signal));
      assert.equal(lost.error?.code, 'INSTANCE_LOST', instanceId);
      assert.match(lost.error?.message ?? '', new RegExp(`instance ${instanceId} does not serve requests on this node`));
    }
    await Promise.all([stop(a), stop(b)]);
  });

  test('aborting the signal or leaving the iteration cancels the run on the serving node', async () => {
    const [a, b] = await pair();
    const hanging = hangingResolver();
    await serveInference(b.router, hanging.resolve);

    const controller = new AbortController();
    const aborted = await drain(runRemote(a.router, b.router.nodeId, 'inst-abort', TASK, controller.signal), () => controller.abort());
    assert.equal(aborted.error?.code, 'CANCELLED');
    await until('the server to see the abort', () => hanging.cancelled.includes('inst-abort'), 3000);

    for await (const event of runRemote(a.router, b.router.nodeId, 'inst-break', TASK, new AbortController().signal)) {
      assert.equal(event.type, 'start');
      break;
    }
    await until('the server to see the client leave', () => hanging.cancelled.includes('inst-break'), 3000);

    // An abort while the consumer is not asking for events (busy elsewhere) cancels too.
    const idle = new AbortController();
    const iterator = runRemote(a.router, b.router.nodeId, 'inst-idle', TASK, idle.signal)[Symbol.asyncIterator]();
    assert.equal((await iterator.next()).value?.type, 'start');
    idle.abort();
    await until('the server to see the idle consumer cancel', () => hanging.cancelled.includes('inst-idle'), 3000);
    await assert.rejects(iterator.next(), (error: unknown) => error instanceof ShoalError && error.code === 'CANCELLED');

    // Already aborted: nothing is opened.
    const before = hanging.started.length;
    const pre = new AbortController();
    pre.abort();
    assert.equal((await drain(runRemote(a.router, b.router.nodeId, 'inst-pre', TASK, pre.signal))).error?.code, 'CANCELLED');
    await sleep(100);
    assert.equal(hanging.started.length, before);
    await Promise.all([stop(a), stop(b)]);
  });

  test('when the serving node stops, hangs up or goes silent, every open request ends with INSTANCE_LOST within 2 s', async () => {
    const scenarios: Array<{ name: string; kill: (server: Node, client: Node) => Promise<void>; silentHandler?: boolean }> = [
      { name: 'router stopped', kill: (server) => stop(server) },
      { name: 'libp2p stopped', kill: async (server) => await server.router.libp2p.stop() },
      { name: 'server hung up', kill: (server, client) => server.router.hangUp(client.router.nodeId) },
      // A handler that reads the run frame and then never writes again (no keepalives either).
      { name: 'server silent', kill: () => Promise.resolve(), silentHandler: true },
    ];
    for (const scenario of scenarios) {
      const [a, b] = await pair();
      const hanging = hangingResolver();
      if (scenario.silentHandler === true) {
        await b.router.handleStream(INFER_PROTOCOL, async (channel) => {
          await channel.next();
          await new Promise<void>((done) => channel.signal.addEventListener('abort', () => done(), { once: true }));
        });
      } else {
        await serveInference(b.router, hanging.resolve);
      }
      const runs = ['inst-1', 'inst-2', 'inst-3'].map((id) => {
        const started = Promise.withResolvers<void>();
        const done = drain(runRemote(a.router, b.router.nodeId, id, TASK, new AbortController().signal), () => started.resolve());
        return { started: scenario.silentHandler === true ? Promise.resolve() : started.promise, done };
      });
      await Promise.all(runs.map((run) => run.started));
      const killedAt = performance.now();
      await scenario.kill(b, a);
      const results = await Promise.all(runs.map((run) => run.done));
      for (const result of results) {
        assert.equal(result.error?.code, 'INSTANCE_LOST', `${scenario.name}: ${result.error?.message}`);
        assert.match(result.error?.message ?? '', new RegExp(b.router.nodeId), 'the message names the node');
        const afterMs = result.endedAt - killedAt;
        assert.ok(afterMs < 2000, `${scenario.name}: ended ${afterMs.toFixed(0)} ms after the node went`);
      }
      console.log(`# measured: ${scenario.name}: 3 open requests ended with INSTANCE_LOST after ${results.map((r) => (r.endedAt - killedAt).toFixed(0)).join(', ')} ms`);
      await Promise.all([stop(a), stop(b)]);
    }
  });

  test('a serving node frozen with SIGSTOP ends every open request with INSTANCE_LOST within 2 s', async () => {
    const a = await startNode();
    const routerUrl = pathToFileURL(fileURLToPath(new URL('../router/index.js', import.meta.url))).href;
    const serveUrl = pathToFileURL(fileURLToPath(new URL('./remote-runner.js', import.meta.url))).href;
    const script = `
      import ${JSON.stringify(pathToFileURL(fileURLToPath(new URL('../polyfill.js', import.meta.url))).href)};
      import { generateKeyPair } from '@libp2p/crypto/keys';
      import { pino } from 'pino';
      import { createRouter } from ${JSON.stringify(routerUrl)};
      import { serveInference } from ${JSON.stringify(serveUrl)};
      const router = await createRouter({ privateKey: await generateKeyPair('Ed25519'), name: 'frozen', isMember: () => true, host: '127.0.0.1', p2pPort: 0, mdns: false, log: pino({ level: 'silent' }) });
      await serveInference(router, async function* (_id, _task, signal) {
        yield { type: 'start', promptTokens: 1 };
        await new Promise((done) => signal.addEventListener('abort', done, { once: true }));
      });
      process.stdout.write(JSON.stringify({ nodeId: router.nodeId, addr: router.addrs()[0] + '/p2p/' + router.nodeId }) + '\\n');
      setInterval(() => {}, 1 << 30);
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'], cwd: fileURLToPath(new URL('../../..', import.meta.url)) });
    try {
      const [line] = (await once(child.stdout, 'data')) as [Buffer];
      const peer = JSON.parse(line.toString()) as { nodeId: string; addr: string };
      a.roster.add(peer.nodeId);
      await a.router.dial(peer.addr);
      const runs = ['inst-1', 'inst-2'].map((id) => {
        const started = Promise.withResolvers<void>();
        const done = drain(runRemote(a.router, peer.nodeId, id, TASK, new AbortController().signal), () => started.resolve());
        return { started: started.promise, done };
      });
      await Promise.all(runs.map((run) => run.started));
      await sleep(1000); // keepalives flowing, nothing lost while healthy
      const frozenAt = performance.now();
      child.kill('SIGSTOP');
      const results = await Promise.all(runs.map((run) => run.done));
      for (const result of results) {
        assert.equal(result.error?.code, 'INSTANCE_LOST', result.error?.message);
        assert.ok(result.endedAt - frozenAt < 2000, `ended ${(result.endedAt - frozenAt).toFixed(0)} ms after the freeze`);
      }
      console.log(`# measured: SIGSTOP'd serving node: requests ended ${results.map((r) => (r.endedAt - frozenAt).toFixed(0)).join(', ')} ms after the freeze`);
    } finally {
      child.kill('SIGKILL');
      await stop(a);
    }
  });

  test('a node that cannot be reached, is not a member or does not serve answers INSTANCE_LOST within the open timeout', async () => {
    const [a, b] = await pair();
    const gone = await startNode();
    a.roster.add(gone.router.nodeId);
    a.router.updateRoster([{ nodeId: b.router.nodeId, addrs: b.router.addrs() }, { nodeId: gone.router.nodeId, addrs: gone.router.addrs() }]);
    const goneId = gone.router.nodeId;
    await stop(gone);
    const stranger = await startNode();

    for (const [what, nodeId] of [['stopped member', goneId], ['non-member', stranger.router.nodeId], ['no handler', b.router.nodeId]] as const) {
      const startedAt = performance.now();
      const result = await drain(runRemote(a.router, nodeId, 'inst-1', TASK, new AbortController().signal));
      const tookMs = performance.now() - startedAt;
      assert.equal(result.error?.code, 'INSTANCE_LOST', `${what}: ${result.error?.message}`);
      assert.match(result.error?.message ?? '', new RegExp(nodeId));
      assert.ok(tookMs < 3000, `${what}: took ${tookMs.toFixed(0)} ms`);
    }
    await Promise.all([stop(a), stop(b), stop(stranger)]);
  });

  test('invalid and oversized frames are refused both ways', async () => {
    const [a, b] = await pair();
    let resolved = 0;
    await serveInference(b.router, async function* () {
      resolved++;
      yield END;
    });

    // An invalid run frame: a typed BAD_REQUEST answer, the resolver never runs.
    const raw = await a.router.openStream<unknown>(b.router.nodeId, INFER_PROTOCOL);
    await raw.send({ type: 'run', instanceId: 'inst-1', task: { kind: 'generate' } });
    await raw.close();
    const answer = (await raw.next()) as { type: string; code: string };
    assert.equal(answer.type, 'error');
    assert.equal(answer.code, 'BAD_REQUEST');

    // A frame over the frame limit (48 MiB, room for a request's images) is refused on its length header: the stream is reset.
    const big = await a.router.openStream<unknown>(b.router.nodeId, INFER_PROTOCOL, { maxMessageBytes: 64 * 1024 * 1024 });
    await big.send({ type: 'run', instanceId: 'inst-1', task: { ...TASK, prompt: { kind: 'text', text: 'x'.repeat(INFER_MAX_MESSAGE_BYTES + 1) } } }).catch(() => {});
    await assert.rejects(big.next(), (error: unknown) => error instanceof RouterError && (error.reason === 'reset' || error.reason === 'closed'));
    // runRemote refuses to send one at all.
    const local = await drain(runRemote(a.router, b.router.nodeId, 'inst-1', { ...TASK, prompt: { kind: 'text', text: 'x'.repeat(INFER_MAX_MESSAGE_BYTES + 1) } }, new AbortController().signal));
    assert.equal(local.error?.code, 'PAYLOAD_TOO_LARGE');
    assert.equal(resolved, 0);
    assert.equal((await drain(runRemote(a.router, b.router.nodeId, 'inst-1', TASK, new AbortController().signal))).error, null, 'the connection survived');

    // A server that breaks the protocol: an unknown event (INTERNAL), and an answer without its end (INSTANCE_LOST).
    const c = await startNode();
    c.roster.add(a.router.nodeId);
    a.roster.add(c.router.nodeId);
    await a.router.dial(addr(c.router));
    await c.router.handleStream(INFER_PROTOCOL, async (channel) => {
      const run = (await channel.next()) as { instanceId: string };
      if (run.instanceId === 'inst-garbage') await channel.send({ type: 'event', event: { type: 'bogus' } });
      else await channel.send({ type: 'event', event: { type: 'start', promptTokens: 1 } });
    });
    const garbage = await drain(runRemote(a.router, c.router.nodeId, 'inst-garbage', TASK, new AbortController().signal));
    assert.equal(garbage.error?.code, 'INTERNAL');
    assert.match(garbage.error?.message ?? '', /does not match its schema/);
    const truncated = await drain(runRemote(a.router, c.router.nodeId, 'inst-truncated', TASK, new AbortController().signal));
    assert.equal(truncated.error?.code, 'INSTANCE_LOST');
    assert.deepEqual(truncated.events.map((e) => e.type), ['start']);
    await Promise.all([stop(a), stop(b), stop(c)]);
  });

  test('a large embeddings event travels in several frames and arrives whole', async () => {
    const perFrame = vectorsPerFrame(1024);
    const count = perFrame + 7; // two frames
    const vectors = Array.from({ length: count }, (_, i) => Array.from({ length: 1024 }, (_, j) => Math.sin(i * 1024 + j) / 3));
    const frames = framesForEvent({ type: 'embeddings', vectors });
    assert.deepEqual(frames?.map((f) => f.type), ['vectors', 'event']);
    assert.equal(framesForEvent({ type: 'embeddings', vectors: [[1, 2]] }, 1500)?.length, 1);
    assert.equal(framesForEvent({ type: 'embeddings', vectors: [Array.from({ length: 1000 }, () => 0.5)] }, 2000), null, 'one vector over the limit');

    const [a, b] = await pair();
    await serveInference(b.router, async function* () {
      yield { type: 'start', promptTokens: count };
      yield { type: 'embeddings', vectors };
      yield END;
    });
    const task: RunnerTask = { kind: 'embed', model: 'm', inputs: ['x'], truncate: false, normalize: false };
    const result = await drain(runRemote(a.router, b.router.nodeId, 'inst-1', task, new AbortController().signal));
    assert.equal(result.error, null, result.error?.message);
    assert.deepEqual(result.events.map((e) => e.type), ['start', 'embeddings', 'end']);
    const got = result.events[1];
    assert.ok(got?.type === 'embeddings');
    assert.equal(got.vectors.length, count);
    assert.deepEqual(got.vectors, vectors);
    await Promise.all([stop(a), stop(b)]);
  });

  test('a slow client holds the serving side back instead of making it buffer', async () => {
    const [a, b] = await pair();
    let produced = 0;
    const total = 3000;
    await serveInference(b.router, async function* () {
      yield { type: 'start', promptTokens: 1 };
      for (let i = 0; i < total; i++) {
        produced++;
        yield { type: 'text', text: String(i % 10).repeat(16 * 1024) };
      }
      yield END;
    });
    let consumed = 0;
    let maxAhead = 0;
    for await (const event of runRemote(a.router, b.router.nodeId, 'inst-1', TASK, new AbortController().signal)) {
      if (event.type !== 'text') continue;
      consumed++;
      maxAhead = Math.max(maxAhead, produced - consumed);
      if (consumed % 100 === 0) await sleep(50);
    }
    assert.equal(consumed, total);
    // 3000 x 16 KiB = 48 MiB; what is in flight is bounded by the yamux window (4 MiB) and the frame queues.
    assert.ok(maxAhead < 1000, `the server ran ${maxAhead} events ahead of the client`);
    console.log(`# measured: with a slow client the server ran at most ${maxAhead} events (${((maxAhead * 16) / 1024).toFixed(1)} MiB) ahead`);
    await Promise.all([stop(a), stop(b)]);
  });
  test('a tool schema as deep as the HTTP boundary admits travels to the serving node intact', async () => {
    const [a, b] = await pair();
    // Deeper than any value inside a body of MAX_JSON_DEPTH levels can be, so what one node serves
    // locally another can serve when the request is routed to it.
    let parameters: Record<string, unknown> = { type: 'string' };
    for (let level = 1; level < MAX_JSON_DEPTH; level += 1) parameters = { type: 'array', items: parameters };
    const task: RunnerTask = { ...TASK, tools: [{ name: 'deep', parameters }] };
    const seen: RunnerTask[] = [];
    await serveInference(b.router, async function* (_instanceId, received) {
      seen.push(received);
      yield { type: 'start', promptTokens: 3 };
      yield END;
    });
    const result = await drain(runRemote(a.router, b.router.nodeId, 'inst-deep', task, new AbortController().signal));
    assert.equal(result.error, null, `the routed request failed: ${result.error?.message}`);
    assert.deepEqual(seen, [task]);
    await Promise.all([stop(a), stop(b)]);
  });
});
