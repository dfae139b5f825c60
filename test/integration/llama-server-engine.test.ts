// The `llama_server` and `rpc` engines with the real binaries (llama-server, ggml-rpc-server built by
// `shoal doctor --fix`) and the generated tiny model, one thread each: streamed text and chat,
// determinism, cancellation, FIFO token reservations under a burst, the one-slot limit, crash and
// restart, and a pooled split over two RPC donors answering token for token like one process.

import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { ShoalError } from '../../src/common/errors.js';
import type { Logger } from '../../src/common/log.js';
import { resolveBuiltinModel } from '../../src/models/builtin-store.js';
import { TaskEvent, type InferenceTask, type RunnerTask } from '../../src/wire/task.js';
import { LlamaServerRunner, type LlamaServerRunnerOptions } from '../../src/worker/engines/llama-server.js';
import { engineRecordDir } from '../../src/worker/engines/orphans.js';
import { RpcDonor } from '../../src/worker/engines/rpc-donor.js';
import { RunnerSupervisor } from '../../src/worker/runner/supervisor.js';
import { builtEngines } from '../support/engines.js';

const found = await builtEngines();
const skip = typeof found === 'string' ? found : false;
const serverBinary = typeof found === 'string' ? '' : found.server;
const rpcBinary = typeof found === 'string' ? '' : found.rpc;

let dir: string;
let dataDir: string;
let modelPath: string;

/** Log lines, kept for assertions (llama-server's own output arrives at debug level). */
const logLines: Array<{ level: number; msg: string; enginePid?: number }> = [];
const log: Logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(JSON.parse(line) as (typeof logLines)[number]) });

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-llama-server-'));
  dataDir = join(dir, 'data');
  modelPath = (await resolveBuiltinModel('shoal/tiny', join(dir, 'models')))!.path;
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function runner(options: Partial<LlamaServerRunnerOptions> = {}): LlamaServerRunner {
  return new LlamaServerRunner({
    binaryPath: serverBinary,
    modelPath,
    dataDir,
    log,
    threads: 1,
    contextTokens: 256,
    parallel: 2,
    initialBackoffMs: 100,
    ...options,
  });
}

function generate(prompt: InferenceTask['prompt'], maxTokens: number | null, extra: Partial<InferenceTask> = {}): InferenceTask {
  return {
    kind: 'generate',
    model: 'shoal/tiny',
    prompt,
    sampling: { maxTokens, temperature: 0, topP: 1, seed: null, presencePenalty: 0, frequencyPenalty: 0 },
    stop: [],
    tools: [],
    toolChoice: { mode: 'auto' },
    format: { kind: 'text' },
    logprobs: null,
    ...extra,
  };
}

const TEXT: InferenceTask['prompt'] = { kind: 'text', text: 'Once upon a time there was a' };
const CHAT: Extract<InferenceTask['prompt'], { kind: 'chat' }> = {
  kind: 'chat',
  messages: [
    { role: 'system', content: 'You are a test.' },
    { role: 'user', content: 'Tell me a story.' },
  ],
};

async function collect(events: AsyncIterable<TaskEvent>): Promise<TaskEvent[]> {
  const out: TaskEvent[] = [];
  for await (const event of events) out.push(TaskEvent.parse(event));
  return out;
}

function textOf(events: TaskEvent[]): string {
  return events.map((e) => (e.type === 'text' ? e.text : '')).join('');
}

function endOf(events: TaskEvent[]): Extract<TaskEvent, { type: 'end' }> {
  const end = events.at(-1);
  assert.equal(end?.type, 'end', `last event: ${JSON.stringify(end)}`);
  return end as Extract<TaskEvent, { type: 'end' }>;
}

async function run(r: LlamaServerRunner, task: RunnerTask): Promise<TaskEvent[]> {
  return collect(r.run(task, new AbortController().signal));
}

async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `not true within ${timeoutMs} ms: ${check.toString()}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function expectError(promise: Promise<unknown>, code: string): Promise<ShoalError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof ShoalError, `expected a ShoalError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`expected ${code}, but it succeeded`);
}

describe('LlamaServerRunner', { skip, timeout: 300_000 }, () => {
  let shared: LlamaServerRunner;

  before(async () => {
    shared = runner();
    await shared.whenReady();
  });

  after(async () => {
    await shared?.stop();
  });

  test('a text completion streams start, text and an end with usage', async () => {
    const status = shared.status();
    assert.equal(status.state, 'ready');
    assert.equal(status.contextSize, 256);
    assert.equal(status.sequences, 2);
    assert.equal(status.gpu, false);
    assert.equal(status.model?.architecture, 'llama');
    assert.ok(status.pid);

    const events = await run(shared, generate(TEXT, 12));
    assert.equal(events[0]?.type, 'start');
    const promptTokens = (events[0] as { promptTokens: number }).promptTokens;
    assert.ok(promptTokens > 1);
    assert.match(textOf(events), /\S/);
    const end = endOf(events);
    // shoal/tiny never chooses end-of-text, so it runs to the limit.
    assert.deepEqual(end, { type: 'end', finishReason: 'length', stopSequence: null, usage: { promptTokens, completionTokens: 12 } });
  });

  test('a chat streams through the model template and ends with usage', async () => {
    const events = await run(shared, generate(CHAT, 10));
    const start = events[0] as { type: string; promptTokens: number };
    assert.equal(start.type, 'start');
    const end = endOf(events);
    assert.equal(end.finishReason, 'length');
    assert.deepEqual(end.usage, { promptTokens: start.promptTokens, completionTokens: 10 });
    assert.match(textOf(events), /\S/);
    assert.ok(!textOf(events).includes('<|im_'), 'control tokens leaked into the answer');

    // Counting renders the same prompt without generating.
    const counted = await run(shared, { kind: 'count', model: 'shoal/tiny', prompt: CHAT, tools: [] });
    assert.deepEqual(counted, [
      { type: 'start', promptTokens: start.promptTokens },
      { type: 'end', finishReason: 'stop', stopSequence: null, usage: { promptTokens: start.promptTokens, completionTokens: 0 } },
    ]);
  });

  test("a conversation's next turn reports the prompt tokens the slot's cache already held, on chat and on text", async () => {
    const first = await run(shared, generate(CHAT, 8));
    const next: InferenceTask['prompt'] = {
      kind: 'chat',
      messages: [...CHAT.messages, { role: 'assistant', content: textOf(first) }, { role: 'user', content: 'And then?' }],
    };
    const events = await run(shared, generate(next, 4));
    const { usage } = endOf(events);
    assert.equal(usage.promptTokens, (events[0] as { promptTokens: number }).promptTokens);
    const firstPrompt = endOf(first).usage.promptTokens;
    assert.ok(usage.cachedPromptTokens !== undefined && usage.cachedPromptTokens >= firstPrompt / 2, `${usage.cachedPromptTokens} cached of the first turn's ${firstPrompt}`);
    assert.ok(usage.cachedPromptTokens < usage.promptTokens, `${usage.cachedPromptTokens} of ${usage.promptTokens}`);

    const opening = await run(shared, generate(TEXT, 6));
    const longer = await run(shared, generate({ kind: 'text', text: `${TEXT.text}${textOf(opening)} and then` }, 2));
    const textUsage = endOf(longer).usage;
    assert.ok(textUsage.cachedPromptTokens !== undefined && textUsage.cachedPromptTokens >= endOf(opening).usage.promptTokens / 2, JSON.stringify(textUsage));
    assert.ok(textUsage.cachedPromptTokens < textUsage.promptTokens);
  });

  test('greedy output is the same on every run, and a matched stop sequence is reported', async () => {
    const first = textOf(await run(shared, generate(TEXT, 16)));
    const second = textOf(await run(shared, generate(TEXT, 16)));
    assert.equal(second, first);
    const chatFirst = textOf(await run(shared, generate(CHAT, 16)));
    assert.equal(textOf(await run(shared, generate(CHAT, 16))), chatFirst);

    // Stop at the third word of the known answer.
    const words = first.trim().split(/\s+/);
    assert.ok(words.length >= 3, first);
    const stop = ` ${words[2]}`;
    const stopped = await run(shared, generate(TEXT, 16, { stop: [stop, 'never-there'] }));
    const end = endOf(stopped);
    assert.equal(end.finishReason, 'stop');
    assert.equal(end.stopSequence, stop);
    assert.equal(textOf(stopped), first.slice(0, first.indexOf(stop)));
  });

  test('log probabilities come with the text they cover', async () => {
    const events = await run(shared, generate(TEXT, 4, { logprobs: { top: 2 } }));
    const texts = events.filter((e): e is Extract<TaskEvent, { type: 'text' }> => e.type === 'text');
    const logprobs = texts.flatMap((e) => e.logprobs ?? []);
    assert.equal(logprobs.length, 4);
    for (const entry of logprobs) {
      assert.ok(entry.logprob <= 0);
      assert.equal(entry.top.length, 2);
      // Greedy: the chosen token is the most likely one.
      assert.equal(entry.top[0]!.token, entry.token);
    }
    assert.equal(logprobs.map((e) => e.token).join(''), textOf(events));
  });

  test('a prompt longer than one slot fails at once with a typed error that says the limit', async () => {
    const long = { kind: 'text', text: 'the cat sat on the mat '.repeat(100) } as const;
    const error = await expectError(run(shared, generate(long, 8)), 'CONTEXT_OVERFLOW');
    assert.match(error.message, /context holds 256/);
    assert.equal(error.param, 'prompt');
    // The server is fine afterwards.
    assert.equal(endOf(await run(shared, generate(TEXT, 2))).finishReason, 'length');
  });

  test('a chat longer than one slot, counted by the server alongside the generation, fails with the same typed error', async () => {
    const long: InferenceTask['prompt'] = { kind: 'chat', messages: [{ role: 'user', content: 'the cat sat on the mat '.repeat(100) }] };
    const error = await expectError(run(shared, generate(long, 8)), 'CONTEXT_OVERFLOW');
    assert.match(error.message, /^the prompt is \d+ tokens but the model's context holds 256/);
    assert.equal(error.param, 'messages');
    assert.deepEqual({ inFlight: shared.status().inFlight, queued: shared.status().queued }, { inFlight: 0, queued: 0 });
  });

  test('a chat without a token limit is cut where the slot is full, with the length reason, as a counted one is', async () => {
    const events = await run(shared, generate(CHAT, null));
    const start = events[0] as { type: 'start'; promptTokens: number };
    // The same chat ran before: its prompt is in a slot's cache, which only cachedPromptTokens tells.
    assert.deepEqual((withoutCacheCount(endOf(events)) as { usage: unknown }).usage, { promptTokens: start.promptTokens, completionTokens: 256 - start.promptTokens });
    assert.equal(endOf(events).finishReason, 'length');
  });

  test('embeddings are refused by an instance started without them', async () => {
    assert.throws(
      () => shared.run({ kind: 'embed', model: 'shoal/tiny', inputs: ['hello'], truncate: false, normalize: true }, new AbortController().signal),
      (e: unknown) => e instanceof ShoalError && e.code === 'CAPABILITY_MISSING',
    );
  });
});

describe('LlamaServerRunner under load and failure', { skip, timeout: 300_000 }, () => {
  test('cancelling mid-stream stops the slot, and the next request is served', async () => {
    // One slot with the full trained context: the first request could run for 4000 tokens.
    await using r = runner({ parallel: 1, contextTokens: 4096 });
    await r.whenReady();
    const pid = r.status().pid;
    const controller = new AbortController();
    let texts = 0;
    await expectError(
      (async () => {
        for await (const event of r.run(generate(TEXT, null), controller.signal)) {
          if (event.type === 'text' && ++texts === 3) controller.abort();
        }
      })(),
      'CANCELLED',
    );
    const next = await run(r, generate(TEXT, 5));
    assert.equal(endOf(next).usage.completionTokens, 5);
    // llama-server logs each slot's release with the tokens it held: the cancelled one stopped far
    // short of its 4000-token limit.
    const releases = (): number[] =>
      logLines.filter((line) => line.enginePid === pid && /stop processing: n_tokens = \d+/.test(line.msg)).map((line) => Number(/n_tokens = (\d+)/.exec(line.msg)![1]));
    // The server's log lines arrive on their own pipe, possibly after the answer.
    await eventually(() => releases().length >= 2);
    assert.ok(releases()[0]! < 2000, `the cancelled slot held ${releases()[0]} tokens`);
    assert.equal(r.status().inFlight, 0);
  });

  test('a burst of long requests on a small KV budget is served first in, first out, without errors', async () => {
    // Two slots but KV for one long request: 2 x (prompt + 200) does not fit in 300.
    await using r = runner({ parallel: 2, contextTokens: 256, kvTokens: 300 });
    await r.whenReady();
    const N = 6;
    const order: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const results = Array.from({ length: N }, (_, i) =>
      (async () => {
        const events: TaskEvent[] = [];
        for await (const event of r.run(generate({ kind: 'text', text: `Story number ${i}:` }, 200), new AbortController().signal)) {
          if (event.type === 'start') {
            order.push(`start ${i}`);
            maxRunning = Math.max(maxRunning, ++running);
          }
          if (event.type === 'end') running--;
          events.push(event);
        }
        return events;
      })(),
    );
    // All six are queued or running right after submission.
    const status = r.status();
    assert.equal(status.inFlight + status.queued, N);
    const all = await Promise.all(results);
    for (const events of all) assert.equal(endOf(events).usage.completionTokens, 200);
    assert.deepEqual(order, Array.from({ length: N }, (_, i) => `start ${i}`));
    assert.equal(maxRunning, 1, 'two long requests ran at once on KV for one');
    assert.deepEqual({ inFlight: r.status().inFlight, queued: r.status().queued }, { inFlight: 0, queued: 0 });

    // Short requests fit side by side in the same budget.
    const short = await Promise.all([0, 1].map(() => run(r, generate(TEXT, 4))));
    for (const events of short) assert.equal(endOf(events).finishReason, 'length');
  });

  test('chats on a small KV budget: one takes a free slot before it is counted, the rest are counted and queue first in, first out', async () => {
    await using r = runner({ parallel: 2, contextTokens: 256, kvTokens: 300 });
    await r.whenReady();
    const N = 4;
    const order: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const chat = (i: number): InferenceTask => generate({ kind: 'chat', messages: [{ role: 'user', content: `Story number ${i}:` }] }, 200);
    const all = await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const events: TaskEvent[] = [];
        for await (const event of r.run(chat(i), new AbortController().signal)) {
          if (event.type === 'start') {
            order.push(`start ${i}`);
            maxRunning = Math.max(maxRunning, ++running);
          }
          if (event.type === 'end') running--;
          events.push(event);
        }
        return events;
      }),
    );
    for (const [i, events] of all.entries()) {
      // Those that queued heard their place first.
      const start = events.find((event) => event.type === 'start')!;
      const counted = await run(r, { kind: 'count', model: 'shoal/tiny', prompt: chat(i).prompt, tools: [] });
      assert.deepEqual((withoutCacheCount(endOf(events)) as { usage: unknown }).usage, { promptTokens: (counted[0] as { promptTokens: number }).promptTokens, completionTokens: 200 });
      assert.equal(start.promptTokens, endOf(events).usage.promptTokens);
    }
    assert.deepEqual(order, Array.from({ length: N }, (_, i) => `start ${i}`));
    assert.equal(maxRunning, 1, 'two long chats ran at once on KV for one');

    // Once the server has said how long the first prompt is, its whole-slot reservation shrinks and a short chat runs beside it.
    let maxShort = 0;
    const short = await Promise.all(
      [0, 1].map(async () => {
        const events: TaskEvent[] = [];
        for await (const event of r.run(generate(CHAT, 64), new AbortController().signal)) {
          maxShort = Math.max(maxShort, r.status().inFlight);
          events.push(event);
        }
        return events;
      }),
    );
    for (const events of short) assert.equal(endOf(events).usage.completionTokens, 64);
    assert.equal(maxShort, 2, 'the short chats did not run side by side');
  });

  test('kill -9 of llama-server fails the request in flight with a typed error, then it restarts and serves', async () => {
    await using r = runner({ parallel: 1, contextTokens: 4096 });
    await r.whenReady();
    const pid = r.status().pid!;
    await eventually(async () => (await readdir(engineRecordDir(dataDir))).includes(`${pid}.json`));
    let texts = 0;
    const error = await expectError(
      (async () => {
        for await (const event of r.run(generate(TEXT, null), new AbortController().signal)) {
          if (event.type === 'text' && ++texts === 3) process.kill(pid, 'SIGKILL');
        }
      })(),
      'RUNNER_CRASHED',
    );
    assert.match(error.message, /SIGKILL/);
    await r.whenReady();
    const status = r.status();
    assert.equal(status.state, 'ready');
    assert.equal(status.restarts, 1);
    assert.notEqual(status.pid, pid);
    assert.equal(endOf(await run(r, generate(TEXT, 3))).usage.completionTokens, 3);
    // The dead process's record is gone; the new one's is there.
    await eventually(async () => {
      const records = await readdir(engineRecordDir(dataDir));
      return !records.includes(`${pid}.json`) && records.includes(`${status.pid}.json`);
    });
  });

  test('stop ends queued and running requests with RUNNER_STOPPED and kills the process', async () => {
    const r = runner({ parallel: 1, contextTokens: 4096 });
    await r.whenReady();
    const pid = r.status().pid!;
    const running = expectError(collect(r.run(generate(TEXT, null), new AbortController().signal)), 'RUNNER_STOPPED');
    const queued = expectError(collect(r.run(generate(TEXT, 5), new AbortController().signal)), 'RUNNER_STOPPED');
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual({ inFlight: r.status().inFlight, queued: r.status().queued }, { inFlight: 1, queued: 1 });
    await r.stop();
    await running;
    await queued;
    assert.equal(r.status().state, 'stopped');
    assert.throws(() => process.kill(pid, 0), /ESRCH/);
    assert.ok(!(await readdir(engineRecordDir(dataDir))).includes(`${pid}.json`));
    assert.throws(() => r.run(generate(TEXT, 1), new AbortController().signal), (e: unknown) => e instanceof ShoalError && e.code === 'RUNNER_STOPPED');
  });
});

/** The prompt tokens an engine found in its cache depend on what it served before, not on the answer. */
function withoutCacheCount(event: TaskEvent | undefined): unknown {
  if (event?.type !== 'end') return event;
  const { cachedPromptTokens: _cached, ...usage } = event.usage;
  return { ...event, usage };
}

describe('the llama_server engine answers like the llama_cpp engine', { skip, timeout: 300_000 }, () => {
  // The same model and request on either engine give the same text, reasoning, finish reason, stop
  // sequence and usage: a pooled split (llama-server) must match a single node (node-llama-cpp).
  for (const id of ['shoal/tiny-eos', 'shoal/tiny-think']) {
    test(id, async () => {
      const path = (await resolveBuiltinModel(id, join(dir, 'models')))!.path;
      await using server = runner({ modelPath: path, parallel: 1 });
      await using supervisor = new RunnerSupervisor({ log, config: { modelPath: path, contextSize: 256, sequences: 1, threads: 1, gpu: false } });
      await Promise.all([server.whenReady(), supervisor.whenReady()]);
      const summary = (events: TaskEvent[]): unknown => ({
        start: events[0],
        text: textOf(events),
        reasoning: events.map((e) => (e.type === 'reasoning' ? e.text : '')).join(''),
        end: withoutCacheCount(events.at(-1)),
      });
      const tasks: RunnerTask[] = [generate(TEXT, 40), generate(CHAT, 40), { kind: 'count', model: id, prompt: CHAT, tools: [] }];
      const plain = textOf(await collect(supervisor.run(generate(CHAT, 40), new AbortController().signal)));
      const words = plain.trim().split(/\s+/);
      if (words.length >= 3) tasks.push(generate(CHAT, 40, { stop: [` ${words[2]}`] }));
      for (const task of tasks) {
        const viaServer = summary(await run(server, task));
        const viaNodeLlamaCpp = summary(await collect(supervisor.run(task, new AbortController().signal)));
        assert.deepEqual(viaServer, viaNodeLlamaCpp, JSON.stringify(task));
      }
    });
  }
});

describe('LlamaServerRunner serving embeddings', { skip, timeout: 120_000 }, () => {
  test('one vector per input, unit length when asked, equal for equal inputs; too long is refused unless truncation is allowed', async () => {
    await using r = runner({ embeddings: true, contextTokens: 64 });
    await r.whenReady();
    const inputs = ['the cat sat', 'on the mat', 'the cat sat', 'a much longer sentence about nothing at all'];
    const events = await run(r, { kind: 'embed', model: 'shoal/tiny', inputs, truncate: false, normalize: true });
    assert.equal(events[0]?.type, 'start');
    const vectors = (events.find((e) => e.type === 'embeddings') as { vectors: number[][] }).vectors;
    assert.equal(vectors.length, inputs.length);
    for (const vector of vectors) {
      assert.equal(vector.length, 64);
      assert.ok(Math.abs(Math.hypot(...vector) - 1) < 1e-5);
    }
    assert.deepEqual(vectors[2], vectors[0]);
    assert.notDeepEqual(vectors[1], vectors[0]);
    const end = endOf(events);
    assert.equal(end.usage.promptTokens, (events[0] as { promptTokens: number }).promptTokens);

    const long = 'word '.repeat(200);
    await expectError(run(r, { kind: 'embed', model: 'shoal/tiny', inputs: [long], truncate: false, normalize: true }), 'CONTEXT_OVERFLOW');
    const cut = await run(r, { kind: 'embed', model: 'shoal/tiny', inputs: [long], truncate: true, normalize: false });
    assert.equal(endOf(cut).usage.promptTokens, 64);
    // Generation still works on an instance started for embeddings.
    assert.equal(endOf(await run(r, generate(TEXT, 3))).usage.completionTokens, 3);
  });
});

describe('LlamaServerRunner that cannot start', { skip, timeout: 120_000 }, () => {
  test('a model llama-server cannot load crashes each start; after maxCrashes the breaker gives up with the reason', async () => {
    const bad = join(dir, 'not-a-model.gguf');
    await writeFile(bad, 'this is not a GGUF file');
    await using r = runner({ modelPath: bad, maxCrashes: 3, initialBackoffMs: 10 });
    // Queued while loading: it waits through the restarts and fails with the breaker.
    const queued = expectError(collect(r.run(generate(TEXT, 2), new AbortController().signal)), 'MODEL_FAILED');
    const failure = await expectError(r.whenReady(), 'MODEL_FAILED');
    assert.match(failure.message, /gave up after 3 crashes/);
    assert.match(failure.message, /llama-server exited with exit code \d+: .*(fail|error)/i);
    await queued;
    const status = r.status();
    assert.equal(status.state, 'failed');
    assert.equal(status.restarts, 2);
    assert.equal(status.pid, null);
    assert.throws(() => r.run(generate(TEXT, 1), new AbortController().signal), (e: unknown) => e instanceof ShoalError && e.code === 'MODEL_FAILED');
  });

  test('a missing binary fails at once and says how to build it', async () => {
    await using r = runner({ binaryPath: join(dir, 'no-such-llama-server') });
    const failure = await expectError(r.whenReady(), 'MODEL_FAILED');
    assert.match(failure.message, /shoal doctor --fix/);
  });
});

describe('pooled split over RPC donors', { skip, timeout: 300_000 }, () => {
  test('llama-server with two ggml-rpc-server donors answers greedy requests token for token like one process', async () => {
    const tasks = [generate(TEXT, 24), generate(CHAT, 24)];
    const alone: string[] = [];
    {
      await using local = runner();
      await local.whenReady();
      for (const task of tasks) alone.push(textOf(await run(local, task)));
    }
    await using donorA = new RpcDonor({ binaryPath: rpcBinary, dataDir, threads: 1, log });
    await using donorB = new RpcDonor({ binaryPath: rpcBinary, dataDir, threads: 1, log });
    await Promise.all([donorA.whenReady(), donorB.whenReady()]);
    assert.equal(donorA.status().state, 'ready');
    assert.ok(donorA.port && donorB.port && donorA.port !== donorB.port);
    await using pooled = runner({ rpcServers: [`127.0.0.1:${donorA.port}`, `127.0.0.1:${donorB.port}`], tensorSplit: '1,1' });
    await pooled.whenReady();
    const split: string[] = [];
    for (const task of tasks) split.push(textOf(await run(pooled, task)));
    assert.deepEqual(split, alone);

    // Both donors serve the driver: beyond the readiness probe's connection (accepted and closed at
    // once), llama-server connected, and its connection is still open.
    for (const donor of [donorA, donorB]) {
      const lines = logLines.filter((line) => line.enginePid === donor.status().pid && /client connection/.test(line.msg)).map((line) => line.msg);
      assert.ok(lines.filter((line) => /Accepted/.test(line)).length >= 2, lines.join(' | '));
      assert.match(lines.at(-1)!, /Accepted client connection/);
    }

    // One donor holding one of the model's two layers, the other on this process's CPU. A donor
    // serves one driver at a time, so the first driver goes first.
    await pooled.stop();
    await using half = runner({ rpcServers: [`127.0.0.1:${donorA.port}`], gpuLayers: 1 });
    await half.whenReady();
    const halfSplit: string[] = [];
    for (const task of tasks) halfSplit.push(textOf(await run(half, task)));
    assert.deepEqual(halfSplit, alone);
  });

  test('kill -9 of a donor mid-stream ends the request with a typed error; driver and donor come back and serve', async () => {
    await using donor = new RpcDonor({ binaryPath: rpcBinary, dataDir, threads: 1, log, initialBackoffMs: 100 });
    await donor.whenReady();
    await using driver = runner({ rpcServers: [`127.0.0.1:${donor.port}`], parallel: 1, contextTokens: 4096 });
    await driver.whenReady();
    const before = textOf(await run(driver, generate(TEXT, 8)));
    const donorPid = donor.status().pid!;
    let texts = 0;
    const started = Date.now();
    let killedAt = 0;
    const error = await expectError(
      (async () => {
        for await (const event of driver.run(generate(TEXT, null), new AbortController().signal)) {
          if (event.type === 'text' && ++texts === 3) {
            killedAt = Date.now();
            process.kill(donorPid, 'SIGKILL');
          }
        }
      })(),
      'RUNNER_CRASHED',
    );
    assert.ok(killedAt >= started);
    assert.match(error.message, /crashed|lost the connection/);
    await donor.whenReady();
    await driver.whenReady();
    assert.equal(textOf(await run(driver, generate(TEXT, 8))), before);
  });

  test('a donor that dies is restarted on the same port', async () => {
    await using donor = new RpcDonor({ binaryPath: rpcBinary, dataDir, threads: 1, log, initialBackoffMs: 100 });
    await donor.whenReady();
    const { pid } = donor.status();
    const port = donor.port;
    process.kill(pid!, 'SIGKILL');
    await eventually(() => donor.status().state !== 'ready');
    assert.equal(donor.port, null);
    await donor.whenReady();
    assert.equal(donor.status().restarts, 1);
    assert.notEqual(donor.status().pid, pid);
    assert.equal(donor.port, port);
  });
});
