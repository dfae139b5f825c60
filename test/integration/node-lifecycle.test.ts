import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import OpenAI, { APIError } from 'openai';
import { findEngine } from '../../src/doctor/engines.js';
import { startTestNode, type TestNode } from '../support/node-process.js';
import { processAlive } from '../support/wait.js';

interface HealthModel {
  id: string;
  backend: string;
  state: string;
  reason: string | null;
  pid: number | null;
  restarts: number;
  inFlight: number;
}
interface Health {
  ok: boolean;
  reason: string | null;
  models: HealthModel[];
}

async function health(node: TestNode): Promise<{ status: number; body: Health }> {
  const res = await fetch(`${node.url}/healthz`);
  return { status: res.status, body: (await res.json()) as Health };
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await probe();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}


test('healthz is 200 with ok:true once the model serves', async () => {
  await using node = await startTestNode();
  const { status, body } = await health(node);
  assert.equal(status, 200);
  assert.equal(body.ok, true);
  assert.equal(body.models[0]!.id, 'shoal/tiny');
  assert.equal(body.models[0]!.state, 'ready');
});

test('a runner crash fails its open request, answers 503 while restarting, and the node recovers', async () => {
  await using node = await startTestNode();
  const client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const before = (await health(node)).body.models[0]!;
  assert.ok(before.pid);

  const stream = await client.chat.completions.create({
    model: 'shoal/tiny', messages: [{ role: 'user', content: 'long answer please' }], temperature: 0, max_tokens: 100_000, stream: true,
  });
  const iterator = stream[Symbol.asyncIterator]();
  await iterator.next();
  process.kill(before.pid, 'SIGKILL');
  await assert.rejects(async () => {
    for (let next = await iterator.next(); !next.done; next = await iterator.next());
  }, /crashed/);

  const restarting = await until('the restarting state', 2000, async () => {
    const h = await health(node);
    return h.body.models[0]!.state === 'restarting' ? h : undefined;
  });
  assert.equal(restarting.status, 503);
  assert.equal(restarting.body.ok, false);
  assert.match(restarting.body.reason!, /SIGKILL/);
  await assert.rejects(
    client.chat.completions.create({ model: 'shoal/tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    (error: unknown) => error instanceof APIError && error.status === 503 && error.code === 'model_loading',
  );

  const after = await until('recovery', 30_000, async () => {
    const h = await health(node);
    return h.status === 200 ? h.body.models[0]! : undefined;
  });
  assert.equal(after.restarts, 1);
  assert.notEqual(after.pid, before.pid);
  const res = await client.chat.completions.create({ model: 'shoal/tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3, temperature: 0 });
  assert.equal(res.usage!.completion_tokens, 3);
});

test('SIGTERM stops the node and its runner within 5 s', async () => {
  const node = await startTestNode();
  const pid = (await health(node)).body.models[0]!.pid!;
  const client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'x', maxRetries: 0 });
  // An open stream must not hold the stop up.
  const stream = await client.chat.completions.create({
    model: 'shoal/tiny', messages: [{ role: 'user', content: 'go' }], max_tokens: 100_000, stream: true,
  });
  await stream[Symbol.asyncIterator]().next();
  const result = await node.stop('SIGTERM');
  assert.equal(result.code, 0, node.output());
  assert.ok(result.ms < 5000, `stopped in ${result.ms} ms`);
  assert.equal(processAlive(pid), false, 'the runner is gone');
});

test('SIGINT stops the node cleanly too', async () => {
  const node = await startTestNode();
  const result = await node.stop('SIGINT');
  assert.equal(result.code, 0, node.output());
});

test('a SIGINT while the node is still starting stops it cleanly once it is up', async () => {
  const node = await startTestNode({ waitReady: false });
  // The first line the node prints: it is starting, and its API may answer before startup is over.
  await until('the node to print its first line', 30_000, async () => (node.output().trim() !== '' ? true : undefined));
  const result = await node.stop('SIGINT');
  assert.equal(result.code, 0, node.output());
  assert.match(node.output(), /"msg":"stopping"/);
});

test('the runner exits when its node is killed', async () => {
  const node = await startTestNode();
  const pid = (await health(node)).body.models[0]!.pid!;
  await node.stop('SIGKILL');
  await until('the orphaned runner to exit', 5000, async () => (processAlive(pid) ? undefined : true));
});

test('logs are JSON lines when stdout is not a terminal', async () => {
  const node = await startTestNode();
  await node.stop();
  const lines = node.output().split('\n').filter((l) => l.trim() !== '');
  assert.ok(lines.length > 0);
  for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `not JSON: ${line}`);
  assert.ok(lines.some((l) => (JSON.parse(l) as { msg?: string }).msg?.includes('serving on')));
});

test('the EOS-capable model stops on its own with finish_reason stop', async () => {
  await using node = await startTestNode({ args: ['--default-model', 'shoal/tiny-eos'] });
  const client = new OpenAI({ baseURL: `${node.url}/v1`, apiKey: 'x', maxRetries: 0 });
  const res = await client.chat.completions.create({ model: 'shoal/tiny-eos', messages: [{ role: 'user', content: 'Hello!' }], temperature: 0, max_tokens: 200 });
  assert.equal(res.choices[0]!.finish_reason, 'stop');
  assert.ok(res.usage!.completion_tokens < 200);
  assert.ok(res.choices[0]!.message.content!.length > 0);
});

test('the default model serves through llama-server when it is built, node-llama-cpp when --engine llama_cpp says so', { skip: (await findEngine('llama-server')) === null ? 'llama-server is not built: run `shoal doctor --fix`' : false }, async () => {
  for (const [args, backend, program] of [[[], 'llama_server-cpu', /llama-server$/], [['--engine', 'llama_cpp'], 'llama_cpp-cpu', /node$/]] as const) {
    await using node = await startTestNode({ args: [...args, '--gpu', 'false'] });
    const model = (await health(node)).body.models[0]!;
    assert.equal(model.backend, backend);
    assert.match(readFileSync(`/proc/${model.pid!}/cmdline`, 'utf8').split('\0')[0]!, program);
    const state = (await (await fetch(`${node.url}/state`)).json()) as { models: Array<{ backend: string }> };
    assert.equal(state.models[0]!.backend, backend);
    assert.match(node.output(), new RegExp(`default model shoal/tiny serves through ${backend.replace('-cpu', '')}`));
  }
});

test('bad command-line options exit 2 with a message', async () => {
  const node = await startTestNode({ args: ['--threads', 'many'], waitReady: false });
  const result = await node.exited;
  await node.stop();
  assert.equal(result.code, 2);
  assert.match(node.output(), /--threads must be a positive integer/);
  const engine = await startTestNode({ args: ['--engine', 'vllm'], waitReady: false });
  assert.equal((await engine.exited).code, 2);
  await engine.stop();
  assert.match(engine.output(), /--engine \(or SHOAL_ENGINE\) must be auto, llama_server, llama_cpp/);
});
