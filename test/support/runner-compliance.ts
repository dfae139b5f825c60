// The engine compliance suite: written once against the runner contract (src/worker/runner-contract.ts)
// and run by one test file per request-serving engine (test/integration/runner-*.test.ts), in the
// manner of js-libp2p's interface-compliance-tests. An engine that passes can be held by the worker
// and routed to like any other. Engine-specific behaviour (token reservations, orphan records, log
// probabilities) stays in that engine's own tests.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ShoalError, type ErrorCode } from '../../src/common/errors.js';
import { TaskEvent, type InferenceTask } from '../../src/wire/task.js';
import type { InstanceRunner } from '../../src/worker/runner-contract.js';
import { pino } from 'pino';
import { RecordedRunner } from '../../src/worker/recorded-runner.js';

export type ServingRunner = InstanceRunner & Required<Pick<InstanceRunner, 'run'>>;

/** What a case asks of the engine it starts; the rest (model, threads, context) is the test file's choice. */
export interface ComplianceRunnerOptions {
  /** Requests served at once. */
  slots: number;
  /** Crashes within the window that open the circuit breaker. */
  maxCrashes: number;
  /** First restart delay after a crash, short so that the suite stays fast. */
  initialBackoffMs: number;
}

export interface ComplianceSuiteOptions {
  /** A reason to skip the suite (the engine is not built here), or false. */
  skip: string | false;
  /** The `model` field of the tasks sent. */
  modelId: string;
  /** Per case. Default 120 000. */
  timeoutMs?: number;
}

const DEFAULTS: ComplianceRunnerOptions = { slots: 1, maxCrashes: 5, initialBackoffMs: 50 };
const PROMPT: InferenceTask['prompt'] = { kind: 'text', text: 'Once upon a time there was a' };

/**
 * Registers the contract's cases under `describe(name)`. `makeRunner` starts a fresh engine per case
 * on a model that never ends a reply on its own (like `shoal/tiny`), with room for a generation of
 * a few hundred tokens per slot, so a request without a token limit is still running when a case
 * cancels it or kills the engine under it.
 */
export function runnerComplianceSuite(name: string, makeRunner: (options: ComplianceRunnerOptions) => ServingRunner, suite: ComplianceSuiteOptions): void {
  function generate(maxTokens: number | null, sampling: Partial<InferenceTask['sampling']> = {}): InferenceTask {
    return {
      kind: 'generate',
      model: suite.modelId,
      prompt: PROMPT,
      sampling: { maxTokens, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0, ...sampling },
      stop: [],
      tools: [],
      toolChoice: { mode: 'auto' },
      format: { kind: 'text' },
      logprobs: null,
    };
  }

  async function withRunner(options: Partial<ComplianceRunnerOptions>, body: (runner: ServingRunner) => Promise<void>): Promise<void> {
    const runner = makeRunner({ ...DEFAULTS, ...options });
    try {
      await body(runner);
    } finally {
      await runner.stop();
    }
  }

  /** Runs `task` to its end; `onEvent` may act on the runner mid-stream. */
  async function collect(runner: ServingRunner, maxTokens: number | null, onEvent?: (event: TaskEvent, texts: number) => void, signal = new AbortController().signal): Promise<TaskEvent[]> {
    const events: TaskEvent[] = [];
    let texts = 0;
    for await (const event of runner.run(generate(maxTokens), signal)) {
      events.push(TaskEvent.parse(event));
      if (event.type === 'text') texts += 1;
      onEvent?.(event, texts);
    }
    return events;
  }

  /** The text of one answer of `maxTokens` tokens. */
  async function answer(runner: ServingRunner, maxTokens: number, sampling: Partial<InferenceTask['sampling']>): Promise<string> {
    let text = '';
    for await (const event of runner.run(generate(maxTokens, sampling), new AbortController().signal)) {
      if (event.type === 'text') text += event.text;
    }
    return text;
  }

  async function fails(promise: Promise<unknown>, code: ErrorCode): Promise<ShoalError> {
    try {
      await promise;
    } catch (error) {
      assert.ok(error instanceof ShoalError, `expected a ShoalError ${code}, got ${String(error)}`);
      assert.equal(error.code, code, error.message);
      return error;
    }
    return assert.fail(`expected ${code}, but it succeeded`);
  }

  function refuses(runner: ServingRunner, code: ErrorCode): void {
    assert.throws(
      () => runner.run(generate(1), new AbortController().signal),
      (error: unknown) => error instanceof ShoalError && error.code === code,
      `a new request is refused with ${code}`,
    );
  }

  function completionTokens(events: TaskEvent[]): number {
    const end = events.at(-1);
    assert.equal(end?.type, 'end', `last event: ${JSON.stringify(end)}`);
    return (end as Extract<TaskEvent, { type: 'end' }>).usage.completionTokens;
  }

  async function eventually(check: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      assert.ok(Date.now() < deadline, `not within ${timeoutMs} ms: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  function gone(pid: number): boolean {
    try {
      process.kill(pid, 0);
      return false;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === 'ESRCH';
    }
  }

  const options = { skip: suite.skip, timeout: suite.timeoutMs ?? 120_000 };

  describe(`${name} keeps the runner contract`, options, () => {
    test('it starts, loads and reports ready with its slots', () =>
      withRunner({ slots: 2 }, async (runner) => {
        assert.equal(runner.status().state, 'starting');
        await runner.whenReady();
        const status = runner.status();
        assert.equal(status.state, 'ready');
        assert.equal(status.reason, null);
        assert.ok(status.pid !== null && status.pid > 0, `pid ${status.pid}`);
        assert.equal(status.sequences, 2);
        assert.ok(status.contextSize !== null && status.contextSize > 0);
        assert.deepEqual({ restarts: status.restarts, inFlight: status.inFlight, queued: status.queued }, { restarts: 0, inFlight: 0, queued: 0 });
      }));

    test('waiting for ready with a signal already aborted is CANCELLED at once, while it starts', () =>
      withRunner({}, async (runner) => {
        assert.equal(runner.status().state, 'starting');
        await fails(runner.whenReady(AbortSignal.abort()), 'CANCELLED');
        await runner.whenReady();
      }));

    test('a generation streams a start, text, and an end with its usage', () =>
      withRunner({}, async (runner) => {
        await runner.whenReady();
        const events = await collect(runner, 8);
        const start = events[0];
        assert.equal(start?.type, 'start');
        const promptTokens = (start as Extract<TaskEvent, { type: 'start' }>).promptTokens;
        assert.ok(promptTokens > 1);
        const middle = events.slice(1, -1);
        assert.ok(middle.length > 0 && middle.every((event) => event.type === 'text'), JSON.stringify(middle));
        assert.match(middle.map((event) => (event.type === 'text' ? event.text : '')).join(''), /\S/);
        assert.deepEqual(events.at(-1), { type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens, completionTokens: 8 } });
        assert.equal(runner.status().inFlight, 0);
      }));

    test('llama.cpp\'s samplers are honoured: top_k 1 or min_p 1 sample the greedy answer; a repetition penalty changes it', () =>
      withRunner({}, async (runner) => {
        await runner.whenReady();
        const tokens = 32;
        const greedy = await answer(runner, tokens, {});
        const hot = { temperature: 1, seed: 11 };
        // Without a restriction, temperature 1 samples something else (the precondition of the next two).
        assert.notEqual(await answer(runner, tokens, hot), greedy, 'temperature 1 samples away from the greedy answer');
        assert.equal(await answer(runner, tokens, { ...hot, topK: 1 }), greedy, 'top_k 1 keeps only the most likely token');
        assert.equal(await answer(runner, tokens, { ...hot, minP: 1 }), greedy, 'min_p 1 keeps only the most likely token');
        const penalized = await answer(runner, tokens, { repeatPenalty: 10 });
        assert.notEqual(penalized, greedy, 'a strong repetition penalty changes the greedy answer');
        assert.equal(await answer(runner, tokens, { repeatPenalty: 10 }), penalized, 'deterministically');
        assert.equal(await answer(runner, tokens, { repeatPenalty: 10, repeatLastN: 0 }), greedy, 'a window of 0 tokens penalizes nothing');
      }));

    test('cancelling mid-stream ends the request with CANCELLED and frees its slot for the next one', () =>
      withRunner({ slots: 1 }, async (runner) => {
        await runner.whenReady();
        const controller = new AbortController();
        await fails(
          collect(runner, null, (_event, texts) => texts === 3 && controller.abort(), controller.signal),
          'CANCELLED',
        );
        await eventually(() => runner.status().inFlight === 0 && runner.status().queued === 0, 'the cancelled request lets go of its slot');
        // One slot: the next request can only run in the one the cancelled request held.
        assert.equal(completionTokens(await collect(runner, 4)), 4);
      }));

    test('a task too deep to serialize ends with a ShoalError or an answer, and gives its slot back', () =>
      withRunner({ slots: 1 }, async (runner) => {
        await runner.whenReady();
        // Nested past what JSON.stringify can recurse through: an engine that hands tasks over as
        // JSON throws mid-send; one that never serializes the schema may answer.
        let parameters: Record<string, unknown> = { type: 'string' };
        for (let level = 0; level < 20_000; level += 1) parameters = { type: 'array', items: parameters };
        const task: InferenceTask = { ...generate(4), tools: [{ name: 'deep', parameters }] };
        for (let attempt = 0; attempt < 2; attempt += 1) {
          try {
            for await (const event of runner.run(task, new AbortController().signal)) void event;
          } catch (error) {
            assert.ok(error instanceof ShoalError, `expected a ShoalError, got ${String(error)}`);
          }
        }
        assert.deepEqual({ inFlight: runner.status().inFlight, queued: runner.status().queued }, { inFlight: 0, queued: 0 });
        // One slot: a leaked one would leave this request queued forever.
        assert.equal(completionTokens(await collect(runner, 4)), 4);
      }));

    test('as many concurrent requests as slots all run at once and complete', () =>
      withRunner({ slots: 2 }, async (runner) => {
        await runner.whenReady();
        let maxInFlight = 0;
        const sample = (): void => void (maxInFlight = Math.max(maxInFlight, runner.status().inFlight));
        const all = Promise.all([0, 1].map(() => collect(runner, 32, sample)));
        const submitted = runner.status();
        assert.equal(submitted.inFlight + submitted.queued, 2);
        for (const events of await all) assert.equal(completionTokens(events), 32);
        assert.equal(maxInFlight, 2);
        assert.deepEqual({ inFlight: runner.status().inFlight, queued: runner.status().queued }, { inFlight: 0, queued: 0 });
      }));

    test('with one slot, waiting requests are admitted first in first out and hear their place as it moves up', () =>
      withRunner({ slots: 1 }, async (runner) => {
        await runner.whenReady();
        type Name = 'a' | 'b' | 'c' | 'd';
        const starts: Name[] = [];
        const positions: Record<Name, number[]> = { a: [], b: [], c: [], d: [] };
        const controllers: Record<Name, AbortController> = { a: new AbortController(), b: new AbortController(), c: new AbortController(), d: new AbortController() };
        // Each step waits on what the queue reported, never on time: c leaves once it and d heard
        // their first places (d moves up), a gives up the slot once d heard that and b its place
        // (b runs, d moves up). An engine may size a request before it reports: b's report may come last.
        const onQueued = (): void => {
          if (positions.c.length === 1 && positions.d.length === 1) controllers.c.abort();
          if (positions.d.length === 2 && positions.b.length === 1) controllers.a.abort();
        };
        const run = async (name: Name, maxTokens: number | null): Promise<TaskEvent[]> => {
          const events: TaskEvent[] = [];
          for await (const event of runner.run(generate(maxTokens), controllers[name].signal)) {
            events.push(TaskEvent.parse(event));
            if (event.type === 'start') starts.push(name);
            if (event.type === 'queued') {
              assert.equal(starts.includes(name), false, `${name} heard a queue position after its start`);
              positions[name].push(event.position);
              onQueued();
            }
          }
          return events;
        };
        // a holds the only slot, generating until cancelled, before the others arrive.
        const a = run('a', null);
        await eventually(() => starts.includes('a'), 'the first request starts');
        // Handled from the start: c fails while the test still waits on others.
        const [, b, , d] = await Promise.all([fails(a, 'CANCELLED'), run('b', 4), fails(run('c', 4), 'CANCELLED'), run('d', 4)]);
        assert.equal(completionTokens(b), 4);
        assert.equal(completionTokens(d), 4);
        assert.deepEqual(starts, ['a', 'b', 'd'], 'admitted in arrival order');
        assert.deepEqual(positions, { a: [], b: [1], c: [2], d: [3, 2, 1] });
        assert.deepEqual({ inFlight: runner.status().inFlight, queued: runner.status().queued }, { inFlight: 0, queued: 0 });
      }));

    test('killing its process fails the request in flight with RUNNER_CRASHED; it restarts and serves', () =>
      withRunner({ slots: 1 }, async (runner) => {
        await runner.whenReady();
        const pid = runner.status().pid!;
        await fails(
          collect(runner, null, (_event, texts) => texts === 3 && process.kill(pid, 'SIGKILL')),
          'RUNNER_CRASHED',
        );
        await runner.whenReady();
        const status = runner.status();
        assert.equal(status.state, 'ready');
        assert.equal(status.restarts, 1);
        assert.notEqual(status.pid, pid);
        assert.equal(completionTokens(await collect(runner, 3)), 3);
      }));

    test('an engine that stops producing tokens trips the watchdog the worker wraps it in: RUNNER_STALLED, restarted, serving again', () =>
      withRunner({ slots: 1 }, async (engine) => {
        // Wrapped as the worker wraps every runner it attaches, with a short silence limit (the
        // tiny model emits tokens many times a second, even on a loaded machine).
        const runner = new RecordedRunner(engine, { instanceId: 'compliance', modelId: suite.modelId, log: pino({ level: 'silent' }), stallTimeoutMs: 2000 }) as ServingRunner;
        try {
          await runner.whenReady();
          const pid = runner.status().pid!;
          // SIGSTOP freezes the engine's own process (its pid is its process group's): it holds its
          // slot and says nothing, as a hung engine does; the watchdog's SIGKILL ends it all the same.
          await fails(
            collect(runner, null, (_event, texts) => texts === 3 && process.kill(pid, 'SIGSTOP')),
            'RUNNER_STALLED',
          );
          await eventually(() => runner.status().state === 'ready' && runner.status().restarts === 1, 'it restarts through the crash path');
          assert.notEqual(runner.status().pid, pid);
          await eventually(() => gone(pid), 'the stopped engine process is gone');
          assert.equal(completionTokens(await collect(runner, 3)), 3);
          assert.equal(runner.status().inFlight, 0);
          const recorded = runner as RecordedRunner;
          recorded.observe();
          const entries = recorded.recorder.entries();
          const stalled = entries.find((entry) => entry.phase === 'stalled');
          assert.ok(stalled?.requestId, JSON.stringify(entries));
          assert.deepEqual(
            entries.filter((entry) => entry.requestId === stalled.requestId).map((entry) => entry.phase),
            ['queued', 'prefill', 'decode', 'stalled'],
          );
          const processPhases = entries.filter((entry) => entry.requestId === null).map((entry) => entry.phase);
          assert.deepEqual(processPhases.slice(0, 2), ['loading', 'ready']);
          assert.ok(processPhases.includes('crashed') && processPhases.includes('restarting'), `process phases: ${processPhases.join(', ')}`);
        } finally {
          await runner.stop();
        }
      }));

    test('repeated crashes open the circuit breaker: state failed, requests refused with MODEL_FAILED', () =>
      withRunner({ slots: 1, maxCrashes: 2 }, async (runner) => {
        await runner.whenReady();
        const first = runner.status().pid!;
        process.kill(first, 'SIGKILL');
        await eventually(() => runner.status().state === 'ready' && runner.status().restarts === 1, 'it restarts after the first crash');
        process.kill(runner.status().pid!, 'SIGKILL');
        await eventually(() => runner.status().state === 'failed', 'the breaker opens at the second crash');
        const status = runner.status();
        assert.match(status.reason ?? '', /gave up after 2 crashes/);
        assert.equal(status.restarts, 1);
        assert.equal(status.pid, null);
        await fails(runner.whenReady(), 'MODEL_FAILED');
        refuses(runner, 'MODEL_FAILED');
      }));

    test('stop ends the request in flight with RUNNER_STOPPED, ends the process and refuses new requests', () =>
      withRunner({ slots: 1 }, async (runner) => {
        await runner.whenReady();
        const pid = runner.status().pid!;
        let streaming!: () => void;
        const started = new Promise<void>((resolve) => (streaming = resolve));
        const running = fails(
          collect(runner, null, (event) => event.type === 'text' && streaming()),
          'RUNNER_STOPPED',
        );
        // A stream that fails before its first text fails the case here rather than at the timeout.
        await Promise.race([started, running]);
        await runner.stop();
        await running;
        assert.equal(runner.status().state, 'stopped');
        refuses(runner, 'RUNNER_STOPPED');
        await fails(runner.whenReady(), 'RUNNER_STOPPED');
        await eventually(() => gone(pid), 'the engine process is gone');
      }));
  });
}
