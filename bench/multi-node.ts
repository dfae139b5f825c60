import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import type { InstanceView, StatusView } from '../src/api/control/control.js';
import { findEngine } from '../src/doctor/engines.js';
import { engineRecordDir, reapOrphans } from '../src/worker/engines/orphans.js';
import { acceptsConnection } from '../src/worker/engines/rpc-donor.js';
import { shoal } from '../test/support/cli.js';
import { freePort, startTestNode, type TestNode } from '../test/support/node-process.js';
import { splitBudgetBytes } from '../test/support/split-model.js';
import { benchPrompt, defaultEngineThreads, liveGroups, liveNodes, ensureBenchModel, ensureLlamaServer, intListOption, intOption, log, machineInfo, printResult, sleep, versions, type BenchModel, type TensorType } from './common.js';
import { alternation, percentiles, ratio, summarize, type Summary } from './stats.js';

/**
 * Multi-node serving on loopback, with real `shoal run` nodes joined into one cluster (join codes,
 * no mDNS) and instances placed through `POST /place_instance`:
 *
 * 1. remote vs local: one instance on one node, asked through that node and through another (one
 *    data-plane hop), alternating; decode tokens/s after the first token, and time to first token;
 * 2. pooled split vs one node vs llama.cpp RPC by hand: the same model as a pooled split over two
 *    nodes whose `--memory-budget` holds no full copy, as one copy on an unconstrained node, and as
 *    `llama-server --rpc` over two hand-launched `ggml-rpc-server`s (the shape Shoal's driver has:
 *    a CPU build stops counting its own CPU as a device once --rpc is given, so the driver runs an
 *    rpc server for its own share too), with the driver's own arguments, asked on `/completion`;
 * 3. replicas under load: a model placed with 2 replicas, bursts of 1, 4 and 16 concurrent clients
 *    spread over both nodes' APIs; aggregate tokens/s and TTFT p50/p95.
 *
 * The three nodes share this one machine where a real cluster gives each node its own: engine threads
 * default to the machine's cores divided among the nodes (at least 1), so the engines do not
 * oversubscribe the cores the nodes' own processes need to relay (3 x 2 spinning threads on 2 cores
 * measured contention, not Shoal: remote/local fell to 0.81 and 16 replica clients to 64 tok/s).
 *
 * Every request is a streaming text completion (temperature 0, a prompt new to every side); decode
 * tokens/s = (tokens − 1) / (stream end − first token). Prints one JSON object. A section that cannot
 * run is reported with its error and the process exits 1 after printing; speed figures never fail it.
 */

const BENCHMARK = 'multi-node';
/** Hops between the API node asked and the node running the instance, in the remote side of section 1. */
const REMOTE_HOPS = 1;
const SINGLE_MODEL = 'bench/multi-node-single';
const POOLED_MODEL = 'bench/multi-node-pooled';
const REPLICA_MODEL = 'bench/multi-node-replicas';
/** Context per sequence of the single and pooled cards: splitBudgetBytes assumes 512 × 1. */
const SPLIT_CONTEXT_TOKENS = 512;
const REPLICA_CONTEXT_TOKENS = 256;
const NODE_READY_TIMEOUT_MS = 180_000;
const INSTANCE_READY_TIMEOUT_MS = 240_000;
const ENGINE_READY_TIMEOUT_MS = 180_000;
const NODE_STOP_GRACE_MS = 10_000;

// ---------------------------------------------------------------------------------------------------
// Pure parts (bench/multi-node.test.ts)

/** `openai`: Shoal's `/v1/completions` stream; `llama`: llama-server's native `/completion` stream. */
export type StreamFormat = 'openai' | 'llama';

export interface Sample {
  /** Request sent → first generated text received. */
  ttftMs: number;
  /** Tokens after the first, over the time after the first. */
  decodeTokPerS: number;
  tokens: number;
  /** Request sent → stream closed. */
  totalMs: number;
  /** performance.now() when the stream closed, to line up concurrent requests. */
  endedAt: number;
}

/** Complete server-sent events in `buffer` (data lines joined) and the unfinished rest. */
export function splitSse(buffer: string): { events: string[]; rest: string } {
  const text = buffer.replace(/\r\n/g, '\n');
  const events: string[] = [];
  let start = 0;
  for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n', start)) {
    const data = text
      .slice(start, end)
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''));
    if (data.length > 0) events.push(data.join('\n'));
    start = end + 2;
  }
  return { events, rest: text.slice(start) };
}

export interface ChunkReading {
  /** The event carries generated text. */
  content: boolean;
  /** The server's own count of generated tokens, when this event states it. */
  tokens: number | null;
  done: boolean;
}

/** What one event's data says; an error event throws with the server's message. */
export function readChunk(data: string, format: StreamFormat): ChunkReading {
  if (data === '[DONE]') return { content: false, tokens: null, done: true };
  const chunk = JSON.parse(data) as Record<string, unknown>;
  if (chunk.error !== undefined && chunk.error !== null) throw new Error(`the stream carried an error: ${JSON.stringify(chunk.error)}`);
  if (format === 'llama') {
    const stop = chunk.stop === true;
    return { content: typeof chunk.content === 'string' && chunk.content.length > 0, tokens: stop && typeof chunk.tokens_predicted === 'number' ? chunk.tokens_predicted : null, done: stop };
  }
  const choices = chunk.choices as { text?: string | null }[] | undefined;
  const usage = chunk.usage as { completion_tokens?: unknown } | null | undefined;
  return { content: typeof choices?.[0]?.text === 'string' && choices[0].text.length > 0, tokens: typeof usage?.completion_tokens === 'number' ? usage.completion_tokens : null, done: false };
}

/** Tokens after the first over the time after the first; NaN when there is no such interval. */
export function decodeRate(tokens: number, firstAt: number, endAt: number): number {
  return tokens > 1 && endAt > firstAt ? ((tokens - 1) * 1000) / (endAt - firstAt) : NaN;
}

/**
 * The hand-launched twin of a pooled driver: the driver's own llama-server arguments with its port
 * and RPC servers replaced, so the two differ only in how the RPC servers are reached (Shoal's data
 * plane tunnel vs a plain loopback socket) and in who launched them.
 */
export function mirrorDriverArgs(argv: readonly string[], replace: { port: number; rpcServers: readonly string[] }): string[] {
  const args = [...argv];
  const set = (flag: string, value: string): void => {
    const at = args.indexOf(flag);
    if (at < 0 || at + 1 >= args.length) throw new Error(`the driver's arguments have no ${flag} <value>: ${argv.join(' ')}`);
    args[at + 1] = value;
  };
  set('--port', String(replace.port));
  set('--rpc', replace.rpcServers.join(','));
  return args;
}

export interface SideFigures {
  decodeTokPerS: Summary;
  ttftMs: Summary;
  tokensPerRun: number[];
}

export function figures(samples: readonly Sample[]): SideFigures {
  return { decodeTokPerS: summarize(samples.map((s) => s.decodeTokPerS)), ttftMs: summarize(samples.map((s) => s.ttftMs)), tokensPerRun: samples.map((s) => s.tokens) };
}

/**
 * TTFT overhead of one side over another, per hop: the difference of the medians, and the median of
 * the per-repetition differences (the two ran back to back in each repetition, so drift cancels).
 */
export function ttftOverhead(slower: readonly Sample[], faster: readonly Sample[], hops: number): { perHopMs: number; pairedPerHopMs: Summary } {
  const median = (list: readonly Sample[]) => summarize(list.map((s) => s.ttftMs)).median;
  const pairs = Math.min(slower.length, faster.length);
  const diffs = Array.from({ length: pairs }, (_, i) => (slower[i]!.ttftMs - faster[i]!.ttftMs) / hops);
  return { perHopMs: Math.round(((median(slower) - median(faster)) / hops) * 100) / 100, pairedPerHopMs: summarize(diffs) };
}

/** All tokens of a burst over the time from its start to its last stream's end. */
export function burstTokPerS(samples: readonly Sample[], startedAt: number): number {
  if (samples.length === 0) return NaN;
  const tokens = samples.reduce((sum, s) => sum + s.tokens, 0);
  const lastEnd = Math.max(...samples.map((s) => s.endedAt));
  return lastEnd > startedAt ? (tokens * 1000) / (lastEnd - startedAt) : NaN;
}

/** Which API (index into `apis`) client `client` of repetition `rep` asks: spread evenly, rotated per repetition. */
export function apiFor(client: number, rep: number, apis: number): number {
  return (client + rep) % apis;
}

// ---------------------------------------------------------------------------------------------------
// Streaming client

interface Target {
  name: string;
  url: string;
  format: StreamFormat;
  /** The model id to ask for (Shoal); null for a llama-server, which serves one. */
  model: string | null;
}

async function streamCompletion(target: Target, prompt: string, maxTokens: number): Promise<Sample> {
  // The sampling Shoal's llama_server engine sends (greedy, no top-k/min-p, no repeat penalty).
  const body =
    target.format === 'openai'
      ? { model: target.model, prompt, max_tokens: maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } }
      : { prompt, n_predict: maxTokens, temperature: 0, top_k: 0, min_p: 0, top_p: 1, repeat_penalty: 1, cache_prompt: true, stream: true };
  const start = performance.now();
  const res = await fetch(`${target.url}${target.format === 'openai' ? '/v1/completions' : '/completion'}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok || !res.body) throw new Error(`${target.name} (${target.url}) answered ${res.status}: ${await res.text()}`);
  let first = 0;
  let chunks = 0;
  let stated: number | null = null;
  let buffer = '';
  const decoder = new TextDecoder();
  for await (const bytes of res.body) {
    const parsed = splitSse(buffer + decoder.decode(bytes as Uint8Array, { stream: true }));
    buffer = parsed.rest;
    for (const data of parsed.events) {
      const reading = readChunk(data, target.format);
      if (reading.content) {
        if (first === 0) first = performance.now();
        chunks += 1;
      }
      if (reading.tokens !== null) stated = reading.tokens;
    }
  }
  const end = performance.now();
  if (first === 0) throw new Error(`${target.name} (${target.url}) streamed no text`);
  const tokens = stated ?? chunks;
  return { ttftMs: first - start, decodeTokPerS: decodeRate(tokens, first, end), tokens, totalMs: end - start, endedAt: end };
}

// Processes: registered in common.ts's liveNodes / liveGroups, which end them when this process exits.

async function stopNode(node: TestNode): Promise<void> {
  if (!liveNodes.delete(node)) return;
  const timer = setTimeout(() => node.process.kill('SIGKILL'), NODE_STOP_GRACE_MS);
  await node.stop('SIGTERM');
  clearTimeout(timer);
  // After a SIGKILL the node's engines outlive it; the next start would reap them, so do it now.
  await reapOrphans(node.dataDir, pino({ level: 'silent' }));
}

interface Engine {
  pid: number;
  output(): string;
  exited: Promise<void>;
  stop(): Promise<void>;
}

function launch(binary: string, args: string[]): Engine {
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const pid = child.pid!;
  liveGroups.add(pid);
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString('utf8')).slice(-8000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const kill = (signal: NodeJS.Signals): void => {
    try {
      process.kill(-pid, signal);
    } catch {
      // already gone
    }
  };
  return {
    pid,
    output: () => output,
    exited,
    stop: async () => {
      if (!liveGroups.delete(pid)) return;
      kill('SIGTERM');
      const timer = setTimeout(() => kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>, exited?: Promise<void>): Promise<T> {
  let dead = false;
  void exited?.then(() => (dead = true));
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    if (dead) throw new Error(`the process exited while waiting for ${what}`);
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      if ((error as { fatal?: unknown }).fatal === true) throw error;
      last = error;
    }
    await sleep(150);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message ?? String(last)}` : ''}`);
}

// ---------------------------------------------------------------------------------------------------
// The cluster

interface Member {
  name: string;
  node: TestNode;
  nodeId: string;
  budgetBytes: number | null;
}

async function state(node: TestNode): Promise<StatusView> {
  const res = await fetch(`${node.url}/state`);
  if (!res.ok) throw new Error(`GET /state on ${node.url}: ${res.status} ${await res.text()}`);
  return (await res.json()) as StatusView;
}

async function post(node: TestNode, path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${node.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

function card(id: string, name: string, modelPath: string, runtime: { contextTokens: number; parallel: number }): string {
  return [
    `id = "${id}"`,
    `name = "${name}"`,
    'tasks = ["completion", "chat"]',
    // The managed engines only, so every side runs the same llama.cpp build as the hand-launched pair.
    'compatible_backends = ["llama_server-cpu", "rpc-cpu"]',
    'backend_preference = ["llama_server-cpu"]',
    '',
    '[source]',
    'kind = "file"',
    `path = "${modelPath}"`,
    '',
    '[runtime]',
    `context_size = ${runtime.contextTokens}`,
    `parallel = ${runtime.parallel}`,
    '',
  ].join('\n');
}

/**
 * Places `body` through `via` and waits until every runner of the instance is ready. A 409 is retried
 * for a while: a node's memory offer reaches the master with its next telemetry report, so an
 * instance just deleted may still be counted against it.
 */
async function place(via: TestNode, body: Record<string, unknown>): Promise<InstanceView> {
  const placed = await until(`placing ${JSON.stringify(body)}`, 60_000, async () => {
    const res = await post(via, '/place_instance', body);
    if (res.status === 201) return res.body.instance as InstanceView;
    if (res.status === 409) throw new Error(JSON.stringify(res.body));
    throw Object.assign(new Error(`POST /place_instance answered ${res.status}: ${JSON.stringify(res.body)}`), { fatal: true });
  });
  await until(`${placed.instanceId} (${String(body.model)}) to have every runner ready`, INSTANCE_READY_TIMEOUT_MS, async () => {
    const view = (await state(via)).instances.find((i) => i.instanceId === placed.instanceId);
    if (view?.runners.some((r) => r.state === 'failed')) throw new Error(`a runner failed: ${JSON.stringify(view.runners)}`);
    return view && view.runners.length === view.placements.length && view.runners.every((r) => r.state === 'ready') ? view : undefined;
  });
  return (await state(via)).instances.find((i) => i.instanceId === placed.instanceId) ?? placed;
}

async function deleteInstance(via: TestNode, instanceId: string): Promise<void> {
  await fetch(`${via.url}/instance/${instanceId}`, { method: 'DELETE', headers: { 'x-shoal-client': 'bench' } });
  await until(`${instanceId} to be gone`, 30_000, async () => ((await state(via)).instances.some((i) => i.instanceId === instanceId) ? undefined : true));
}

/** Waits until `target` answers a short request (routing tables reach every node with replicated state). */
async function answers(target: Target): Promise<void> {
  await until(`${target.name} to answer`, 30_000, async () => {
    await streamCompletion(target, 'Hello', 2);
    return true;
  });
}

/** argv of the pooled driver's llama-server: from the driver node's engine records and /proc. */
async function driverArgv(dataDir: string): Promise<string[]> {
  const dir = engineRecordDir(dataDir);
  for (const name of (await readdir(dir)).filter((n) => n.endsWith('.json'))) {
    const record = JSON.parse(await readFile(join(dir, name), 'utf8')) as { pid: number; binary: string };
    if (!record.binary.endsWith('llama-server')) continue;
    const argv = (await readFile(`/proc/${record.pid}/cmdline`, 'utf8')).replace(/\0$/, '').split('\0');
    if (argv.includes('--rpc')) return argv;
  }
  throw new Error(`no running llama-server with --rpc among the engines recorded in ${dir}`);
}

// ---------------------------------------------------------------------------------------------------
// Sections

interface Options {
  quick: boolean;
  threads: number;
  reps: number;
  maxTokens: number;
  levels: number[];
  loadReps: number;
  loadTokens: number;
}

let promptNo = 0;

/** Alternates the sides over `reps` repetitions after one unmeasured request each. */
async function abRun(sides: readonly Target[], reps: number, maxTokens: number): Promise<Record<string, Sample[]>> {
  for (const side of sides) await streamCompletion(side, benchPrompt(promptNo++), maxTokens);
  const samples: Record<string, Sample[]> = Object.fromEntries(sides.map((s) => [s.name, []]));
  for (let rep = 0; rep < reps; rep++) {
    for (const side of alternation(sides, rep)) samples[side.name]!.push(await streamCompletion(side, benchPrompt(promptNo++), maxTokens));
  }
  return samples;
}

async function remoteVsLocal(o: Options, host: Member, other: Member, instance: InstanceView): Promise<Record<string, unknown>> {
  const local: Target = { name: 'local', url: host.node.url, format: 'openai', model: SINGLE_MODEL };
  const remote: Target = { name: 'remote', url: other.node.url, format: 'openai', model: SINGLE_MODEL };
  await answers(remote);
  const samples = await abRun([local, remote], o.reps, o.maxTokens);
  const l = figures(samples.local!);
  const r = figures(samples.remote!);
  const overhead = ttftOverhead(samples.remote!, samples.local!, REMOTE_HOPS);
  const decodeRatio = ratio(r.decodeTokPerS.median, l.decodeTokPerS.median);
  log(BENCHMARK, `remote vs local: decode ${r.decodeTokPerS.median} vs ${l.decodeTokPerS.median} tok/s (${decodeRatio}); TTFT +${overhead.perHopMs} ms per hop`);
  return {
    method: `the instance runs on ${host.name}; local = asked through ${host.name}'s API, remote = through ${other.name}'s (${REMOTE_HOPS} data-plane hop), alternating which goes first`,
    instance: { instanceId: instance.instanceId, shape: instance.shape, placements: instance.placements },
    hops: REMOTE_HOPS,
    local: l,
    remote: r,
    decodeRatio,
    ttftRatio: ratio(r.ttftMs.median, l.ttftMs.median),
    ttftOverheadPerHopMs: overhead.perHopMs,
    pairedTtftOverheadPerHopMs: overhead.pairedPerHopMs,
    targets: { decodeRatio: '>= 0.95', ttftOverheadPerHopMs: '<= 15' },
    meetsTargets: { decodeRatio: decodeRatio !== null && decodeRatio >= 0.95, ttftOverheadPerHopMs: overhead.perHopMs <= 15 },
  };
}

async function pooledVsHand(o: Options, members: Member[], single: { member: Member; instance: InstanceView }, pooled: InstanceView, binaries: { server: string; rpc: string }): Promise<Record<string, unknown>> {
  const driver = pooled.placements.find((p) => p.role === 'driver');
  const driverMember = members.find((m) => m.nodeId === driver?.nodeId);
  if (!driver || !driverMember) throw new Error(`the pooled instance has no driver among the members: ${JSON.stringify(pooled.placements)}`);
  const shoalArgv = await driverArgv(driverMember.node.dataDir);

  const engines: Engine[] = [];
  try {
    const rpcPorts = [await freePort(), await freePort()];
    for (const port of rpcPorts) {
      const engine = launch(binaries.rpc, ['-H', '127.0.0.1', '-p', String(port), '-t', String(o.threads)]);
      engines.push(engine);
      await until(`ggml-rpc-server on ${port}`, ENGINE_READY_TIMEOUT_MS, async () => ((await acceptsConnection(port)) ? true : undefined), engine.exited).catch((error: unknown) => {
        throw new Error(`${(error as Error).message}\n${engine.output()}`, { cause: error });
      });
    }
    const port = await freePort();
    const handArgs = mirrorDriverArgs(shoalArgv.slice(1), { port, rpcServers: rpcPorts.map((p) => `127.0.0.1:${p}`) });
    const server = launch(binaries.server, handArgs);
    engines.push(server);
    const url = `http://127.0.0.1:${port}`;
    await until('the hand-launched llama-server', ENGINE_READY_TIMEOUT_MS, async () => ((await fetch(`${url}/health`)).status === 200 ? true : undefined), server.exited).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${server.output()}`, { cause: error });
    });

    const sides: Target[] = [
      { name: 'pooled', url: driverMember.node.url, format: 'openai', model: POOLED_MODEL },
      { name: 'singleNode', url: single.member.node.url, format: 'openai', model: SINGLE_MODEL },
      { name: 'handLaunchedRpc', url, format: 'llama', model: null },
    ];
    await answers(sides[0]!);
    const samples = await abRun(sides, o.reps, o.maxTokens);
    const p = figures(samples.pooled!);
    const s = figures(samples.singleNode!);
    const h = figures(samples.handLaunchedRpc!);
    const vsHand = ratio(p.decodeTokPerS.median, h.decodeTokPerS.median);
    log(BENCHMARK, `pooled ${p.decodeTokPerS.median}, one node ${s.decodeTokPerS.median}, hand-launched RPC ${h.decodeTokPerS.median} tok/s (pooled/hand ${vsHand})`);
    return {
      method:
        `pooled and singleNode asked on their node's API (/v1/completions; pooled through its driver ${driverMember.name}), handLaunchedRpc on llama-server's /completion, ` +
        `rotating which goes first; the hand-launched llama-server runs the pooled driver's own arguments with its port and --rpc replaced by two ggml-rpc-servers on loopback`,
      pooledInstance: { instanceId: pooled.instanceId, shape: pooled.shape, placements: pooled.placements, predictedDecodeTokPerS: pooled.predictedDecodeTokPerS, warnings: pooled.warnings },
      singleInstance: { instanceId: single.instance.instanceId, node: single.member.name, predictedDecodeTokPerS: single.instance.predictedDecodeTokPerS },
      shoalDriverCommand: shoalArgv.map((a) => a.replace(/^.*\/(?=llama-server$)/, '')).join(' '),
      handLaunchedCommands: [
        ...rpcPorts.map((p) => `ggml-rpc-server -H 127.0.0.1 -p ${p} -t ${o.threads}`),
        `llama-server ${handArgs.join(' ')}`,
      ],
      pooled: p,
      singleNode: s,
      handLaunchedRpc: h,
      pooledVsHandLaunchedDecodeRatio: vsHand,
      pooledVsSingleNodeDecodeRatio: ratio(p.decodeTokPerS.median, s.decodeTokPerS.median),
      handLaunchedVsSingleNodeDecodeRatio: ratio(h.decodeTokPerS.median, s.decodeTokPerS.median),
      pooledVsHandLaunchedTtftOverheadMs: Math.round((p.ttftMs.median - h.ttftMs.median) * 100) / 100,
      targets: { pooledVsHandLaunchedDecodeRatio: '>= 0.9' },
      meetsTargets: { pooledVsHandLaunchedDecodeRatio: vsHand !== null && vsHand >= 0.9 },
    };
  } finally {
    for (const engine of engines.reverse()) await engine.stop();
  }
}

async function replicasUnderLoad(o: Options, apis: Member[], instance: InstanceView): Promise<Record<string, unknown>> {
  const targets: Target[] = apis.map((m) => ({ name: m.name, url: m.node.url, format: 'openai', model: REPLICA_MODEL }));
  for (const target of targets) await answers(target);
  const burst = async (clients: number, rep: number): Promise<{ samples: (Sample & { api: string })[]; aggregateTokPerS: number }> => {
    const started = performance.now();
    const samples = await Promise.all(
      Array.from({ length: clients }, async (_, i) => {
        const target = targets[apiFor(i, rep, targets.length)]!;
        return { ...(await streamCompletion(target, benchPrompt(promptNo++), o.loadTokens)), api: target.name };
      }),
    );
    return { samples, aggregateTokPerS: burstTokPerS(samples, started) };
  };
  // Unmeasured: one burst as large as the largest, so every slot of both replicas has run once.
  await burst(Math.max(...o.levels), 0);
  const levels = [];
  for (const clients of o.levels) {
    const bursts = [];
    for (let rep = 0; rep < o.loadReps; rep++) bursts.push(await burst(clients, rep));
    const all = bursts.flatMap((b) => b.samples);
    const aggregate = summarize(bursts.map((b) => b.aggregateTokPerS));
    log(BENCHMARK, `replicas, ${clients} client(s): ${aggregate.median} tok/s aggregate, TTFT p50 ${percentiles(all.map((s) => s.ttftMs)).p50} ms`);
    levels.push({
      clients,
      aggregateTokPerS: aggregate,
      ttftMs: percentiles(all.map((s) => s.ttftMs)),
      requestMs: percentiles(all.map((s) => s.totalMs)),
      // No per-request decode rate: under load a stream's tokens can arrive bunched in one read, which
      // makes (tokens − 1) / (end − first) meaningless for one request. How long a stream ran after its
      // first token says whether it streamed at all (near 0 ms: everything arrived at once).
      afterFirstTokenMs: percentiles(all.map((s) => s.totalMs - s.ttftMs)),
      byApi: Object.fromEntries(
        targets.map((t) => {
          const mine = all.filter((s) => s.api === t.name);
          return [t.name, { requests: mine.length, ttftMs: percentiles(mine.map((s) => s.ttftMs)), afterFirstTokenMs: percentiles(mine.map((s) => s.totalMs - s.ttftMs)) }];
        }),
      ),
      tokensPerRequest: summarize(all.map((s) => s.tokens)),
    });
  }
  return {
    method:
      `bursts of N streaming completions sent together, client i asking ${apis.map((m) => m.name).join(' / ')} in turn (rotated per repetition); ` +
      'aggregate = all tokens of a burst / (burst start → last stream end); TTFT percentiles over every request of every repetition at that level',
    instance: { instanceId: instance.instanceId, shape: instance.shape, parallel: instance.parallel, contextTokens: instance.contextTokens, placements: instance.placements },
    repsPerLevel: o.loadReps,
    maxTokens: o.loadTokens,
    levels,
  };
}

/** The benchmark's nodes: roomy, narrow-1, narrow-2. */
const NODE_COUNT = 3;

/** Engine threads per node when NODE_COUNT nodes share this machine (see the header). */
function sharedEngineThreads(quick: boolean): number {
  return Math.max(1, Math.floor(defaultEngineThreads(quick) / NODE_COUNT));
}

// ---------------------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      params: { type: 'string' },
      'replica-params': { type: 'string', default: '20M' },
      type: { type: 'string', default: 'f16' },
      threads: { type: 'string' },
      reps: { type: 'string' },
      tokens: { type: 'string' },
      levels: { type: 'string' },
      'load-reps': { type: 'string' },
      'load-tokens': { type: 'string' },
      'model-dir': { type: 'string', default: 'bench/models' },
    },
  });
  const quick = values.quick === true;
  const o: Options = {
    quick,
    threads: intOption('threads', values.threads, sharedEngineThreads(quick)),
    reps: intOption('reps', values.reps, quick ? 5 : 8),
    maxTokens: intOption('tokens', values.tokens, quick ? 48 : 128),
    levels: intListOption('levels', values.levels, [1, 4, 16]),
    loadReps: intOption('load-reps', values['load-reps'], quick ? 1 : 3),
    loadTokens: intOption('load-tokens', values['load-tokens'], quick ? 24 : 64),
  };
  const loadAtStart = loadavg()[0]!;
  const started = performance.now();
  const model = await ensureBenchModel(values.params ?? '100M', values.type as TensorType, values['model-dir']);
  const replicaModel = await ensureBenchModel(values['replica-params']!, values.type as TensorType, values['model-dir']);
  const server = await ensureLlamaServer();
  const rpc = await findEngine('ggml-rpc-server');
  if (rpc === null) throw new Error('ggml-rpc-server is not built: run `shoal doctor --fix`');
  const budgetBytes = await splitBudgetBytes(model.path);

  const root = await mkdtemp(join(tmpdir(), 'shoal-bench-multi-node-'));
  const members: Member[] = [];
  const sections: Record<string, unknown> = {};
  let failed = false;
  try {
    // Three nodes: one that holds the whole model, two whose budget holds only part of it.
    const plans = [
      { name: 'roomy', budget: null },
      { name: 'narrow-1', budget: budgetBytes },
      { name: 'narrow-2', budget: budgetBytes },
    ];
    assert(plans.length === NODE_COUNT);
    log(BENCHMARK, `starting ${plans.length} nodes (${o.threads} engine thread(s) each; budget ${budgetBytes} bytes on the narrow ones)`);
    const cards = [
      card(SINGLE_MODEL, 'multi-node bench, single copy', resolve(model.path), { contextTokens: SPLIT_CONTEXT_TOKENS, parallel: 1 }),
      card(POOLED_MODEL, 'multi-node bench, pooled split', resolve(model.path), { contextTokens: SPLIT_CONTEXT_TOKENS, parallel: 1 }),
      card(REPLICA_MODEL, 'multi-node bench, replicas', resolve(replicaModel.path), { contextTokens: REPLICA_CONTEXT_TOKENS, parallel: Math.max(1, Math.ceil(Math.max(...o.levels) / 2)) }),
    ];
    // Settled, not raced: a node still starting when another failed must be a member before cleanup.
    const startedNodes = await Promise.allSettled(
      plans.map(async (plan) => {
        const dataDir = join(root, plan.name);
        await mkdir(join(dataDir, 'cards'), { recursive: true });
        await Promise.all(cards.map((text, i) => writeFile(join(dataDir, 'cards', `bench-${i}.toml`), text)));
        const args = ['--name', plan.name, '--threads', String(o.threads), '--gpu', 'false', ...(plan.budget !== null ? ['--memory-budget', String(plan.budget)] : [])];
        const node = await startTestNode({ args, dataDir, readyTimeoutMs: NODE_READY_TIMEOUT_MS, env: { SHOAL_LOG_LEVEL: process.env.SHOAL_LOG_LEVEL ?? 'warn' } });
        liveNodes.add(node);
        return { plan, node };
      }),
    );
    const nodes = startedNodes.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    for (const { plan, node } of nodes) members.push({ name: plan.name, node, nodeId: '', budgetBytes: plan.budget });
    const refused = startedNodes.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (refused) throw refused.reason;
    for (const member of members) member.nodeId = (await state(member.node)).nodeId;
    const [roomy, narrow1, narrow2] = members as [Member, Member, Member];
    for (const member of [narrow1, narrow2]) {
      const invite = await shoal(roomy.node, 'invite', '--code');
      const code = /shoal1-\S+/.exec(invite.stdout)?.[0];
      if (!code) throw new Error(`no join code from 'shoal invite --code': ${invite.stdout}${invite.stderr}`);
      const joined = await shoal(member.node, 'join', code);
      if (joined.code !== 0) throw new Error(`'shoal join' on ${member.name} failed: ${joined.stderr}`);
    }
    await until('resources from all three nodes', 60_000, async () => (Object.keys((await state(roomy.node)).resources).length === members.length ? true : undefined));
    log(BENCHMARK, `cluster formed in ${Math.round(performance.now() - started)} ms`);

    let single: InstanceView | null = null;
    try {
      single = await place(roomy.node, { model: SINGLE_MODEL, exclude: [narrow1.nodeId, narrow2.nodeId] });
      sections.remoteVsLocal = await remoteVsLocal(o, roomy, narrow1, single);
    } catch (error) {
      failed = true;
      sections.remoteVsLocal = { error: (error as Error).message };
      log(BENCHMARK, `remote vs local failed: ${(error as Error).message}`);
    }

    let pooled: InstanceView | null = null;
    try {
      if (!single) throw new Error('the single copy could not be placed');
      pooled = await place(roomy.node, { model: POOLED_MODEL, exclude: [roomy.nodeId] });
      if (pooled.shape !== 'pooled') throw new Error(`expected a pooled split over the narrow nodes, got ${pooled.shape}: ${JSON.stringify(pooled.placements)}`);
      sections.pooledSplit = await pooledVsHand(o, members, { member: roomy, instance: single }, pooled, { server, rpc });
    } catch (error) {
      failed = true;
      sections.pooledSplit = { error: (error as Error).message };
      log(BENCHMARK, `pooled split failed: ${(error as Error).message}`);
    }
    for (const instance of [single, pooled]) if (instance) await deleteInstance(roomy.node, instance.instanceId);

    try {
      const replicas = await place(roomy.node, { model: REPLICA_MODEL, replicas: 2, exclude: [narrow2.nodeId] });
      const hosts = members.filter((m) => replicas.placements.some((p) => p.nodeId === m.nodeId));
      sections.replicas = await replicasUnderLoad(o, hosts.length === 2 ? hosts : [roomy, narrow1], replicas);
      await deleteInstance(roomy.node, replicas.instanceId);
    } catch (error) {
      failed = true;
      sections.replicas = { error: (error as Error).message };
      log(BENCHMARK, `replicas under load failed: ${(error as Error).message}`);
    }
  } catch (error) {
    failed = true;
    sections.setup = { error: (error as Error).message };
    log(BENCHMARK, `could not form the cluster: ${(error as Error).message}`);
  } finally {
    await Promise.all(members.map((m) => stopNode(m.node)));
    // A node that failed during start is stopped by startTestNode; one started but not yet a member is here.
    await Promise.all([...liveNodes].map(stopNode));
    await rm(root, { recursive: true, force: true });
  }

  const durationS = Math.round((performance.now() - started) / 100) / 10;
  printResult({
    benchmark: BENCHMARK,
    quick,
    method:
      'real `shoal run` nodes on loopback (--no-mdns), joined with join codes; instances placed with POST /place_instance, `exclude` pinning where they go; ' +
      'streaming text completions at temperature 0, a prompt new to every side; decode tok/s = (tokens − 1) / (stream end − first token)',
    noise:
      `${machineInfo().cores} cores shared with other work; every node, engine and the client share them, so the figures are noisy ` +
      '(see loadAverage1m and each figure\'s spread); targets are reported, never enforced',
    model: modelFacts(model),
    replicaModel: modelFacts(replicaModel),
    threads: o.threads,
    reps: o.reps,
    maxTokens: o.maxTokens,
    contextTokens: SPLIT_CONTEXT_TOKENS,
    nodes: members.map((m) => ({ name: m.name, nodeId: m.nodeId, memoryBudgetBytes: m.budgetBytes })),
    ...sections,
    targets: { remoteDecodeRatio: '>= 0.95', ttftOverheadPerHopMs: '<= 15', pooledVsHandLaunchedDecodeRatio: '>= 0.9' },
    durationS,
    loadAverage1m: { start: Math.round(loadAtStart * 100) / 100, end: Math.round(loadavg()[0]! * 100) / 100 },
    machine: machineInfo(),
    versions: await versions(),
  });
  return failed ? 1 : 0;
}

function modelFacts(model: BenchModel): Record<string, unknown> {
  return { name: model.name, params: model.params, type: model.type, bytes: model.bytes };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exitCode = await main();
}
