import { generateTask } from '../../test/support/tasks.js';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { AsyncQueue } from '../common/async-queue.js';
import type { InstanceId, ModelId } from '../common/ids.js';
import { ShoalError } from '../common/errors.js';
import type { InferenceTask, RunnerTask, TaskEvent } from '../wire/task.js';
import { RUNNER_RECORDER_ENTRIES, STDERR_TAIL_LINE_CHARS, STDERR_TAIL_LINES, type Attributes, type MomentKind } from '../wire/diagnostics.js';
import { processPhases, promptTokensAtMost, RecordedRunner, PREFILL_ALLOWANCE_MS_PER_TOKEN, RUNNER_PROCESS_ENTRIES, type RecordedRunnerOptions } from './recorded-runner.js';
import type { InstanceRunner, RunnerState, RunnerStatus } from './runner-contract.js';
import { Worker } from './worker.js';
import { DEFAULT_CRASH_LOOP } from './crash-loop.js';
import { DEFAULT_STOP_GRACE_MS, ManagedProcess, pollUntil } from './engines/managed-process.js';
import { acceptsConnection } from './engines/rpc-donor.js';

const log = pino({ level: 'silent' });

const GENERATE = generateTask();

interface Held {
  queue: AsyncQueue<TaskEvent>;
  signal: AbortSignal;
}

/** An engine whose event stream the test writes; `kill` runs a crash path like the real engines'. */
class FakeRunner implements InstanceRunner {
  state: RunnerState = 'ready';
  reason: string | null = null;
  restarts = 0;
  pid: number | null = process.pid;
  inFlight = 0;
  readonly kills: string[] = [];
  readonly held: Held[] = [];
  refuse: ShoalError | null = null;

  status(): RunnerStatus {
    return { state: this.state, reason: this.reason, pid: this.pid, restarts: this.restarts, inFlight: this.inFlight, queued: 0, contextSize: 512, sequences: 1, gpu: false, model: null };
  }

  whenReady(): Promise<void> {
    return Promise.resolve();
  }

  run(_task: RunnerTask, signal: AbortSignal): AsyncIterable<TaskEvent> {
    if (this.refuse) throw this.refuse;
    const held: Held = { queue: new AsyncQueue<TaskEvent>(), signal };
    this.inFlight += 1;
    this.held.push(held);
    signal.addEventListener('abort', () => this.release(held, new ShoalError('CANCELLED', 'the request was cancelled')), { once: true });
    return held.queue;
  }

  release(held: Held, error: ShoalError | null): void {
    if (held.queue.ended) return;
    if (error) held.queue.fail(error);
    else held.queue.end();
    this.inFlight -= 1;
  }

  kill(reason: string): void {
    this.kills.push(reason);
    for (const held of this.held) this.release(held, new ShoalError('RUNNER_CRASHED', 'the engine crashed'));
    this.state = 'restarting';
    this.reason = `restarting in 50 ms after: ${reason}`;
  }

  stderrTail(): string[] {
    return ['a stderr line'];
  }

  async stop(): Promise<void> {
    this.state = 'stopped';
  }
}

function recorded(fake: InstanceRunner, options: Partial<RecordedRunnerOptions> = {}): { runner: RecordedRunner; moments: Array<{ kind: MomentKind; text: string; data: Attributes | undefined }> } {
  const moments: Array<{ kind: MomentKind; text: string; data: Attributes | undefined }> = [];
  const runner = new RecordedRunner(fake, {
    instanceId: 'inst-1',
    modelId: 'm',
    log,
    stallTimeoutMs: 60_000,
    recordMoment: (kind, text, data) => moments.push({ kind, text, data }),
    ...options,
  });
  return { runner, moments };
}

const tick = (ms = 0): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function drain(stream: AsyncIterable<TaskEvent>): Promise<TaskEvent[]> {
  const events: TaskEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

function requestPhases(runner: RecordedRunner): string[] {
  return runner.recorder
    .entries()
    .filter((entry) => entry.requestId !== null)
    .map((entry) => entry.phase);
}

test('a request is recorded queued, prefill, decode and done, with its token counts, and its events pass through in order', async () => {
  const fake = new FakeRunner();
  const { runner } = recorded(fake);
  const stream = runner.run!(GENERATE, new AbortController().signal);
  const done = drain(stream);
  const held = fake.held[0]!;
  const sent: TaskEvent[] = [
    { type: 'start', promptTokens: 7 },
    { type: 'text', text: 'a' },
    { type: 'text', text: 'b' },
    { type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens: 7, completionTokens: 2 } },
  ];
  for (const event of sent) held.queue.push(event);
  fake.release(held, null);
  assert.deepEqual(await done, sent);
  const entries = runner.recorder.entries().filter((entry) => entry.requestId !== null);
  assert.deepEqual(
    entries.map((e) => [e.phase, e.promptTokens, e.completionTokens]),
    [
      ['queued', null, null],
      ['prefill', 7, null],
      ['decode', 7, null],
      ['done', 7, 2],
    ],
  );
  assert.equal(new Set(entries.map((e) => e.requestId)).size, 1, 'one request id for all its entries');
  assert.match(entries[0]!.requestId!, /^[0-9a-f]{8}$/);
  await runner.stop();
});

test('an engine silent mid-answer trips the watchdog: RUNNER_STALLED, the engine killed, its slot released, the stall recorded', async () => {
  const fake = new FakeRunner();
  const { runner, moments } = recorded(fake, { stallTimeoutMs: 50 });
  const stream = runner.run!(GENERATE, new AbortController().signal);
  const held = fake.held[0]!;
  held.queue.push({ type: 'start', promptTokens: 0 });
  held.queue.push({ type: 'text', text: 'a' });
  const error = await drain(stream).then(
    () => assert.fail('the stalled request succeeded'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ShoalError && error.code === 'RUNNER_STALLED', String(error));
  assert.match(error.message, /retry the request/);
  assert.equal(fake.kills.length, 1, 'the engine was killed once');
  assert.match(fake.kills[0]!, /hang watchdog/);
  assert.equal(fake.status().inFlight, 0, 'the crash path gave the slot back');
  assert.deepEqual(requestPhases(runner), ['queued', 'prefill', 'decode', 'stalled']);
  const stalled = runner.recorder.entries().find((e) => e.phase === 'stalled')!;
  assert.match(stalled.detail ?? '', /no event for 50 ms mid-answer/);
  const stall = moments.find((m) => m.kind === 'runner-stall');
  assert.ok(stall, JSON.stringify(moments));
  assert.equal(stall.data?.requestId, stalled.requestId);
  assert.equal(stall.data?.instanceId, 'inst-1');
  // The kill's crash shows in the runner's process phases and as a node moment once observed.
  runner.observe();
  assert.ok(runner.recorder.entries().some((e) => e.phase === 'crashed' && e.requestId === null));
  assert.ok(moments.some((m) => m.kind === 'runner-crash'));
  await runner.stop();
});

test('before the first token the allowance grows with the prompt, and a request queued while the engine holds nothing is no stall', async () => {
  const fake = new FakeRunner();
  const { runner } = recorded(fake, { stallTimeoutMs: 50 });
  // Queued (no start yet) for many times the timeout with nothing in the engine: an engine that
  // holds nothing is not hung (its slots may be taken by requests of another wrapper, or it loads).
  const queued = drain(runner.run!(GENERATE, new AbortController().signal));
  fake.inFlight = 0;
  await tick(300);
  assert.equal(fake.kills.length, 0, 'a queued request is no stall while the engine holds nothing');
  // 20 prompt tokens: 50 ms + 20 * 100 ms before the first token.
  assert.ok(20 * PREFILL_ALLOWANCE_MS_PER_TOKEN >= 1000, 'the allowance used here exceeds the wait below');
  const held = fake.held[0]!;
  fake.inFlight = 1;
  held.queue.push({ type: 'start', promptTokens: 20 });
  await tick(300);
  assert.equal(fake.kills.length, 0, 'prefill of 20 tokens gets more than 300 ms');
  held.queue.push({ type: 'text', text: 'a' });
  held.queue.push({ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 20, completionTokens: 1 } });
  fake.release(held, null);
  assert.equal((await queued).length, 3);
  assert.deepEqual(requestPhases(runner), ['queued', 'prefill', 'decode', 'done']);
  await tick(100);
  assert.equal(fake.kills.length, 0, 'an ended request is not watched');
  await runner.stop();
});

test('an engine that hangs before it takes a request (no start) while it holds requests trips the watchdog from the queue', async () => {
  const fake = new FakeRunner();
  const { runner, moments } = recorded(fake, { stallTimeoutMs: 50 });
  // The engine holds the request (in flight) and never says a word: a frozen child, a wedged server.
  const stream = runner.run!(GENERATE, new AbortController().signal);
  const error = await drain(stream).then(
    () => assert.fail('the stalled request succeeded'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ShoalError && error.code === 'RUNNER_STALLED', String(error));
  assert.equal(fake.kills.length, 1, 'the engine was killed once');
  assert.equal(fake.held[0]!.signal.aborted, true, 'and the request cancelled in the engine');
  assert.deepEqual(requestPhases(runner), ['queued', 'stalled']);
  assert.match(runner.recorder.entries().find((e) => e.phase === 'stalled')?.detail ?? '', /while this request queued/);
  assert.equal(moments.find((m) => m.kind === 'runner-stall')?.data?.phase, 'queued');
  await runner.stop();
});

test('queue reports are no progress: an engine that never starts a request still trips the watchdog while new arrivals move the queue', { timeout: 10_000 }, async () => {
  const fake = new FakeRunner();
  const { runner } = recorded(fake, { stallTimeoutMs: 80 });
  const stream = runner.run!(GENERATE, new AbortController().signal);
  // The adapter keeps reporting this request's place (other requests come and go), the engine says nothing.
  const reports = setInterval(() => fake.held[0]?.queue.push({ type: 'queued', position: 1 }), 10);
  try {
    const error = await drain(stream).then(
      () => assert.fail('the stalled request succeeded'),
      (e: unknown) => e,
    );
    assert.ok(error instanceof ShoalError && error.code === 'RUNNER_STALLED', String(error));
    assert.equal(fake.kills.length, 1);
  } finally {
    clearInterval(reports);
    await runner.stop();
  }
});

test('a request the engine holds before it says start gets the allowance of its prompt size: a long prompt read without a word is no stall', async () => {
  const fake = new FakeRunner();
  const { runner } = recorded(fake, { stallTimeoutMs: 50 });
  const task: InferenceTask = { ...GENERATE, prompt: { kind: 'text', text: 'x'.repeat(40) } };
  const allowanceMs = promptTokensAtMost(task) * PREFILL_ALLOWANCE_MS_PER_TOKEN;
  assert.ok(promptTokensAtMost(task) >= 20, 'at least one token per two bytes of prompt');
  const startedMs = Date.now();
  const error = await drain(runner.run!(task, new AbortController().signal)).then(
    () => assert.fail('the stalled request succeeded'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof ShoalError && error.code === 'RUNNER_STALLED', String(error));
  assert.ok(Date.now() - startedMs >= 50 + allowanceMs, `tripped after ${Date.now() - startedMs} ms, before the prompt's allowance of ${allowanceMs} ms`);
  await runner.stop();
});

test('a busy engine with a queue never trips the watchdog: its requests in prefill and decode keep the queue alive', async () => {
  const fake = new FakeRunner();
  const { runner } = recorded(fake, { stallTimeoutMs: 300 });
  const first = drain(runner.run!(GENERATE, new AbortController().signal));
  const second = drain(runner.run!(GENERATE, new AbortController().signal));
  const [a, b] = [fake.held[0]!, fake.held[1]!];
  // The first is in prefill of 5 tokens (300 ms + 500 ms allowed): the second waits that long too.
  a.queue.push({ type: 'start', promptTokens: 5 });
  await tick(450);
  assert.equal(fake.kills.length, 0, 'a long prefill ahead of a queued request is no stall');
  // Then it decodes, a token every 10 ms, past the second's next check (800 ms after it came).
  for (let i = 0; i < 100; i++) {
    a.queue.push({ type: 'text', text: 'a' });
    await tick(10);
  }
  assert.equal(fake.kills.length, 0, 'a queue behind a speaking engine is no stall');
  a.queue.push({ type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens: 5, completionTokens: 100 } });
  fake.release(a, null);
  b.queue.push({ type: 'start', promptTokens: 0 });
  b.queue.push({ type: 'text', text: 'b' });
  b.queue.push({ type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: 0, completionTokens: 1 } });
  fake.release(b, null);
  assert.equal((await first).length, 102);
  assert.equal((await second).length, 3);
  assert.equal(fake.kills.length, 0);
  await runner.stop();
});

test('a stall cancels the request in the engine even where the engine has kill (a SIGKILL may land late)', async () => {
  // An engine whose kill takes effect later (here: never): only the cancel gives the slot back.
  class SlowKill extends FakeRunner {
    override kill(reason: string): void {
      this.kills.push(reason);
    }
  }
  const fake = new SlowKill();
  const { runner } = recorded(fake, { stallTimeoutMs: 30 });
  const stream = runner.run!(GENERATE, new AbortController().signal);
  fake.held[0]!.queue.push({ type: 'start', promptTokens: 0 });
  fake.held[0]!.queue.push({ type: 'text', text: 'a' });
  await assert.rejects(drain(stream), (e: unknown) => e instanceof ShoalError && e.code === 'RUNNER_STALLED');
  assert.equal(fake.kills.length, 1);
  assert.equal(fake.held[0]!.signal.aborted, true, 'the engine was told to cancel');
  assert.equal(fake.status().inFlight, 0);
  await runner.stop();
});

test('a token event refreshes the one silence timer instead of making a new one', async () => {
  const fake = new FakeRunner();
  // A timeout no other timer in this process uses, to count the watchdog's own timers.
  const stallTimeoutMs = 61_234;
  const { runner } = recorded(fake, { stallTimeoutMs });
  const realSetTimeout = globalThis.setTimeout;
  let made = 0;
  globalThis.setTimeout = ((...args: Parameters<typeof setTimeout>) => {
    if (args[1] === stallTimeoutMs) made += 1;
    return Reflect.apply(realSetTimeout, globalThis, args) as NodeJS.Timeout;
  }) as typeof setTimeout;
  try {
    const done = drain(runner.run!(GENERATE, new AbortController().signal));
    const held = fake.held[0]!;
    held.queue.push({ type: 'start', promptTokens: 0 });
    for (let i = 0; i < 100; i++) held.queue.push({ type: 'text', text: 'a' });
    held.queue.push({ type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens: 0, completionTokens: 100 } });
    fake.release(held, null);
    assert.equal((await done).length, 102);
  } finally {
    globalThis.setTimeout = realSetTimeout;
  }
  // The queue watch, the prefill timer and the decode timer (prefill of 0 tokens allows the same
  // silence as decode, so the decode timer may be the prefill one refreshed): at most 3, not 100.
  assert.ok(made >= 1 && made <= 3, `timers made: ${made}`);
  await runner.stop();
});

test('process phases keep a ring of their own: busy traffic does not push them out, and the recorder stays one ordered list within the cap', async () => {
  const fake = new FakeRunner();
  const { runner } = recorded(fake);
  // Many more request entries than the recorder keeps: each refusal records queued and failed.
  fake.refuse = new ShoalError('QUEUE_FULL', 'full');
  for (let i = 0; i < RUNNER_RECORDER_ENTRIES; i++) assert.throws(() => runner.run!(GENERATE, new AbortController().signal));
  Object.assign(fake, { state: 'restarting', reason: 'restarting in 50 ms after: runner exited with signal SIGKILL' });
  runner.observe();
  for (let i = 0; i < 10; i++) assert.throws(() => runner.run!(GENERATE, new AbortController().signal));
  const entries = runner.recorder.entries();
  assert.equal(entries.length, RUNNER_RECORDER_ENTRIES);
  assert.deepEqual(
    entries.filter((e) => e.requestId === null).map((e) => e.phase),
    ['ready', 'crashed'],
    'the first reading survives the traffic',
  );
  assert.equal(entries[0]!.phase, 'ready');
  const crashedAt = entries.findIndex((e) => e.phase === 'crashed');
  assert.equal(entries.length - crashedAt - 1, 20, 'the crash sits where it happened, before the last 10 refusals');
  assert.ok(entries.every((e, i) => i === 0 || e.atMs >= entries[i - 1]!.atMs), 'time-ordered');
  assert.deepEqual(entries.at(-1), runner.recorder.requests.entries().at(-1));
  // The process ring is bounded too.
  for (let i = 0; i < RUNNER_PROCESS_ENTRIES; i++) {
    Object.assign(fake, { state: i % 2 === 0 ? 'ready' : 'restarting', reason: `r${i}`, restarts: fake.restarts + (i % 2 === 0 ? 1 : 0) });
    runner.observe();
  }
  assert.equal(runner.recorder.process.entries().length, RUNNER_PROCESS_ENTRIES);
  assert.equal(runner.recorder.entries().length, RUNNER_RECORDER_ENTRIES);
  fake.refuse = null;
  await runner.stop();
});

test('without kill the stalled request is cancelled in the engine instead', async () => {
  const fake = new FakeRunner();
  const noKill: InstanceRunner = { status: () => fake.status(), whenReady: () => fake.whenReady(), run: (task, signal) => fake.run(task, signal), stop: () => fake.stop() };
  const { runner } = recorded(noKill, { stallTimeoutMs: 30 });
  const stream = runner.run!(GENERATE, new AbortController().signal);
  fake.held[0]!.queue.push({ type: 'start', promptTokens: 0 });
  await assert.rejects(drain(stream), (e: unknown) => e instanceof ShoalError && e.code === 'RUNNER_STALLED');
  assert.equal(fake.held[0]!.signal.aborted, true);
  assert.equal(fake.status().inFlight, 0);
  await runner.stop();
});

test('a refused request is recorded failed and the refusal thrown as it was; a consumer that stops reading cancels the engine', async () => {
  const fake = new FakeRunner();
  const { runner } = recorded(fake);
  fake.refuse = new ShoalError('QUEUE_FULL', 'full');
  assert.throws(() => runner.run!(GENERATE, new AbortController().signal), (e: unknown) => e instanceof ShoalError && e.code === 'QUEUE_FULL');
  assert.deepEqual(
    runner.recorder.entries().map((e) => [e.phase, e.detail]),
    [
      ['ready', null],
      ['queued', null],
      ['failed', 'QUEUE_FULL: full'],
    ],
  );
  fake.refuse = null;
  const stream = runner.run!(GENERATE, new AbortController().signal);
  const held = fake.held[0]!;
  held.queue.push({ type: 'start', promptTokens: 1 });
  held.queue.push({ type: 'text', text: 'a' });
  for await (const event of stream) if (event.type === 'text') break;
  assert.equal(held.signal.aborted, true, 'the engine was told');
  await tick();
  assert.equal(fake.status().inFlight, 0);
  assert.equal(runner.recorder.entries().at(-1)?.detail, 'CANCELLED: the consumer stopped reading');
  await runner.stop();
});

test('process transitions are recorded with the resident memory read from /proc, crashes and an open breaker as node moments', async () => {
  const fake = new FakeRunner();
  fake.state = 'starting';
  fake.reason = 'loading the model';
  const { runner, moments } = recorded(fake);
  const step = (state: RunnerState, reason: string | null, restarts = fake.restarts): void => {
    Object.assign(fake, { state, reason, restarts });
    runner.observe();
  };
  step('ready', null);
  runner.observe(); // no change, no entry
  step('restarting', 'restarting in 1000 ms after: runner exited with signal SIGKILL');
  step('restarting', 'loading the model', 1);
  step('restarting', 'restarting in 2000 ms after: runner exited with exit code 1');
  step('failed', 'gave up after 2 crashes in 600 s; last: runner exited with exit code 1');
  await runner.stop();
  const entries = runner.recorder.entries();
  assert.deepEqual(
    entries.map((e) => e.phase),
    ['loading', 'ready', 'crashed', 'restarting', 'crashed', 'breaker-open', 'stopping', 'stopped'],
  );
  assert.ok(entries.every((e) => e.requestId === null));
  if (process.platform === 'linux') assert.ok((entries[1]!.rssBytes ?? 0) > 1024 * 1024, `the rss of this process: ${entries[1]!.rssBytes}`);
  assert.deepEqual(
    moments.map((m) => m.kind),
    ['runner-crash', 'runner-crash', 'breaker-open'],
  );
  assert.match(moments[2]!.text, /gave up after 2 crashes/);
});

test('process phases: a crash that restarted between two readings is still recorded; a failed start is no crash', () => {
  const ready = { state: 'ready' as const, restarts: 0, reason: null };
  assert.deepEqual(
    processPhases(ready, { state: 'ready', restarts: 1, reason: null }, false).phases.map((p) => p.phase),
    ['crashed', 'restarting', 'ready'],
  );
  assert.deepEqual(
    processPhases({ state: 'starting', restarts: 0, reason: 'starting llama-server' }, { state: 'failed', restarts: 0, reason: 'llama-server is not built' }, false).phases.map((p) => p.phase),
    ['breaker-open'],
  );
});

test('the worker wraps every runner it attaches: requests are recorded, diagnostics list them, a donor stays without run', async () => {
  const moments: MomentKind[] = [];
  const worker = new Worker({ log, threads: 1, gpu: false, contextSize: 512, sequences: 1, stallTimeoutMs: 40, recordMoment: (kind) => moments.push(kind) });
  const fake = new FakeRunner();
  const base = { modelId: 'm' as ModelId, backend: 'llama_cpp-cpu', capabilities: [], placedAt: 0, local: false };
  const instance = worker.attach({ ...base, instanceId: 'inst-a' as InstanceId, role: 'full', runner: fake });
  assert.notEqual(instance.runner, fake);
  assert.equal(worker.get('inst-a' as InstanceId)?.runner, instance.runner);
  const stream = instance.runner.run!(GENERATE, new AbortController().signal);
  fake.held[0]!.queue.push({ type: 'start', promptTokens: 0 });
  await assert.rejects(drain(stream), (e: unknown) => e instanceof ShoalError && e.code === 'RUNNER_STALLED');
  worker.changed();
  const donor: InstanceRunner = { status: () => new FakeRunner().status(), whenReady: () => Promise.resolve(), stop: () => Promise.resolve() };
  const attachedDonor = worker.attach({ ...base, instanceId: 'inst-b' as InstanceId, role: 'donor', runner: donor });
  assert.equal(attachedDonor.runner.run, undefined);
  const diagnostics = worker.diagnostics();
  assert.deepEqual(
    diagnostics.map((d) => [d.instanceId, d.role, d.state]),
    [
      ['inst-a', 'full', 'restarting'],
      ['inst-b', 'donor', 'ready'],
    ],
  );
  assert.deepEqual(
    diagnostics[0]!.recorder.map((e) => e.phase),
    ['ready', 'queued', 'prefill', 'stalled', 'crashed'],
  );
  assert.deepEqual(diagnostics[0]!.stderrTail, ['a stderr line']);
  assert.deepEqual(diagnostics[1]!.stderrTail, []);
  assert.deepEqual(moments, ['runner-stall', 'runner-crash']);
  await worker.stop();
  assert.equal(fake.state, 'stopped');
});

test('an engine process killed through `kill` crashes with the reason and restarts; its stderr tail is bounded and outlives the restart', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'shoal-recorded-'));
  // An "engine": a cut-worthy line, then 30 numbered lines on stderr, then it listens.
  const script = `process.stderr.write('x'.repeat(3000) + '\\n'); for (let i = 0; i < 30; i++) process.stderr.write('pid ' + process.pid + ' line ' + i + '\\n'); require('node:net').createServer(() => {}).listen(Number(process.argv[1]), '127.0.0.1')`;
  const crashes: ShoalError[] = [];
  const engine = new ManagedProcess<number>({
    name: 'test-engine',
    binaryPath: process.execPath,
    dataDir,
    log,
    policy: { ...DEFAULT_CRASH_LOOP, initialBackoffMs: 20, loadTimeoutMs: 10_000, stopGraceMs: DEFAULT_STOP_GRACE_MS },
    args: (port) => ['-e', script, String(port)],
    probe: async (port, signal) => {
      await pollUntil(() => acceptsConnection(port), signal);
      return port;
    },
    onCrash: (error) => crashes.push(error),
  });
  try {
    await engine.whenReady();
    const first = engine.pid!;
    await until(() => engine.stderrTail().length === 31, 'the first process wrote its lines');
    assert.equal(engine.stderrTail()[0], 'x'.repeat(STDERR_TAIL_LINE_CHARS), 'a long line is cut');
    engine.kill('hang watchdog: test');
    await until(() => engine.state === 'ready' && engine.restarts === 1, 'it restarts through the crash loop');
    assert.match(crashes[0]?.message ?? '', /hang watchdog: test/);
    assert.equal(crashes[0]?.code, 'RUNNER_CRASHED');
    await until(() => engine.stderrTail().some((line) => line === `pid ${engine.pid} line 29`), 'the second process wrote its lines');
    const tail = engine.stderrTail();
    assert.equal(tail.length, STDERR_TAIL_LINES);
    assert.ok(tail.some((line) => line.startsWith(`pid ${first} `)), 'the crashed process\'s last lines are kept');
    assert.equal(tail.at(-1), `pid ${engine.pid} line 29`);
  } finally {
    await engine.stop();
    await rm(dataDir, { recursive: true, force: true });
  }
});

async function until(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    assert.ok(Date.now() < deadline, `not within ${timeoutMs} ms: ${what}`);
    await tick(10);
  }
}
