import { spawn } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { findEngine } from '../src/doctor/engines.js';
import { measureReadBandwidth } from '../src/doctor/hardware.js';
import type { NodeId } from '../src/common/ids.js';
import { ModelCard } from '../src/models/cards/card.js';
import { readGgufFacts, type GgufFacts } from '../src/models/cards/gguf-facts.js';
import { TINY_MODEL_SPEC } from '../src/models/generate/builtin.js';
import { countParams, generateRandomModel } from '../src/models/generate/random-model.js';
import { planPlacement, tensorSplitArg, type Plan } from '../src/placement/planner.js';
import { NODE_RELAY_S } from '../src/placement/speed.js';
import { acceptsConnection } from '../src/worker/engines/rpc-donor.js';
import { freePort } from '../test/support/node-process.js';
import { benchPrompt, ensureBenchModel, ensureLlamaServer, intOption, liveGroups, log, machineInfo, printResult, sleep, startLlamaServer, startShoal, streamChat, versions, type BenchModel, type Server } from './common.js';
import { alternation, ratio, summarize } from './stats.js';

/**
 * Predicted against served decode tokens/s, for the shapes the planner offers. For each model (the
 * built-in shoal/tiny, ~20M and, without --quick, ~200M f16 generated random-weight models) the planner
 * plans it over nodes reporting this machine's bandwidth, measured now, and the plan's prediction is
 * compared with what real engines serve on this machine:
 *
 * - single, `llama_server-cpu` through the node: a real `shoal run` node serving the model as its
 *   default model on the managed llama-server (the default path where the engines are built), through
 *   the node's API: the whole path a user gets;
 * - single, `llama_cpp-cpu`: the same node with `--engine llama_cpp` (the in-process engine, which a
 *   node serves on until its engines are provisioned, and the planner offers where they are missing);
 * - single, `llama_server-cpu`: llama-server launched by hand with the node's threads;
 * - split (`min_nodes` 2, two nodes): llama-server `--rpc` over two local ggml-rpc-servers (a CPU driver
 *   reaches its own share through one too), with the plan's `--tensor-split`.
 *
 * No node relays the two hand-launched shapes' streams, so their predictions leave out the relay term
 * (speed.ts NODE_RELAY_S) and say so. Replicas are not run: each copy is a single placement on its own
 * node, and the plan shows the slowest copy's single figure. Served tok/s = (tokens of a long decode −
 * tokens of a short one) / (the difference of their end-to-end times), which cancels prompt processing
 * and the stream's first-chunk coalescing; medians over reps, the sides alternating in each rep.
 * Ratio = predicted / served; the target is every ratio within [0.5, 2]. Prints one JSON object.
 */

const BENCHMARK = 'prediction';
const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    threads: { type: 'string' },
    reps: { type: 'string' },
    tokens: { type: 'string' },
    'model-dir': { type: 'string', default: 'bench/models' },
  },
});
const quick = values.quick === true;
// The node's default: its physical cores (2 on the reference machine).
const threads = intOption('threads', values.threads, 2);
const reps = intOption('reps', values.reps, quick ? 3 : 5);
const longTokens = intOption('tokens', values.tokens, quick ? 96 : 160);
const shortTokens = 16;
const contextPerSlot = 512;
const ENGINE_READY_TIMEOUT_MS = 180_000;

async function tinyModel(dir: string): Promise<BenchModel> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, 'shoal-tiny.gguf');
  if (!existsSync(path)) await generateRandomModel(TINY_MODEL_SPEC, path);
  return { path, name: 'shoal-tiny', params: countParams(TINY_MODEL_SPEC), type: 'f32', bytes: statSync(path).size };
}

function planFor(model: BenchModel, facts: GgufFacts, backends: string[], bandwidth: number, minNodes: number): Plan {
  const card = ModelCard.parse({
    id: `bench/${model.name}`,
    name: model.name,
    source: { kind: 'file', path: model.path },
    tasks: ['chat'],
    compatible_backends: backends,
    backend_preference: [],
    runtime: { parallel: 1, context_size: contextPerSlot },
  });
  const nodes = [0, 1].map((n) => ({ nodeId: `12D3KooW${'P'.repeat(42)}A${n}` as NodeId, freeBytes: 64e9, backends: [...backends], memoryBandwidthBytesPerS: bandwidth }));
  const result = planPlacement({ card, facts, nodes }, { minNodes });
  if (!result.ok) throw new Error(`the planner refused ${model.name} (${backends.join(', ')}): ${result.error.message}`);
  return result.plan;
}

/** Spawns `binary` in its own process group (ended on any exit by common.ts). */
function launch(binary: string, args: string[]): { stop: () => void; exited: Promise<void> } {
  const child = spawn(binary, args, { stdio: 'ignore', detached: true });
  liveGroups.add(child.pid!);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    exited,
    stop: () => {
      if (!liveGroups.delete(child.pid!)) return;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    },
  };
}

async function until(what: string, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ENGINE_READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (await probe().catch(() => false)) return;
    await sleep(100);
  }
  throw new Error(`${what} was not ready within ${ENGINE_READY_TIMEOUT_MS} ms`);
}

/** llama-server --rpc over two ggml-rpc-servers, split as the plan says. */
async function startSplit(server: string, rpc: string, model: BenchModel, plan: Plan): Promise<Server> {
  const engines: { stop: () => void }[] = [];
  const stop = async (): Promise<void> => {
    for (const e of engines) e.stop();
  };
  try {
    const ports = [await freePort(), await freePort()];
    for (const port of ports) {
      engines.push(launch(rpc, ['-H', '127.0.0.1', '-p', String(port), '-t', String(threads)]));
      await until(`ggml-rpc-server on ${port}`, () => acceptsConnection(port));
    }
    const port = await freePort();
    const args = ['-m', model.path, '--host', '127.0.0.1', '--port', String(port), '-t', String(threads), '-tb', String(threads), '-np', '1', '-c', String(contextPerSlot), '-ngl', '999', '--rpc', ports.map((p) => `127.0.0.1:${p}`).join(','), '--tensor-split', tensorSplitArg(plan)!, '--no-webui'];
    engines.push(launch(server, args));
    const url = `http://127.0.0.1:${port}`;
    await until('llama-server --rpc', async () => (await fetch(`${url}/health`)).status === 200);
    return { url, modelId: model.name, pid: 0, engine: 'llama-server --rpc', stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function endToEndMs(server: Server, n: number, tokens: number): Promise<{ ms: number; tokens: number }> {
  const start = performance.now();
  const sample = await streamChat(server, benchPrompt(n), tokens);
  return { ms: performance.now() - start, tokens: sample.tokens };
}

interface Side {
  shape: string;
  backend: string;
  server: Server;
  plan: Plan;
  relayed: boolean;
}

async function measure(sides: Side[]): Promise<Record<string, unknown>[]> {
  let n = 0;
  for (const side of sides) await streamChat(side.server, benchPrompt(n++), shortTokens);
  const rates = new Map<Side, number[]>(sides.map((s) => [s, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const side of alternation(sides, rep)) {
      const short = await endToEndMs(side.server, n++, shortTokens);
      const long = await endToEndMs(side.server, n++, longTokens);
      rates.get(side)!.push((long.tokens - short.tokens) / ((long.ms - short.ms) / 1000));
    }
  }
  return sides.map((side) => {
    const served = summarize(rates.get(side)!);
    const planned = side.plan.predictedDecodeTokPerS;
    const predicted = planned === null ? null : side.relayed ? planned : 1 / (1 / planned - NODE_RELAY_S);
    return {
      shape: side.shape,
      backend: side.backend,
      servedBy: side.server.engine,
      predictedTokPerS: predicted === null ? null : Math.round(predicted * 10) / 10,
      ...(side.relayed ? {} : { predictionNote: 'no node relays this stream: the relay term is left out' }),
      servedTokPerS: served,
      ratio: ratio(predicted, served.median),
      arithmetic: side.plan.speedArithmetic,
    };
  });
}

/** The backend the node's own choice of engine stands for in the planner (src/node/default-engine.ts picks it). */
function defaultBackend(node: Server): string {
  return node.engine.startsWith('llama-server') ? 'llama_server-cpu' : 'llama_cpp-cpu';
}

async function main(): Promise<void> {
  const loadAtStart = loadavg()[0]!;
  const dir = values['model-dir']!;
  const models = [await tinyModel(dir), await ensureBenchModel('20M', 'f16', dir), ...(quick ? [] : [await ensureBenchModel('200M', 'f16', dir)])];
  const server = await ensureLlamaServer();
  const rpc = await findEngine('ggml-rpc-server');
  if (rpc === null) throw new Error('ggml-rpc-server is not built: run `shoal doctor --fix`');
  const bandwidth = await measureReadBandwidth({ threads });
  const bandwidthBytesPerS = bandwidth.gbPerSecond * 1e9;
  log(BENCHMARK, `measured bandwidth ${bandwidth.gbPerSecond} GB/s with ${threads} threads`);
  const results: Record<string, unknown>[] = [];
  for (const model of models) {
    const facts = await readGgufFacts(model.path);
    const serving = { model, threads, parallel: 1, contextPerSlot };
    const started: Server[] = [];
    try {
      log(BENCHMARK, `${model.name}: starting a Shoal node, llama-server, and llama-server --rpc over two ggml-rpc-servers`);
      const shoal = await startShoal(serving);
      started.push(shoal);
      const inProcess = await startShoal({ ...serving, engine: 'llama_cpp' });
      started.push(inProcess);
      const llama = await startLlamaServer(server, serving);
      started.push(llama);
      const splitPlan = planFor(model, facts, ['llama_server-cpu', 'rpc-cpu'], bandwidthBytesPerS, 2);
      const split = await startSplit(server, rpc, model, splitPlan);
      started.push(split);
      const sides: Side[] = [
        { shape: 'single', backend: `${defaultBackend(shoal)} (the node's default path)`, server: shoal, plan: planFor(model, facts, [defaultBackend(shoal)], bandwidthBytesPerS, 1), relayed: true },
        { shape: 'single', backend: 'llama_cpp-cpu', server: inProcess, plan: planFor(model, facts, ['llama_cpp-cpu'], bandwidthBytesPerS, 1), relayed: true },
        { shape: 'single', backend: 'llama_server-cpu', server: llama, plan: planFor(model, facts, ['llama_server-cpu'], bandwidthBytesPerS, 1), relayed: false },
        { shape: splitPlan.shape, backend: 'llama_server-cpu + rpc-cpu', server: split, plan: splitPlan, relayed: false },
      ];
      const figures = await measure(sides);
      for (const f of figures) log(BENCHMARK, `${model.name} ${String(f.shape)} ${String(f.backend)}: predicted ${String(f.predictedTokPerS)}, served ${(f.servedTokPerS as { median: number }).median} tok/s, ratio ${String(f.ratio)}`);
      results.push({ model: { name: model.name, params: model.params, type: model.type, bytes: model.bytes, layers: facts.blockCount }, shapes: figures, loadAverage1m: Math.round(loadavg()[0]! * 100) / 100 });
    } finally {
      for (const s of started.reverse()) await s.stop();
    }
  }
  const ratios = results.flatMap((r) => (r.shapes as { ratio: number | null }[]).map((s) => s.ratio)).filter((r): r is number => r !== null);
  printResult({
    benchmark: BENCHMARK,
    quick,
    method:
      `predicted = the planner's plan for each shape over nodes reporting the bandwidth measured now; served = (tokens of a ${longTokens}-token decode − tokens of a ${shortTokens}-token one) / ` +
      `(difference of their end-to-end streaming times), median of ${reps}, sides alternating; ratio = predicted / served, target [0.5, 2]`,
    threads,
    memoryBandwidthGbPerS: bandwidth.gbPerSecond,
    replicas: 'not run: each replica is a single placement on its own node; the plan shows the slowest copy\'s single figure',
    models: results,
    allWithin2x: ratios.length > 0 && ratios.every((r) => r >= 0.5 && r <= 2),
    loadAverage1m: { start: Math.round(loadAtStart * 100) / 100, end: Math.round(loadavg()[0]! * 100) / 100 },
    machine: machineInfo(),
    versions: await versions(),
  });
}

await main();
